"""The seed's validation checklist, decided on the stack graph.

The seed ends with a checklist to run against a live cluster. Each item that the program alone
decides is a function below: it takes the ``Graph`` of a run and returns one line per failure, so
the same checks run on every stack file and on deliberately broken graphs.

| seed item                                                         | check                        |
|-------------------------------------------------------------------|------------------------------|
| NVIDIA device plugin reports GPUs on all training nodes           | ``gpu_device_plugin``        |
| EFA device plugin reports EFA interfaces                          | ``efa_device_plugin``        |
| Priority classes are created and applied to training jobs         | ``priority_classes``         |
| PDB is protecting running training pods                           | ``pod_disruption_budgets``   |
| GPU taints prevent non-GPU workloads from scheduling on GPU nodes | ``gpu_taints``               |
| Training pods are anti-affined (one per node for multi-node)      | ``one_pod_per_node``         |
| (3+ nodes) Topology labels applied to GPU nodes                   | ``topology_labels``          |
| (3+ nodes) Training pods use topology-aware spread constraints    | ``topology_aware_spread``    |

A Kueue topology request (``kueue.x-k8s.io/podset-{preferred,required}-topology`` naming a network
layer) counts as topology-aware placement: Kueue places the whole job in one network block.

GPU pools are the managed node groups and the Karpenter NodePools of the graph. "Reports" and
"applied" are what a live cluster shows; on the graph they mean a plugin or labeler is
deployed that will run on every such node (it tolerates the node's taint and selects its labels and
instance type), or, for topology labels, that EKS labels the pool's instance types itself.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator, Optional

import pytest

from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES, eks_labels_topology
from eks_gpu_training.config import GPU_NODE_ROLE_LABEL
from eks_gpu_training.addons.efa_device_plugin import CHART as EFA_CHART
from eks_gpu_training.aws.gpu_node_group import GPU_TAINT_KEY
from eks_gpu_training.addons.gpu_operator import CHART as GPU_OPERATOR_CHART
from eks_gpu_training.facts.node_os import NODE_OS_BY_AMI_TYPE
from eks_gpu_training.workloads.preflight import PREFLIGHT_COMPONENT
from eks_gpu_training.workloads.smoke_test import SMOKE_TEST_COMPONENT
from eks_gpu_training.addons.topology_labeler import NAME as TOPOLOGY_LABELER
from harness import Graph, Registration, run_main, stack_config
from k8s_semantics import EKS_TAINT_EFFECTS, tolerates

MANAGED_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE_TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-required-topology")
KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
HOSTNAME = "kubernetes.io/hostname"
NETWORK_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
WORKLOAD_KINDS = ("Job", "Deployment", "StatefulSet", "ReplicaSet")


# --- reading the graph --------------------------------------------------------------------------


def kubernetes_objects(graph: Graph, kind: str) -> list[Registration]:
    return [r for r in graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind]


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against a label set."""
    if not selector:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def requests_gpus(pod_spec: dict[str, Any]) -> bool:
    containers = pod_spec.get("containers") or []
    return any(GPU_TAINT_KEY in ((c.get("resources") or {}).get("limits") or {}) for c in containers)


def training_templates(graph: Graph) -> Iterator[tuple[Registration, dict[str, Any]]]:
    """Every workload whose pods request GPUs, except the checks (nvidia-smi smoke test, pre-flight
    DCGM and NCCL tests): (resource, pod template)."""
    for kind in WORKLOAD_KINDS:
        for resource in kubernetes_objects(graph, kind):
            template = (resource.inputs.get("spec") or {}).get("template") or {}
            labels = (template.get("metadata") or {}).get("labels") or {}
            if requests_gpus(template.get("spec") or {}) and labels.get("app.kubernetes.io/component") not in (SMOKE_TEST_COMPONENT, PREFLIGHT_COMPONENT):
                yield resource, template


