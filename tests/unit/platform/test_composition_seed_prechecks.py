"""Fast pre-checks of the seed's validation checklist on the stack graph, for a run without Go.

The seed ends with a checklist to run against a live cluster. Its verdicts are the cluster tier's
(``tests/cluster``): the stack's platform on real Kubernetes components, where the scheduler, the
API server and the controllers decide. What stays here is structural: the objects each item needs
are rendered, with the values it needs (a toleration equal to the project's ``gpu_toleration()``,
a PDB's ``minAvailable``, a topology key), on every stack file and on configurations the stack
files do not cover (Bottlerocket pools, wide pools of types EKS does not label, Capacity Blocks).
Nothing here decides what Kubernetes decides: no taint, toleration or label selector is matched.

| seed item                                                         | pre-check                    | decided by (``tests/cluster/``)                                       |
|-------------------------------------------------------------------|------------------------------|------------------------------------------------------------------------|
| NVIDIA device plugin reports GPUs on all training nodes           | ``gpu_device_plugin``        | ``test_placement.py::test_every_gpu_daemonset_runs_on_each_gpu_node`` (NFD worker); the operator's own operands only here, since the local cluster runs no operator |
| EFA device plugin reports EFA interfaces                          | ``efa_device_plugin``        | ``test_placement.py::test_every_gpu_daemonset_runs_on_each_gpu_node``  |
| Priority classes are created and applied to training jobs         | (none)                       | ``test_priority_and_quota.py`` (preemption), the platform applied by the API server (Priority admission) |
| PDB is protecting running training pods                           | ``pod_disruption_budgets``   | ``test_training_jobs.py::test_the_running_jobs_pdb_refuses_to_evict_a_training_pod`` |
| GPU taints prevent non-GPU workloads from scheduling on GPU nodes | (none)                       | ``test_gpu_taint.py``                                                  |
| Training pods are anti-affined (one per node for multi-node)      | ``one_pod_per_node``         | ``test_placement.py::test_two_pods_of_one_training_app_never_share_a_node_even_when_resources_would_allow_it``, ``test_training_jobs.py::test_kueue_admits_the_prod_job_whole_one_pod_per_gpu_node_under_one_layer3_block`` |
| (3+ nodes) Topology labels applied to GPU nodes                   | ``topology_labels``          | ``test_placement.py`` (the labeler on every GPU node), ``test_admission_policies.py`` (what it may write) |
| (3+ nodes) Training pods use topology-aware spread constraints    | ``topology_aware_spread``    | ``test_training_jobs.py::test_kueue_admits_the_prod_job_whole_one_pod_per_gpu_node_under_one_layer3_block`` |

A Kueue topology request (``kueue.x-k8s.io/podset-{preferred,required}-topology`` naming a network
layer) counts as topology-aware placement: Kueue places the whole job in one network block.

GPU pools are the managed node groups and the Karpenter NodePools of the graph.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator, Optional

from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES, eks_labels_topology
from eks_gpu_training.config import GPU_NODE_ROLE_LABEL
from eks_gpu_training.addons.efa_device_plugin import CHART as EFA_CHART
from eks_gpu_training.facts.gpu_nodes import GPU_TAINT_KEY
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
from eks_gpu_training.addons.gpu_operator import CHART as GPU_OPERATOR_CHART
from eks_gpu_training.facts.node_os import NODE_OS_BY_AMI_TYPE
from eks_gpu_training.workloads.preflight_jobs import PREFLIGHT_COMPONENT
from eks_gpu_training.workloads.gpu_smoke_test import SMOKE_TEST_COMPONENT
from eks_gpu_training.addons.topology_labeler import NAME as TOPOLOGY_LABELER
from tests.support.harness import Graph, Registration, run_main, stack_config

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
GROUP_KINDS = {"JobSet": ("spec",), "TrainingRuntime": ("spec", "template", "spec")}
"""Objects whose replicated Jobs' pod templates make training pods, by the path to their JobSet spec:
a training app's JobSet, and a TrainJob's runtime (Trainer makes the TrainJob's JobSet from it)."""


# --- reading the graph --------------------------------------------------------------------------


def kubernetes_objects(graph: Graph, kind: str) -> list[Registration]:
    return [r for r in graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind]


def requests_gpus(pod_spec: dict[str, Any]) -> bool:
    containers = pod_spec.get("containers") or []
    return any(GPU_TAINT_KEY in ((c.get("resources") or {}).get("limits") or {}) for c in containers)


def _job_specs(resource: Registration) -> list[dict[str, Any]]:
    """The Job-like specs (``template``, ``parallelism``) of a workload: its own, or a JobSet's (or a
    runtime's JobSet template's) replicated Jobs', each as often as it is replicated."""
    if resource.inputs.get("kind") not in GROUP_KINDS:
        return [resource.inputs.get("spec") or {}]
    spec: Any = resource.inputs
    for key in GROUP_KINDS[resource.inputs["kind"]]:
        spec = (spec or {}).get(key)
    return [(job.get("template") or {}).get("spec") or {} for job in (spec or {}).get("replicatedJobs") or []
            for _ in range(int(job.get("replicas", 1)))]


def training_templates(graph: Graph) -> Iterator[tuple[Registration, dict[str, Any]]]:
    """Every workload whose pods request GPUs, except the checks (nvidia-smi smoke test, pre-flight
    DCGM and NCCL tests): (resource, pod template). A JobSet or TrainingRuntime gives one entry per
    replicated Job."""
    for kind in (*WORKLOAD_KINDS, *GROUP_KINDS):
        for resource in kubernetes_objects(graph, kind):
            for job in _job_specs(resource):
                template = job.get("template") or {}
                labels = (template.get("metadata") or {}).get("labels") or {}
                if requests_gpus(template.get("spec") or {}) and labels.get("app.kubernetes.io/component") not in (SMOKE_TEST_COMPONENT, PREFLIGHT_COMPONENT):
                    yield resource, template


def training_pods(resource: Registration) -> int:
    """How many pods a training workload runs at once: its Jobs' parallelism together."""
    return sum(job.get("parallelism", 1) for job in _job_specs(resource))


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


def lacks_gpu_toleration(tolerations: list[dict[str, Any]]) -> bool:
    return gpu_toleration() not in (tolerations or [])


# --- the pre-checks ------------------------------------------------------------------------------


def gpu_device_plugin(graph: Graph) -> list[str]:
    """One GPU Operator release, and a device plugin for every GPU pool: the operator's (whose operands
    and NFD worker carry the GPU toleration) or the one the pool's node OS ships."""
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
    for who, tolerations in (("the GPU Operator's operands", operand_tolerations), ("the NFD worker", nfd_tolerations)):
        if lacks_gpu_toleration(tolerations):
            failures.append(f"{who}: no GPU toleration")
    return failures


def efa_device_plugin(graph: Graph) -> list[str]:
    """Where a GPU pool has EFA, one EFA device plugin release, with the GPU toleration and the pools'
    instance types among the types it runs on."""
    efa_pools = [pool for pool in gpu_pools(graph) if has_efa(graph, pool)]
    plugins = releases(graph, EFA_CHART)
    if not efa_pools:
        return []
    if len(plugins) != 1:
        return [f"{len(plugins)} EFA device plugin releases for EFA pools {', '.join(p.name for p in efa_pools)} (need exactly one)"]
    values = plugins[0].inputs["values"]
    failures = ["the EFA device plugin: no GPU toleration"] if lacks_gpu_toleration(values.get("tolerations")) else []
    supported = set((values.get("supportedInstanceLabels") or {}).get("values") or [])
    for pool in efa_pools:
        unsupported = [t for t in pool_instance_types(pool, graph) if t not in supported]
        if unsupported:
            failures.append(f"GPU pool {pool.name}: the EFA device plugin does not run on {', '.join(unsupported)}")
    return failures


def pod_disruption_budgets(graph: Graph) -> list[str]:
    """Every training Job has its PodDisruptionBudget (same name and namespace) with an integer
    ``minAvailable`` of all its pods: a Job is no scalable controller, so Kubernetes supports only
    that for its pods. That the budget selects the pods and refuses an eviction is the
    disruption controller's verdict (cluster tier)."""
    failures = []
    pdbs = {(p.inputs["metadata"].get("namespace"), p.inputs["metadata"]["name"]): p.inputs["spec"]
            for p in kubernetes_objects(graph, "PodDisruptionBudget")}
    for resource in {r.urn: r for r, _ in training_templates(graph)}.values():
        metadata = resource.inputs["metadata"]
        budget = pdbs.get((metadata.get("namespace"), metadata["name"]))
        if budget is None:
            failures.append(f"{resource.name}: no PodDisruptionBudget of its own")
            continue
        pods = training_pods(resource)
        if budget.get("minAvailable") != pods or "maxUnavailable" in budget:
            failures.append(f"{resource.name}: its PDB allows disrupting a pod (need minAvailable {pods:g})")
    return failures


def _names_own_app(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """The selector is the templates' own shape for "this app's pods" (``app`` In [its app])."""
    own = labels.get("app")
    return own is not None and selector in (
        {"matchExpressions": [{"key": "app", "operator": "In", "values": [own]}]},
        {"matchLabels": {"app": own}},
    )


def one_pod_per_node(graph: Graph) -> list[str]:
    """Every training template carries a required pod anti-affinity on the hostname naming its own app."""
    failures = []
    for resource, template in training_templates(graph):
        affinity = (template["spec"].get("affinity") or {}).get("podAntiAffinity") or {}
        terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        if not any(t.get("topologyKey") == HOSTNAME and _names_own_app(t.get("labelSelector"), template["metadata"]["labels"]) for t in terms):
            failures.append(f"{resource.name}: no required pod anti-affinity on {HOSTNAME} against its own pods")
    return failures


def topology_aware_spread(graph: Graph) -> list[str]:
    """Every training template carries a DoNotSchedule spread over the hostname naming its own app,
    and a spread, affinity or Kueue topology request on a network layer."""
    failures = []
    for resource, template in training_templates(graph):
        spec, labels = template["spec"], template["metadata"]["labels"]
        spread = spec.get("topologySpreadConstraints") or []
        if not any(
            c.get("topologyKey") == HOSTNAME and c.get("whenUnsatisfiable") == "DoNotSchedule" and _names_own_app(c.get("labelSelector"), labels)
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


def labeler_deployed(graph: Graph) -> bool:
    """Whether the topology labeler DaemonSet is rendered with the GPU toleration (that it runs on
    every GPU node is the DaemonSet controller's verdict, in the cluster tier)."""
    return any(
        d.inputs["metadata"].get("name") == TOPOLOGY_LABELER
        and not lacks_gpu_toleration(d.inputs["spec"]["template"]["spec"].get("tolerations"))
        for d in kubernetes_objects(graph, "DaemonSet")
    )


def topology_labels(graph: Graph) -> list[str]:
    """GPU pools of 3 or more nodes get network-topology labels: from EKS, for the instance types EC2
    reports a topology for (the catalog), or from the topology labeler."""
    failures = []
    for pool in gpu_pools(graph):
        if pool_max_nodes(pool) < 3:
            continue
        types = pool_instance_types(pool, graph)
        if not eks_labels_topology(types) and not labeler_deployed(graph):
            failures.append(f"GPU pool {pool.name}: EKS does not label {', '.join(types)} with network topology and no labeler is deployed")
    return failures


PRECHECKS: dict[str, Callable[[Graph], list[str]]] = {
    "device plugin for every GPU pool": gpu_device_plugin,
    "EFA device plugin where EFA is on": efa_device_plugin,
    "PDB for every training job": pod_disruption_budgets,
    "training pods anti-affined, one per node": one_pod_per_node,
    "topology labels supplied": topology_labels,
    "topology-aware spread in the templates": topology_aware_spread,
}


def precheck_failures(graph: Graph) -> list[str]:
    return [f"{item}: {failure}" for item, check in PRECHECKS.items() for failure in check(graph)]


# --- every stack passes -------------------------------------------------------------------------


def test_every_stack_passes_the_seed_prechecks(stack_graph):
    stack, graph = stack_graph
    assert precheck_failures(graph) == [], stack


def test_every_stack_gives_the_prechecks_something_to_check(stack_graph):
    stack, graph = stack_graph
    assert gpu_pools(graph), stack
    # dev's rl-training and eval-sweep (Jobs) and finetune (a JobSet); prod's rl-training (a Job) and
    # finetune (a TrainJob, whose pods its runtime's template makes)
    kinds = {"dev": [("Job", "eval-sweep"), ("Job", "rl-training"), ("JobSet", "finetune")],
             "prod": [("Job", "rl-training"), ("TrainingRuntime", "finetune")]}
    assert sorted((r.inputs["kind"], r.inputs["metadata"]["name"]) for r, _ in training_templates(graph)) == kinds[stack], stack


# --- each pre-check fails when what it looks for is missing ----------------------------------------


def broken(graph: Graph, change: Callable[[Graph], None]) -> Graph:
    copied = copy.deepcopy(graph)
    change(copied)
    return copied


def first_template(graph: Graph) -> dict[str, Any]:
    return next(training_templates(graph))[1]


def operator_values(graph: Graph) -> dict[str, Any]:
    return releases(graph, GPU_OPERATOR_CHART)[0].inputs["values"]


def test_precheck_fails_without_the_gpu_operator(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("chart") != GPU_OPERATOR_CHART]

    assert precheck_failures(broken(prod_graph, drop)) == ["device plugin for every GPU pool: 0 GPU Operator releases (need exactly one)"]


def test_precheck_fails_when_al2023_nodes_get_no_device_plugin(prod_graph):
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


def test_precheck_fails_when_the_nfd_worker_lacks_the_gpu_toleration(prod_graph):
    def drop_tolerations(graph):
        operator_values(graph)["node-feature-discovery"]["worker"]["tolerations"] = []

    assert gpu_device_plugin(broken(prod_graph, drop_tolerations)) == ["the NFD worker: no GPU toleration"]


def test_precheck_fails_without_the_efa_plugin_on_an_efa_pool(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("chart") != EFA_CHART]

    assert precheck_failures(broken(prod_graph, drop)) == [
        f"EFA device plugin where EFA is on: 0 EFA device plugin releases for EFA pools {MANAGED_POOL}, {KARPENTER_POOL} (need exactly one)"
    ]


def test_precheck_fails_when_the_efa_plugin_lacks_the_gpu_toleration_or_skips_the_pools_instance_type(prod_graph):
    def narrow(graph):
        plugin = releases(graph, EFA_CHART)[0].inputs["values"]
        plugin["supportedInstanceLabels"]["values"] = ["p4d.24xlarge"]
        plugin["tolerations"] = []

    assert efa_device_plugin(broken(prod_graph, narrow)) == ["the EFA device plugin: no GPU toleration"] + [
        f"GPU pool {pool}: the EFA device plugin does not run on p5.48xlarge" for pool in (MANAGED_POOL, KARPENTER_POOL)
    ]


def test_dev_needs_no_efa_plugin(dev_graph):
    assert releases(dev_graph, EFA_CHART) == []
    assert efa_device_plugin(dev_graph) == []


MANAGED_POOL = "gpu-training-p5-training-node-group"
KARPENTER_POOL = "gpu-training-karpenter-gpu-training-node-pool"


def test_precheck_fails_when_the_training_job_has_no_pdb(prod_graph):
    def drop(graph):
        graph.resources[:] = [r for r in graph.resources if r.inputs.get("kind") != "PodDisruptionBudget"]

    # prod's rl-training (a Job) and finetune (a TrainJob, whose pods its runtime makes)
    assert pod_disruption_budgets(broken(prod_graph, drop)) == [
        "gpu-training-training-rl-training-job: no PodDisruptionBudget of its own",
        "gpu-training-training-finetune-trainjob-runtime: no PodDisruptionBudget of its own",
    ]


def budget_of(graph: Graph, app: str) -> dict[str, Any]:
    """The spec of ``app``'s PodDisruptionBudget."""
    (budget,) = [p for p in kubernetes_objects(graph, "PodDisruptionBudget") if p.inputs["metadata"]["name"] == app]
    return budget.inputs["spec"]


def test_precheck_fails_when_the_pdb_lets_a_rank_go(prod_graph):
    def loosen(app):
        def change(graph):
            budget_of(graph, app)["minAvailable"] = 1
        return change

    assert pod_disruption_budgets(broken(prod_graph, loosen("rl-training"))) == [
        "gpu-training-training-rl-training-job: its PDB allows disrupting a pod (need minAvailable 2)"
    ]
    # a TrainJob's pods are its runtime's replicated Job's
    assert pod_disruption_budgets(broken(prod_graph, loosen("finetune"))) == [
        "gpu-training-training-finetune-trainjob-runtime: its PDB allows disrupting a pod (need minAvailable 2)"
    ]


def test_precheck_fails_on_the_seeds_max_unavailable_zero_which_job_pods_do_not_support(dev_graph):
    def seed_literal(graph):
        spec = budget_of(graph, "rl-training")
        del spec["minAvailable"]
        spec["maxUnavailable"] = 0

    assert pod_disruption_budgets(broken(dev_graph, seed_literal)) == [
        "gpu-training-training-rl-training-job: its PDB allows disrupting a pod (need minAvailable 1)"
    ]


def test_precheck_fails_without_anti_affinity(prod_graph):
    def drop(graph):
        first_template(graph)["spec"]["affinity"].pop("podAntiAffinity")

    assert one_pod_per_node(broken(prod_graph, drop)) == [
        "gpu-training-training-rl-training-job: no required pod anti-affinity on kubernetes.io/hostname against its own pods"
    ]


def test_precheck_fails_when_anti_affinity_selects_other_pods(prod_graph):
    def retarget(graph):
        term = first_template(graph)["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        term["labelSelector"] = {"matchLabels": {"app": "someone-else"}}

    assert len(one_pod_per_node(broken(prod_graph, retarget))) == 1


def test_precheck_fails_without_topology_aware_spread(prod_graph):
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


def test_precheck_fails_for_a_large_pool_that_nothing_labels_with_topology():
    assert topology_labels(wide_g6_pool(enabled=False)) == [
        "GPU pool gpu-training-g6-wide-node-group: EKS does not label g6.12xlarge with network topology and no labeler is deployed"
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
        "GPU pool gpu-training-block-node-group: EKS does not label g6.12xlarge with network topology and no labeler is deployed"
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