def gpu_pools(graph: Graph) -> list[Registration]:
    """Managed node groups and Karpenter NodePools that bring GPU nodes (GPU instance types or the GPU role label)."""
    key, value = GPU_NODE_ROLE_LABEL
    pools = []
    for group in graph.of_type(MANAGED_NODE_GROUP):
        types = group.inputs.get("instanceTypes") or []
        if (group.inputs.get("labels") or {}).get(key) == value or any(t in GPU_INSTANCE_TYPES for t in types):
            pools.append(group)
    for pool in graph.of_type(KARPENTER_NODE_POOL):
        template = (pool.inputs.get("spec") or {}).get("template") or {}
        if ((template.get("metadata") or {}).get("labels") or {}).get(key) == value:
            pools.append(pool)
    return pools


def pool_taints(pool: Registration) -> list[dict[str, Any]]:
    """The pool's taints in Kubernetes spelling (the EKS API writes ``NO_SCHEDULE``)."""
    if pool.type == KARPENTER_NODE_POOL:
        return node_pool_template(pool)["spec"].get("taints") or []
    return [{**t, "effect": EKS_TAINT_EFFECTS.get(t["effect"], t["effect"])} for t in pool.inputs.get("taints") or []]


def node_pool_template(pool: Registration) -> dict[str, Any]:
    template = pool.inputs["spec"]["template"]
    return {"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}}


def node_class(graph: Graph, pool: Registration) -> dict[str, Any]:
    """The spec of the EC2NodeClass a Karpenter NodePool launches with."""
    name = (node_pool_template(pool)["spec"].get("nodeClassRef") or {}).get("name")
    classes = [c.inputs["spec"] for c in graph.of_type(EC2_NODE_CLASS) if c.inputs["metadata"].get("name") == name]
    return classes[0] if classes else {}


def pool_instance_types(pool: Registration, graph: Optional[Graph] = None) -> list[str]:
    """The types a pool launches: a NodePool's requirement, a node group's list, or (a Capacity
    Block's node group, which names none) the type its launch template names."""
    if pool.type == KARPENTER_NODE_POOL:
        requirements = node_pool_template(pool)["spec"].get("requirements") or []
        return [v for r in requirements if r["key"] == INSTANCE_TYPE_KEY and r["operator"] == "In" for v in r["values"]]
    if pool.inputs.get("instanceTypes") or graph is None:
        return pool.inputs.get("instanceTypes") or []
    template_id = (pool.inputs.get("launchTemplate") or {}).get("id")
    templates = [r for r in graph.of_type(LAUNCH_TEMPLATE) if r.id == template_id and r.inputs.get("instanceType")]
    return [templates[0].inputs["instanceType"]] if templates else []


def pool_node_labels(pool: Registration) -> dict[str, str]:
    labels = node_pool_template(pool)["metadata"].get("labels") if pool.type == KARPENTER_NODE_POOL else pool.inputs.get("labels")
    return {**(labels or {}), "kubernetes.io/os": "linux"}


def pool_max_nodes(pool: Registration) -> int:
    if pool.type == KARPENTER_NODE_POOL:
        gpus = (pool.inputs["spec"].get("limits") or {}).get(GPU_TAINT_KEY, 0)
        smallest = min((GPU_INSTANCE_TYPES[t].gpus for t in pool_instance_types(pool) if t in GPU_INSTANCE_TYPES), default=1)
        return int(gpus // smallest)
    return int(pool.inputs["scalingConfig"]["maxSize"])


def pool_ships_device_plugin(graph: Graph, pool: Registration) -> bool:
    """Whether the pool's node OS runs its own NVIDIA device plugin (Bottlerocket does)."""
    if pool.type == KARPENTER_NODE_POOL:
        aliases = [t.get("alias", "") for t in node_class(graph, pool).get("amiSelectorTerms") or []]
        return bool(aliases) and all(a.startswith("bottlerocket@") for a in aliases)
    node_os = NODE_OS_BY_AMI_TYPE.get(pool.inputs.get("amiType", ""))
    return node_os is not None and node_os.ships_device_plugin


def releases(graph: Graph, chart: str) -> list[Registration]:
    return [r for r in graph.of_type(HELM_RELEASE) if r.inputs.get("chart") == chart]


def has_efa(graph: Graph, pool: Registration) -> bool:
    """Whether the pool's nodes get EFA interfaces (launch template or EC2NodeClass)."""
    if pool.type == KARPENTER_NODE_POOL:
        interfaces = node_class(graph, pool).get("networkInterfaces") or []
    else:
        template_id = (pool.inputs.get("launchTemplate") or {}).get("id")
        interfaces = [i for t in graph.of_type(LAUNCH_TEMPLATE) if t.id == template_id for i in t.inputs.get("networkInterfaces") or []]
    return any(i.get("interfaceType") in ("efa", "efa-only") for i in interfaces)


def untolerated(tolerations: list[dict[str, Any]], pool: Registration) -> list[str]:
    return [f"{t['key']}:{t['effect']}" for t in pool_taints(pool) if not tolerates(tolerations, t)]


# --- the checklist ------------------------------------------------------------------------------


def gpu_device_plugin(graph: Graph) -> list[str]:
    """One GPU Operator release, and a device plugin for every GPU pool: the operator's (whose operands
    and NFD worker tolerate the pool's taints) or the one the pool's node OS ships."""
    operators = releases(graph, GPU_OPERATOR_CHART)
    if len(operators) != 1:
        return [f"{len(operators)} GPU Operator releases (need exactly one)"]
    values = operators[0].inputs["values"]
    plugin_on = (values.get("devicePlugin") or {}).get("enabled", True)
    operand_tolerations = (values.get("daemonsets") or {}).get("tolerations") or []
    nfd_tolerations = ((values.get("node-feature-discovery") or {}).get("worker") or {}).get("tolerations") or []
    failures = []
    for pool in gpu_pools(graph):
        if pool_ships_device_plugin(graph, pool):
            continue
        if not plugin_on:
            failures.append(f"GPU pool {pool.name}: its node OS has no device plugin and the GPU Operator's is off")
        for who, tolerations in (("the GPU Operator's operands do", operand_tolerations), ("the NFD worker does", nfd_tolerations)):
            missing = untolerated(tolerations, pool)
            if missing:
                failures.append(f"GPU pool {pool.name}: {who} not tolerate {', '.join(missing)}")
    return failures


def efa_device_plugin(graph: Graph) -> list[str]:
    """Where a GPU pool has EFA, one EFA device plugin release that runs on the pool's nodes."""
    efa_pools = [pool for pool in gpu_pools(graph) if has_efa(graph, pool)]
    plugins = releases(graph, EFA_CHART)
    if not efa_pools:
        return []
    if len(plugins) != 1:
        return [f"{len(plugins)} EFA device plugin releases for EFA pools {', '.join(p.name for p in efa_pools)} (need exactly one)"]
    values = plugins[0].inputs["values"]
    supported = set((values.get("supportedInstanceLabels") or {}).get("values") or [])
    failures = []
    for pool in efa_pools:
        missing = untolerated(values.get("tolerations") or [], pool)
        if missing:
            failures.append(f"GPU pool {pool.name}: the EFA device plugin does not tolerate {', '.join(missing)}")
        unsupported = [t for t in pool_instance_types(pool, graph) if t not in supported]
        if unsupported:
            failures.append(f"GPU pool {pool.name}: the EFA device plugin does not run on {', '.join(unsupported)}")
        labels = pool_node_labels(pool)
        if any(labels.get(k) != v for k, v in (values.get("nodeSelector") or {}).items()):
            failures.append(f"GPU pool {pool.name}: the EFA device plugin's nodeSelector does not match the pool's labels")
    return failures


def priority_classes(graph: Graph) -> list[str]:
    """Priority classes are created, at most one is the global default, and every training template names one."""
    classes = kubernetes_objects(graph, "PriorityClass")
    failures = [] if classes else ["no PriorityClass is created"]
    defaults = sorted(c.inputs["metadata"]["name"] for c in classes if c.inputs.get("globalDefault"))
    if len(defaults) > 1:
        failures.append(f"several PriorityClasses are the global default: {', '.join(defaults)}")
    names = {c.inputs["metadata"]["name"] for c in classes}
    for resource, template in training_templates(graph):
        used = template["spec"].get("priorityClassName")
        if used not in names:
            failures.append(f"{resource.name}: priorityClassName {used!r} is not a PriorityClass the stack creates")
    return failures


def pod_disruption_budgets(graph: Graph) -> list[str]:
    """Every training Job's pods are covered by exactly one PDB that lets no voluntary disruption take one."""
    failures = []
    pdbs = kubernetes_objects(graph, "PodDisruptionBudget")
    for resource, template in training_templates(graph):
        namespace = resource.inputs["metadata"].get("namespace")
        labels = template["metadata"]["labels"]
        covering = [
            p for p in pdbs
            if p.inputs["metadata"].get("namespace") == namespace and selector_matches(p.inputs["spec"].get("selector"), labels)
        ]
        if len(covering) != 1:
            failures.append(f"{resource.name}: {len(covering)} PodDisruptionBudgets select its pods (need exactly one)")
            continue
        budget = covering[0].inputs["spec"]
        pods = resource.inputs["spec"].get("parallelism", 1)
        # A Job is no scalable controller: for its pods only an integer minAvailable is supported.
        if budget.get("minAvailable") != pods or "maxUnavailable" in budget:
            failures.append(f"{resource.name}: its PDB allows disrupting a pod (need minAvailable {pods:g})")
    return failures


def gpu_taints(graph: Graph) -> list[str]:
    """Every GPU pool taints its nodes nvidia.com/gpu with NoSchedule."""
    failures = []
    for pool in gpu_pools(graph):
        if not any(t.get("key") == GPU_TAINT_KEY and t.get("effect") in ("NO_SCHEDULE", "NoSchedule") for t in pool_taints(pool)):
            failures.append(f"GPU pool {pool.name} has no {GPU_TAINT_KEY} NoSchedule taint")
    return failures


def one_pod_per_node(graph: Graph) -> list[str]:
    """Every training template requires that no two of its pods share a node."""
    failures = []
    for resource, template in training_templates(graph):
        affinity = (template["spec"].get("affinity") or {}).get("podAntiAffinity") or {}
        terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        if not any(t.get("topologyKey") == HOSTNAME and selector_matches(t.get("labelSelector"), template["metadata"]["labels"]) for t in terms):
            failures.append(f"{resource.name}: no required pod anti-affinity on {HOSTNAME} against its own pods")
    return failures


def topology_aware_spread(graph: Graph) -> list[str]:
    """Every training template spreads one pod per node (DoNotSchedule) and places by network topology."""
    failures = []
    for resource, template in training_templates(graph):
        spec, labels = template["spec"], template["metadata"]["labels"]
        spread = spec.get("topologySpreadConstraints") or []
        if not any(
            c.get("topologyKey") == HOSTNAME and c.get("whenUnsatisfiable") == "DoNotSchedule" and selector_matches(c.get("labelSelector"), labels)
            for c in spread
        ):
            failures.append(f"{resource.name}: no DoNotSchedule spread over {HOSTNAME} of its own pods")
        preferred = ((spec.get("affinity") or {}).get("podAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        topology_keys = [c.get("topologyKey", "") for c in spread] + [t["podAffinityTerm"].get("topologyKey", "") for t in preferred]
        # Kueue's topology request places the whole job in one network block at admission.
        annotations = template["metadata"].get("annotations") or {}
        topology_keys += [level for key, level in annotations.items() if key in KUEUE_TOPOLOGY_ANNOTATIONS]
        if not any(k.startswith(NETWORK_LAYER_PREFIX) for k in topology_keys):
            failures.append(f"{resource.name}: no spread, affinity or Kueue topology request on {NETWORK_LAYER_PREFIX}N")
    return failures


def labeler_runs_on(graph: Graph, pool: Registration) -> bool:
    """Whether the topology labeler DaemonSet selects the pool's nodes and tolerates their taints."""
    node_labels = pool_node_labels(pool)
    for daemonset in kubernetes_objects(graph, "DaemonSet"):
        if daemonset.inputs["metadata"].get("name") != TOPOLOGY_LABELER:
            continue
        spec = daemonset.inputs["spec"]["template"]["spec"]
        selected = all(node_labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
        if selected and not untolerated(spec.get("tolerations") or [], pool):
            return True
    return False


def topology_labels(graph: Graph) -> list[str]:
    """GPU pools of 3 or more nodes get network-topology labels: from EKS, for the instance types EC2
    reports a topology for, or from the topology labeler running on the pool's nodes."""
    failures = []
    for pool in gpu_pools(graph):
        if pool_max_nodes(pool) < 3:
            continue
        types = pool_instance_types(pool, graph)
        if not eks_labels_topology(types) and not labeler_runs_on(graph, pool):
            failures.append(f"GPU pool {pool.name}: EKS does not label {', '.join(types)} with network topology and no labeler runs there")
    return failures


CHECKLIST: dict[str, Callable[[Graph], list[str]]] = {
    "device plugin for every GPU pool": gpu_device_plugin,
    "EFA device plugin where EFA is on": efa_device_plugin,
    "priority classes created and used by training templates": priority_classes,
    "PDB protecting training apps": pod_disruption_budgets,
    "GPU taints on every GPU pool": gpu_taints,
    "training pods anti-affined, one per node": one_pod_per_node,
    "topology labels supplied": topology_labels,
    "topology-aware spread in the templates": topology_aware_spread,
}


def checklist_failures(graph: Graph) -> list[str]:
    return [f"{item}: {failure}" for item, check in CHECKLIST.items() for failure in check(graph)]


# --- every stack passes -------------------------------------------------------------------------


def test_every_stack_passes_the_seed_checklist(stack_graph):
    stack, graph = stack_graph
    assert checklist_failures(graph) == [], stack


def test_every_stack_gives_the_checklist_something_to_check(stack_graph):
    stack, graph = stack_graph
    assert gpu_pools(graph), stack
    assert [r.inputs["metadata"]["name"] for r, _ in training_templates(graph)] == ["rl-training"], stack


# --- each item fails when its guarantee is broken -----------------------------------------------


def broken(graph: Graph, change: Callable[[Graph], None]) -> Graph:
    copied = copy.deepcopy(graph)
    change(copied)
    return copied


def first_template(graph: Graph) -> dict[str, Any]:
    return next(training_templates(graph))[1]


def operator_values(graph: Graph) -> dict[str, Any]:
    return releases(graph, GPU_OPERATOR_CHART)[0].inputs["values"]


def test_checklist_fails_without_the_gpu_operator(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("chart") != GPU_OPERATOR_CHART]

    assert checklist_failures(broken(prod_graph, drop)) == ["device plugin for every GPU pool: 0 GPU Operator releases (need exactly one)"]


def test_checklist_fails_when_al2023_nodes_get_no_device_plugin(prod_graph):
    def switch_off(graph):
        operator_values(graph)["devicePlugin"]["enabled"] = False

    assert gpu_device_plugin(broken(prod_graph, switch_off)) == [
        f"GPU pool {pool}: its node OS has no device plugin and the GPU Operator's is off" for pool in (MANAGED_POOL, KARPENTER_POOL)
    ]


def test_bottlerocket_pools_need_no_device_plugin_from_the_operator(prod_graph):
    def bottlerocket(graph):
        operator_values(graph)["devicePlugin"]["enabled"] = False
        graph.one(MANAGED_NODE_GROUP, MANAGED_POOL).inputs["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"

    assert gpu_device_plugin(broken(prod_graph, bottlerocket)) == [
        f"GPU pool {KARPENTER_POOL}: its node OS has no device plugin and the GPU Operator's is off"
    ]

    def bottlerocket_node_class(graph):
        graph.one(EC2_NODE_CLASS).inputs["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@v1.40.0"}]

    assert gpu_device_plugin(broken(broken(prod_graph, bottlerocket), bottlerocket_node_class)) == []


def test_checklist_fails_when_operands_do_not_tolerate_the_gpu_taint(prod_graph):
    def drop_tolerations(graph):
        operator_values(graph)["node-feature-discovery"]["worker"]["tolerations"] = []

    assert gpu_device_plugin(broken(prod_graph, drop_tolerations)) == [
        f"GPU pool {pool}: the NFD worker does not tolerate nvidia.com/gpu:NoSchedule" for pool in (MANAGED_POOL, KARPENTER_POOL)
    ]


def test_checklist_fails_without_the_efa_plugin_on_an_efa_pool(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("chart") != EFA_CHART]

    assert checklist_failures(broken(prod_graph, drop)) == [
        f"EFA device plugin where EFA is on: 0 EFA device plugin releases for EFA pools {MANAGED_POOL}, {KARPENTER_POOL} (need exactly one)"
    ]


def test_checklist_fails_when_the_efa_plugin_skips_the_pools_instance_type(prod_graph):
    def narrow(graph):
        plugin = releases(graph, EFA_CHART)[0].inputs["values"]
        plugin["supportedInstanceLabels"]["values"] = ["p4d.24xlarge"]
        plugin["tolerations"] = []

    assert efa_device_plugin(broken(prod_graph, narrow)) == [
        failure
        for pool in (MANAGED_POOL, KARPENTER_POOL)
        for failure in (
            f"GPU pool {pool}: the EFA device plugin does not tolerate nvidia.com/gpu:NoSchedule",
            f"GPU pool {pool}: the EFA device plugin does not run on p5.48xlarge",
        )
    ]


def test_dev_needs_no_efa_plugin(dev_graph):
    assert releases(dev_graph, EFA_CHART) == []
    assert efa_device_plugin(dev_graph) == []


MANAGED_POOL = "gpu-training-p5-training-node-group"
KARPENTER_POOL = "gpu-training-karpenter-gpu-training-node-pool"


def test_checklist_fails_when_a_managed_gpu_pool_loses_its_taint(prod_graph):
    def untaint(graph):
        graph.one(MANAGED_NODE_GROUP, MANAGED_POOL).inputs.pop("taints")

    failures = checklist_failures(broken(prod_graph, untaint))
    assert failures == [f"GPU taints on every GPU pool: GPU pool {MANAGED_POOL} has no nvidia.com/gpu NoSchedule taint"]


def test_checklist_fails_when_a_karpenter_gpu_pool_loses_its_taint(prod_graph):
    def untaint(graph):
        node_pool_template(graph.one(KARPENTER_NODE_POOL))["spec"].pop("taints")

    failures = checklist_failures(broken(prod_graph, untaint))
    assert failures == [f"GPU taints on every GPU pool: GPU pool {KARPENTER_POOL} has no nvidia.com/gpu NoSchedule taint"]


def test_checklist_fails_when_the_template_names_a_priority_class_the_stack_does_not_create(prod_graph):
    def rename(graph):
        first_template(graph)["spec"]["priorityClassName"] = "urgent"

    assert priority_classes(broken(prod_graph, rename)) == [
        "gpu-training-training-rl-training-job: priorityClassName 'urgent' is not a PriorityClass the stack creates"
    ]


def test_checklist_fails_without_priority_classes(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("kind") != "PriorityClass"]

    failures = priority_classes(broken(prod_graph, drop))
    assert failures[0] == "no PriorityClass is created"


def test_checklist_fails_with_two_global_default_priority_classes(prod_graph):
    def two_defaults(graph):
        for resource in kubernetes_objects(graph, "PriorityClass"):
            resource.inputs["globalDefault"] = resource.inputs["metadata"]["name"] != "data-prep-low"

    assert priority_classes(broken(prod_graph, two_defaults)) == [
        "several PriorityClasses are the global default: evaluation-normal, training-critical"
    ]


def test_checklist_fails_when_the_training_job_has_no_pdb(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("kind") != "PodDisruptionBudget"]

    assert pod_disruption_budgets(broken(prod_graph, drop)) == [
        "gpu-training-training-rl-training-job: 0 PodDisruptionBudgets select its pods (need exactly one)"
    ]


def test_checklist_fails_when_the_pdb_lets_a_rank_go(prod_graph):
    def loosen(graph):
        kubernetes_objects(graph, "PodDisruptionBudget")[0].inputs["spec"]["minAvailable"] = 1

    assert pod_disruption_budgets(broken(prod_graph, loosen)) == [
        "gpu-training-training-rl-training-job: its PDB allows disrupting a pod (need minAvailable 2)"
    ]


def test_checklist_fails_on_the_seeds_max_unavailable_zero_which_job_pods_do_not_support(dev_graph):
    def seed_literal(graph):
        spec = kubernetes_objects(graph, "PodDisruptionBudget")[0].inputs["spec"]
        del spec["minAvailable"]
        spec["maxUnavailable"] = 0

    assert pod_disruption_budgets(broken(dev_graph, seed_literal)) == [
        "gpu-training-training-rl-training-job: its PDB allows disrupting a pod (need minAvailable 1)"
    ]


def test_checklist_fails_without_anti_affinity(prod_graph):
    def drop(graph):
        first_template(graph)["spec"]["affinity"].pop("podAntiAffinity")

    assert one_pod_per_node(broken(prod_graph, drop)) == [
        "gpu-training-training-rl-training-job: no required pod anti-affinity on kubernetes.io/hostname against its own pods"
    ]


def test_checklist_fails_when_anti_affinity_selects_other_pods(prod_graph):
    def retarget(graph):
        term = first_template(graph)["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        term["labelSelector"] = {"matchLabels": {"app": "someone-else"}}

    assert len(one_pod_per_node(broken(prod_graph, retarget))) == 1


def test_checklist_fails_without_topology_aware_spread(prod_graph):
    def drop(graph):
        template = first_template(graph)
        template["spec"].pop("topologySpreadConstraints")
        template["spec"]["affinity"].pop("podAffinity", None)
        template["metadata"].pop("annotations", None)

    assert topology_aware_spread(broken(prod_graph, drop)) == [
        "gpu-training-training-rl-training-job: no DoNotSchedule spread over kubernetes.io/hostname of its own pods",
        "gpu-training-training-rl-training-job: no spread, affinity or Kueue topology request on topology.k8s.aws/network-node-layer-N",
    ]


def wide_g6_pool(**labeler) -> Graph:
    """Dev with a three-node pool of a type EKS does not label with its topology."""
    config = stack_config("dev")
    config["eks-gpu-training:gpuNodeGroups"] = [
        {"name": "g6-wide", "instanceTypes": ["g6.12xlarge"], "maxSize": 3, "placementGroup": {"mode": "none"}, "efa": "disabled"}
    ]
    config["eks-gpu-training:scheduling"] = {}
    config["eks-gpu-training:topologyLabeler"] = labeler
    graph = run_main(config)
    assert graph.error is None, graph.error
    return graph


def test_checklist_fails_for_a_large_pool_that_nothing_labels_with_topology():
    assert topology_labels(wide_g6_pool(enabled=False)) == [
        "GPU pool gpu-training-g6-wide-node-group: EKS does not label g6.12xlarge with network topology and no labeler runs there"
    ]


def test_a_capacity_block_pool_is_judged_by_the_type_its_launch_template_names():
    def block_pool(instance_type: str) -> Graph:
        config = stack_config("dev")
        config["eks-gpu-training:gpuNodeGroups"] = [
            {
                "name": "block",
                "instanceTypes": [instance_type],
                "capacityType": "CAPACITY_BLOCK",
                "capacityReservationId": "cr-0123456789abcdef0",
                "maxSize": 4,
                "availabilityZone": "us-west-2a",
                "placementGroup": {"mode": "none"},
            }
        ]
        config["eks-gpu-training:scheduling"] = {}
        graph = run_main(config)
        assert graph.error is None, graph.error
        return graph

    assert topology_labels(block_pool("p5.48xlarge")) == []  # EKS labels p5 nodes itself
    assert topology_labels(block_pool("g6.12xlarge")) == [
        "GPU pool gpu-training-block-node-group: EKS does not label g6.12xlarge with network topology and no labeler runs there"
    ]


def test_the_topology_labeler_supplies_labels_eks_does_not():
    graph = wide_g6_pool(image="public.ecr.aws/example/topology-labeler:1.0.0")
    assert topology_labels(graph) == []

    def untolerating(graph):
        kubernetes_objects(graph, "DaemonSet")[0].inputs["spec"]["template"]["spec"]["tolerations"] = []

    assert len(topology_labels(broken(graph, untolerating))) == 1


def test_topology_labels_are_not_needed_below_three_nodes():
    config = stack_config("dev")
    config["eks-gpu-training:gpuNodeGroups"] = [
        {"name": "g6-pair", "instanceTypes": ["g6.12xlarge"], "maxSize": 2, "placementGroup": {"mode": "none"}, "efa": "disabled"}
    ]
    config["eks-gpu-training:scheduling"] = {}
    graph = run_main(config)
    assert graph.error is None, graph.error
    assert topology_labels(graph) == []


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({"matchLabels": {"app": "a"}}, True),
        ({"matchLabels": {"app": "b"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, True),
        ({}, False),
    ],
)
def test_selector_matching_follows_kubernetes_rules(selector, matches):
    assert selector_matches(selector, {"app": "a"}) is matches
