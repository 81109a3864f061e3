"""Kueue: its release, Topology, flavors and queues on the stacks, the jobs it queues, and the
combinations the configuration refuses because Kueue could never admit them."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import yaml

from eks_gpu_training.addons.kueue import KUEUE_CHART, kueue_manager_config
from eks_gpu_training.config import ConfigError, GpuNodeGroupConfig, KarpenterGpuNodePoolConfig, KueueConfig
from eks_gpu_training.facts.quantity import parse_quantity
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
import pulumi_kubernetes as k8s

from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.check.kubernetes import CustomResourceSchemas
from eks_gpu_training.platform.loading import parse_platform_args
from eks_gpu_training.workloads.fleet_capacity import pool_capacity
from eks_gpu_training.workloads.kueue_flavors import TOPOLOGY_LEVELS, pool_flavor
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE, cluster_queue
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME
from eks_gpu_training.workloads.templates import training_job
from eks_gpu_training.workloads.training_spec import TrainingJobSpec, validate_training_job
from tests.support.harness import Graph, research_cluster, run_main, run_program, stack_config, two_az_network
from tests.support.builders import KARPENTER_NODE_POOL, MANAGED_NODE_GROUP, kubernetes_objects, raw_settings, stack_without_teams

NAMESPACE = "eks-gpu-training:"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
LAYER_3 = "topology.k8s.aws/network-node-layer-3"


def namespace_quotas(graph):
    """The training namespaces' ResourceQuotas (the health gate's namespace has one of its own)."""
    return [r for r in graph.of_type("kubernetes:core/v1:ResourceQuota") if r.inputs["metadata"]["name"] == QUOTA_NAME]


def raw(stack: str = "prod") -> dict[str, Any]:
    """A stack's configuration without teams (its namespace ``training`` with a ClusterQueue of its
    own, its first app), as ``parse_platform_args`` takes it: the rules here are a namespace's and
    an app's; teams' are tests/unit/workloads/test_teams.py's."""
    return raw_settings(stack_without_teams(stack))


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return [str(p) for p in error.value.problems]


def node_sources(graph: Graph) -> dict[str, dict[str, str]]:
    """Every node group and Karpenter NodePool of the graph (system nodes too), with the labels its nodes carry."""
    sources = {}
    for group in graph.of_type(MANAGED_NODE_GROUP):
        sources[group.name] = dict(group.inputs.get("labels") or {})
    for pool in graph.of_type(KARPENTER_NODE_POOL):
        template_labels = pool.inputs["spec"]["template"]["metadata"].get("labels") or {}
        # Karpenter labels each node with its NodePool's name.
        sources[pool.name] = {**template_labels, "karpenter.sh/nodepool": pool.inputs["metadata"]["name"]}
    return sources


def jobs(graph: Graph) -> dict[str, dict[str, Any]]:
    """The training Jobs (not the platform's own, such as the FSx team directories Job in kube-system)."""
    return {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type("kubernetes:batch/v1:Job")
            if r.inputs["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "training"}


def node_affinity_labels(job: dict[str, Any]) -> dict[str, list[str]]:
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return {e["key"]: e["values"] for e in terms[0]["matchExpressions"]}


# --- acceptance on the prod stack ---------------------------------------------------------------


def test_cluster_queue_quotas_equal_the_namespace_resource_quota(prod_graph_without_teams):
    # A namespace of no team has a ClusterQueue of its own, named after it (with teams, each team's
    # reach is its namespaces' quota: test_a_team_can_never_be_admitted_more_than_its_namespaces_resource_quota).
    quotas = [q for q in kubernetes_objects(prod_graph_without_teams, "ResourceQuota") if q.inputs["metadata"]["name"] == QUOTA_NAME]
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in kubernetes_objects(prod_graph_without_teams, "ClusterQueue")}
    assert [q.inputs["metadata"]["namespace"] for q in quotas] == list(queues) == ["training"]
    for quota in quotas:
        hard = quota.inputs["spec"]["hard"]
        queue = queues[quota.inputs["metadata"]["namespace"]]
        [group] = queue["resourceGroups"]
        totals: dict[str, Fraction] = {}
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                totals[resource["name"]] = totals.get(resource["name"], Fraction(0)) + parse_quantity(resource["nominalQuota"])
        assert totals == {r: parse_quantity(hard[f"requests.{r}"]) for r in ("cpu", "memory", "nvidia.com/gpu")}
        assert totals["nvidia.com/gpu"] == 32  # p5-training's 2 × 8 plus the Karpenter pool's gpuLimit 16


def test_every_gpu_pool_has_exactly_one_flavor_whose_labels_select_only_its_nodes(stack_graph):
    _, graph = stack_graph
    sources = node_sources(graph)
    gpu_sources = {name for name, labels in sources.items() if labels.get("role") == "gpu-training"}
    flavors = [f.inputs for f in kubernetes_objects(graph, "ResourceFlavor")]
    selected = {
        f["metadata"]["name"]: [name for name, labels in sources.items() if f["spec"]["nodeLabels"].items() <= labels.items()]
        for f in flavors
    }
    assert all(len(pools) == 1 for pools in selected.values()), selected
    assert sorted(p for pools in selected.values() for p in pools) == sorted(gpu_sources)
    assert all(gpu_toleration() in f["spec"]["tolerations"] for f in flavors)


def test_prod_rl_training_is_queued_with_a_layer_3_topology_request(prod_graph):
    job = jobs(prod_graph)["rl-training"]
    template = job["spec"]["template"]
    # Created held (job.suspend): queued in the held LocalQueue, suspended until Kueue resumes it.
    assert job["metadata"]["labels"][QUEUE_LABEL] == HELD_LOCAL_QUEUE
    assert job["spec"]["suspend"] is True
    assert template["metadata"]["annotations"] == {REQUIRED: LAYER_3, "kueue.x-k8s.io/safe-to-forcefully-delete": "true"}
    assert node_affinity_labels(job)["eks-gpu-training/pool"] == ["p5-training"]
    # Kueue places it: no soft network affinity or layer-2 spread left to fight its node choice.
    assert "podAffinity" not in template["spec"]["affinity"]
    assert [c["topologyKey"] for c in template["spec"]["topologySpreadConstraints"]] == ["kubernetes.io/hostname"]
    flavor = next(f.inputs for f in kubernetes_objects(prod_graph, "ResourceFlavor") if f.inputs["metadata"]["name"] == "p5-training-tas")
    assert flavor["spec"]["topologyName"] == "aws-network"


def test_no_job_on_a_karpenter_pool_carries_a_topology_request(stack_graph):
    stack, graph = stack_graph
    on_karpenter = {name: job for name, job in jobs(graph).items() if "karpenter.sh/nodepool" in node_affinity_labels(job)}
    if stack == "dev":
        assert sorted(on_karpenter) == ["eval-sweep", "rl-training"]
    for job in on_karpenter.values():
        assert job["metadata"]["labels"][QUEUE_LABEL] in (LOCAL_QUEUE, HELD_LOCAL_QUEUE)
        assert not set(job["spec"]["template"]["metadata"].get("annotations") or {}) & {PREFERRED, REQUIRED}
    karpenter_flavors = [f.inputs for f in kubernetes_objects(graph, "ResourceFlavor") if "karpenter.sh/nodepool" in f.inputs["spec"]["nodeLabels"]]
    assert karpenter_flavors
    assert all("topologyName" not in f["spec"] for f in karpenter_flavors)


def test_dev_flavors_follow_its_pools_a_fixed_node_with_topology_and_karpenter_on_quota(dev_graph):
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in kubernetes_objects(dev_graph, "ResourceFlavor")}
    assert {name: spec.get("topologyName") for name, spec in flavors.items()} == {"dev-gpu-tas": "aws-network", "karpenter-gpu-training": None}


def test_topology_names_ec2s_network_layers_down_to_the_node(prod_graph):
    [topology] = kubernetes_objects(prod_graph, "Topology")
    assert [level["nodeLabel"] for level in topology.inputs["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]


def test_queues_preempt_lower_priority_and_each_namespace_has_its_local_queues(prod_graph_without_teams):
    # A namespace of no team: its own ClusterQueue, borrowing nothing (teams' queues:
    # tests/unit/workloads/test_teams.py).
    [queue] = kubernetes_objects(prod_graph_without_teams, "ClusterQueue")
    assert queue.inputs["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
    assert queue.inputs["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}
    local = {q.inputs["metadata"]["name"]: q.inputs for q in kubernetes_objects(prod_graph_without_teams, "LocalQueue")}
    assert {n: (q["metadata"]["namespace"], q["spec"]["clusterQueue"], q["spec"].get("stopPolicy")) for n, q in local.items()} == {
        LOCAL_QUEUE: ("training", "training", None),
        HELD_LOCAL_QUEUE: ("training", "training", "Hold"),
    }
    # Kueue reads the pods' PriorityClass as the workload's priority.
    assert jobs(prod_graph_without_teams)["rl-training"]["spec"]["template"]["spec"]["priorityClassName"] == "training-critical"


def test_kueue_runs_on_system_nodes_with_all_or_nothing_admission(prod_graph):
    [release] = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == KUEUE_CHART]
    assert (release.inputs["version"], release.inputs["atomic"]) == ("0.19.2", True)
    manager = release.inputs["values"]["controllerManager"]
    assert manager["nodeSelector"] == {"kubernetes.io/os": "linux", "role": "system"}
    assert manager["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]  # no GPU toleration
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["waitForPodsReady"]["timeout"] == "30m"
    assert config["waitForPodsReady"]["recoveryTimeout"] == "15m"
    # Admissions side by side: each job still waits for its own pods, whose timeout requeues it.
    assert config["waitForPodsReady"]["blockAdmission"] is False
    # prod's rl-training is a Job and its finetune a TrainJob, which Trainer runs as a JobSet.
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


def test_kueue_objects_wait_for_the_release_that_brings_their_crds(prod_graph):
    [release] = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == KUEUE_CHART]
    kinds = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")
    objects = [o for kind in kinds for o in kubernetes_objects(prod_graph, kind)]
    # the topology, a flavor per pool, a ClusterQueue per team, two LocalQueues per namespace
    assert sorted((o.inputs["kind"], o.inputs["metadata"].get("namespace", ""), o.inputs["metadata"]["name"]) for o in objects) == [
        ("ClusterQueue", "", "pretraining"), ("ClusterQueue", "", "research"),
        ("LocalQueue", "research", LOCAL_QUEUE), ("LocalQueue", "research", HELD_LOCAL_QUEUE),
        ("LocalQueue", "training", LOCAL_QUEUE), ("LocalQueue", "training", HELD_LOCAL_QUEUE),
        ("ResourceFlavor", "", "karpenter-gpu-training"), ("ResourceFlavor", "", "p5-training-tas"),
        ("Topology", "", "aws-network"),
    ]
    assert all(prod_graph.depends_on(o, release) for o in objects)
    namespaces = {n.inputs["metadata"]["name"]: n for n in kubernetes_objects(prod_graph, "Namespace")}
    assert all(prod_graph.depends_on(q, namespaces[q.inputs["metadata"]["namespace"]]) for q in kubernetes_objects(prod_graph, "LocalQueue"))
    # Every object that makes pods is created after the LocalQueues, so Kueue's webhook sees it queued.
    made_pods = [r for r in prod_graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") in ("Job", "JobSet", "TrainJob")
                 and r.inputs["metadata"].get("namespace") != "kube-system"]
    assert sorted(r.inputs["kind"] for r in made_pods) == ["Job", "TrainJob"]
    assert all(prod_graph.depends_on(job, q) for job in made_pods for q in kubernetes_objects(prod_graph, "LocalQueue"))


def test_kueue_configuration_keys_are_the_charts(reference_dir):
    """Every key of the generated Configuration appears in the chart's default one (its commented
    example lists waitForPodsReady and resources)."""
    values = yaml.safe_load((reference_dir / "charts" / "kueue-0.19.2" / "values.yaml").read_text())
    default = values["managerConfig"]["controllerManagerConfigYaml"]

    def keys(value: Any, prefix: str = "") -> list[str]:
        if not isinstance(value, dict):
            return []
        return [k for key, sub in value.items() for k in [key, *keys(sub)]]

    generated = kueue_manager_config(KueueConfig(), ["training"])
    assert [k for k in keys(generated) if f"{k}:" not in default] == []
    assert yaml.safe_load(default)["apiVersion"] == generated["apiVersion"]


def test_kueues_webhooks_see_only_the_training_namespaces_and_fail_closed_only_for_jobs(reference_dir):
    """The chart gives every Kueue webhook the configuration's managedJobsNamespaceSelector, and
    fails closed only for the frameworks that are on."""
    template = (reference_dir / "charts" / "kueue-0.19.2" / "templates" / "webhook" / "manifests.yaml").read_text()
    assert template.count("toYaml $managerConfig.managedJobsNamespaceSelector") >= 2
    assert '{{- if has "pod" $integrationsConfig.frameworks }}\n    failurePolicy: Fail\n    {{- else }}\n    failurePolicy: Ignore' in template
    config = kueue_manager_config(KueueConfig(), ["training", "research"])
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training", "research"]}]
    }
    assert config["integrations"]["frameworks"] == ["batch/job"]


def test_admissions_can_wait_in_single_file_and_a_changed_setting_rolls_kueues_manager(reference_dir):
    """``kueue.blockAdmission: true`` reaches Kueue's configuration; the chart stamps the
    manager's pods with a checksum of that configuration, so ``pulumi up`` of the change restarts
    Kueue's manager with it (a Helm upgrade in place) rather than leaving the old setting running."""
    values = raw()
    values["kueue"]["blockAdmission"] = True
    args = parse_platform_args(values)
    assert args.kueue.block_admission is True
    assert kueue_manager_config(args.kueue, ["training"])["waitForPodsReady"]["blockAdmission"] is True
    assert kueue_manager_config(KueueConfig(), ["training"])["waitForPodsReady"]["blockAdmission"] is False
    manager = (reference_dir / "charts" / "kueue-0.19.2" / "templates" / "manager" / "manager.yaml").read_text()
    assert 'config-checksum: {{ include (print .Template.BasePath "/manager/manager-config.yaml") . | sha256sum }}' in manager


def test_without_training_namespaces_kueue_manages_no_jobs():
    values = raw()
    values["scheduling"]["namespaces"] = []
    values["scheduling"]["trainingApps"] = []
    parse_platform_args(values)
    assert kueue_manager_config(KueueConfig(), [])["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]
    }


KUEUE_RELEASE = {"release": "kueue", "chart": KUEUE_CHART, "version": "0.19.2", "namespace": "kueue-system", "values": {}}


def with_kueue_chart(program):
    """``program`` beside Kueue's chart, whose templates hold its CRDs, which the check reads from
    the render as the API server gets them from the chart."""
    def both():
        k8s.helm.v3.Release("kueue", name="kueue", chart=KUEUE_CHART, version="0.19.2", namespace="kueue-system")
        program()

    return both


def test_every_kueue_kind_the_stacks_make_has_its_crd_in_the_kueue_chart(chart_sources):
    """The stacks' Kueue objects are validated against the CRDs Kueue's chart installs, not skipped:
    the check of each rendered stack (tests/unit/offline/test_check.py) then reports no failure and no skip."""
    from eks_gpu_training.offline.render.charts import locate_release_chart, render_release

    crds = CustomResourceSchemas()
    for path, obj in render_release(KUEUE_RELEASE, *locate_release_chart(KUEUE_RELEASE, chart_sources)).objects:
        if obj["kind"] == "CustomResourceDefinition":
            crds.add(obj, path)
    assert all(crds.knows("kueue.x-k8s.io", kind) for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"))


def test_a_topology_flavor_without_node_labels_fails_kueues_cel_rule(render_program):
    program = with_kueue_chart(lambda: k8s.apiextensions.CustomResource(
        "flavor", api_version="kueue.x-k8s.io/v1beta2", kind="ResourceFlavor", metadata={"name": "p5"}, spec={"topologyName": "aws-network"}
    ))
    [failure] = check_render(render_program(program)).failures
    assert failure.startswith("manifests/resourceflavor_p5.yaml: ResourceFlavor p5: CEL rule at /spec: at least one nodeLabel is required when topology is set")


def test_a_cluster_queue_flavor_missing_a_covered_resource_fails(render_program):
    queue = cluster_queue("training", {"p5": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"}})
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    program = with_kueue_chart(lambda: k8s.apiextensions.CustomResource(
        "queue", api_version=queue["apiVersion"], kind="ClusterQueue", metadata=queue["metadata"], spec=queue["spec"]
    ))
    [failure] = check_render(render_program(program)).failures
    assert "flavors must have the same number of resources as the coveredResources" in failure


# --- flavors and jobs, without the engine ---------------------------------------------------------


def test_flavors_follow_whether_the_pools_nodes_exist():
    managed = GpuNodeGroupConfig(name="p5", instance_types=["p5.48xlarge"], availability_zone="us-west-2a", min_size=2, max_size=4)
    at_zero = managed.model_copy(update={"min_size": 0})
    block = at_zero.model_copy(update={"capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": "cr-0123456789abcdef0"})
    karpenter = KarpenterGpuNodePoolConfig(name="p5", instance_types=["p5.48xlarge"])
    # g6.xlarge has no EC2 network topology, so its nodes lack the Topology's levels.
    no_topology = managed.model_copy(update={"name": "g6", "instance_types": ["g6.xlarge"]})
    pools = (("min", managed), ("zero", at_zero), ("block", block), ("karpenter", karpenter), ("untopological", no_topology))
    flavors = {key: pool_flavor(pool_capacity(pool, key)) for key, pool in pools}
    assert {k: (f.name, f.node_label, f.topology_nodes) for k, f in flavors.items()} == {
        "min": ("p5-tas", ("eks-gpu-training/pool", "p5"), 2),
        "zero": ("p5", ("eks-gpu-training/pool", "p5"), 0),
        "block": ("p5-tas", ("eks-gpu-training/pool", "p5"), 4),
        "karpenter": ("karpenter-p5", ("karpenter.sh/nodepool", "p5"), 0),
        "untopological": ("g6", ("eks-gpu-training/pool", "g6"), 0),
    }


def test_a_queued_job_is_created_suspended_and_without_kueue_nothing_changes():
    spec = TrainingJobSpec(name="t", nodes=2, instance_types=("p5.48xlarge",), priority_class="p", namespace="n")
    plain = training_job(spec)
    assert plain["spec"]["suspend"] is False
    assert QUEUE_LABEL not in plain["metadata"]["labels"]
    assert "podAffinity" in plain["spec"]["template"]["spec"]["affinity"]
    queued = training_job(TrainingJobSpec(**{**spec.__dict__, "queue_name": LOCAL_QUEUE, "topology_mode": "required", "topology_level": TOPOLOGY_LEVELS[1]}))
    assert queued["spec"]["suspend"] is True
    assert queued["metadata"]["labels"][QUEUE_LABEL] == queued["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] == LOCAL_QUEUE
    assert queued["spec"]["template"]["metadata"]["annotations"] == {REQUIRED: "topology.k8s.aws/network-node-layer-2"}


def test_topology_mode_and_layer_are_configurable():
    values = raw()
    values["kueue"].update(topologyMode="required", topologyLayer=2)
    args = parse_platform_args(values)
    from eks_gpu_training.workloads.scheduling_policies import training_job_spec

    spec = training_job_spec(args.scheduling.training_apps[0], args)
    assert spec.topology_request == (REQUIRED, "topology.k8s.aws/network-node-layer-2")


@pytest.mark.parametrize(("nodes", "mode", "level"), [
    (2, "required", "topology.k8s.aws/network-node-layer-3"),
    (16, "required", "topology.k8s.aws/network-node-layer-3"),
    (17, "required", "topology.k8s.aws/network-node-layer-2"),
    (17, "preferred", "topology.k8s.aws/network-node-layer-2"),
])
def test_a_job_above_block_nodes_asks_for_one_block_a_layer_up(nodes, mode, level):
    """A job of at most ``kueue.blockNodes`` nodes waits for one layer-3 block; a larger one for one
    layer-2 block: each whole under one switch, without blocks sized to fit every job."""
    from eks_gpu_training.workloads.scheduling_policies import training_job_spec

    values = raw()
    values["kueue"].update(topologyMode=mode)
    values["gpuNodeGroups"][0].update(minSize=nodes, desiredSize=nodes, maxSize=max(nodes, 2))
    values["scheduling"]["trainingApps"][0]["nodes"] = nodes
    args = parse_platform_args(values)
    assert args.kueue.block_nodes == 16
    spec = training_job_spec(args.scheduling.training_apps[0], args)
    assert spec.topology_request == (REQUIRED if mode == "required" else PREFERRED, level)


# --- refused combinations -------------------------------------------------------------------------


def test_rejects_a_topology_request_on_a_karpenter_pool():
    values = raw("dev")
    values["scheduling"]["trainingApps"][0]["topology"] = "preferred"
    [problem] = problems(values)
    assert problem.startswith("scheduling.trainingApps[0].topology: 'preferred' needs Ready nodes with network-layer labels, but karpenter.gpuNodePools[0] has none")


def test_rejects_a_topology_request_for_more_nodes_than_the_pools_minimum():
    values = raw()
    values["gpuNodeGroups"][0].update(minSize=1, desiredSize=1)
    [problem] = problems(values)
    assert problem.startswith("scheduling.trainingApps[0].nodes: 2 pods, one per node, with a topology request need 2 Ready nodes, but gpuNodeGroups[0] keeps 1")


def test_rejects_more_nodes_than_the_apps_own_pool_under_kueue():
    values = raw()
    values["scheduling"]["trainingApps"][0].update(nodes=3, topology="none")
    [problem] = problems(values)
    assert problem.startswith("scheduling.trainingApps[0].nodes: 3 pods, one per node, need more nodes of p5.48xlarge than the fleet can have (gpuNodeGroups[0].maxSize 2")


def test_without_kueue_an_app_may_count_every_pool_of_its_types():
    values = raw()
    values["kueue"]["enabled"] = False
    values["scheduling"]["trainingApps"][0].update(nodes=3, efa=False, priorityClass="training-critical")
    values["scheduling"]["trainingApps"][0].pop("job")
    assert parse_platform_args(values).scheduling.training_apps[0].nodes == 3


def test_rejects_a_topology_request_on_part_of_a_pools_instance_types():
    values = raw()
    values["gpuNodeGroups"][0]["instanceTypes"] = ["p5.48xlarge", "p5e.48xlarge"]
    values["scheduling"]["trainingApps"][0]["instanceTypes"] = ["p5.48xlarge"]
    [problem] = problems(values)
    assert problem.startswith("scheduling.trainingApps[0].instanceTypes: narrows gpuNodeGroups[0]'s types, but with a topology request")


def test_rejects_pools_whose_flavors_would_share_a_name():
    values = raw()
    twin = {**values["gpuNodeGroups"][0], "name": "p5-training-tas", "minSize": 0, "desiredSize": 0}
    values["gpuNodeGroups"].append(twin)
    assert "gpuNodeGroups[1].name: gives the ResourceFlavor name 'p5-training-tas' that gpuNodeGroups[0] has too; rename the pool" in problems(values)


def test_rejects_a_topology_request_without_kueue():
    values = raw()
    values["kueue"]["enabled"] = False
    values["scheduling"]["trainingApps"][0]["topology"] = "required"
    assert problems(values) == ["scheduling.trainingApps[0].topology: is only used with kueue.enabled: true"]


def capped_prod_graph(quota: dict[str, Any]) -> Graph:
    """Prod without teams, its namespace's quota changed by ``quota``."""
    config = stack_without_teams("prod")
    config[f"{NAMESPACE}scheduling"]["namespaces"][0]["quota"].update(quota)
    graph = run_main(config, stack="prod")
    assert graph.error is None, repr(graph.error)
    return graph


def _selected_namespaces(selector: dict[str, Any]) -> list[str]:
    if "matchLabels" in selector:
        return list(selector["matchLabels"].values())
    [expression] = selector["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("kubernetes.io/metadata.name", "In")
    return list(expression["values"])


def admission_bounds(graph: Graph) -> list[tuple[str, str, Fraction, Fraction]]:
    """For every ClusterQueue of the generated objects, every namespace it admits and every resource
    it covers: the most Kueue can admit at once (Kueue docs, "Cluster Queue": the flavors' nominal
    quotas together, plus on each flavor what it may borrow from its cohort: what the cohort's other
    queues lend there, each its lendingLimit or else its whole nominal quota, at most its own
    borrowingLimit; a queue without a cohort borrows nothing) and what the namespace's ResourceQuota
    allows."""
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in namespace_quotas(graph)}
    queues = [q.inputs["spec"] for q in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")]

    def entries(spec: dict[str, Any], resource: str) -> dict[str, dict[str, str]]:
        return {f["name"]: e for g in spec["resourceGroups"] for f in g["flavors"] for e in f["resources"] if e["name"] == resource}

    bounds = []
    for spec in queues:
        cohort = [other for other in queues if other is not spec and spec.get("cohortName") and other.get("cohortName") == spec["cohortName"]]
        for group in spec["resourceGroups"]:
            for resource in group["coveredResources"]:
                admitted = Fraction(0)
                for flavor, entry in entries(spec, resource).items():
                    lent = sum((parse_quantity(e.get("lendingLimit", e["nominalQuota"])) for other in cohort
                                for f, e in entries(other, resource).items() if f == flavor), Fraction(0))
                    borrowed = min(lent, parse_quantity(entry["borrowingLimit"])) if "borrowingLimit" in entry else lent
                    admitted += parse_quantity(entry["nominalQuota"]) + borrowed
                for namespace in _selected_namespaces(spec["namespaceSelector"]):
                    bounds.append((namespace, resource, admitted, parse_quantity(quotas[namespace][f"requests.{resource}"])))
    return bounds


@pytest.mark.parametrize(
    "quota",
    [{}, {"gpus": 24}, {"gpus": 16}, {"gpus": 17}, {"gpus": 24, "cpu": "500500m", "memory": "5000Gi"}],
    ids=["fleet", "24-of-32-gpus", "one-pool-of-gpus", "a-gpu-past-one-pool", "gpus-cpu-and-memory"],
)
def test_kueue_can_never_admit_more_than_the_namespaces_resource_quota(quota):
    graph = capped_prod_graph(quota)
    # Without teams, the namespace's ClusterQueue is in no cohort and borrows nothing.
    assert all("cohortName" not in q.inputs["spec"] and "cohort" not in q.inputs["spec"]
               for q in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
    bounds = admission_bounds(graph)
    assert {resource for _, resource, _, _ in bounds} == {"cpu", "memory", "nvidia.com/gpu"}
    assert [(ns, r, str(a), str(q)) for ns, r, a, q in bounds if a > q] == []


TEAM_VARIANTS = {
    "prod": ("prod", lambda teams, namespaces: None),
    "dev": ("dev", lambda teams, namespaces: None),
    "borrowing-limit": ("prod", lambda teams, namespaces: teams[0]["quotas"][1].update(borrowingLimit=4)),
    "lending-limit": ("prod", lambda teams, namespaces: teams[1]["quotas"][1].update(lendingLimit=3)),
    "team-without-quota": ("prod", lambda teams, namespaces: (namespaces.append({"name": "evaluation"}),
                                                              teams.append({"name": "evaluation", "namespaces": ["evaluation"]}))),
    "one-team-two-namespaces": ("prod", lambda teams, namespaces: (namespaces.append({"name": "evaluation"}),
                                                                   teams[1]["namespaces"].append("evaluation"))),
}


@pytest.mark.parametrize("variant", list(TEAM_VARIANTS))
def test_a_team_can_never_be_admitted_more_than_its_namespaces_resource_quota(variant):
    # A team's namespace's ResourceQuota is its team's reach (workloads/teams.py): what its
    # ClusterQueue can be admitted at once, borrowing included, so Kueue never admits a pod the
    # quota then refuses (kubernetes-sigs/kueue#1403), and GPUs it could borrow are not refused either.
    stack, change = TEAM_VARIANTS[variant]
    config = stack_config(stack)
    scheduling = config[f"{NAMESPACE}scheduling"]
    change(scheduling["teams"], scheduling["namespaces"])
    graph = run_main(config, stack=stack)
    assert graph.error is None, repr(graph.error)
    bounds = admission_bounds(graph)
    assert {ns for ns, _, _, _ in bounds} == {ns["name"] for ns in scheduling["namespaces"]}
    assert [(ns, r, str(a), str(q)) for ns, r, a, q in bounds if a > q] == []
    # The GPUs are exact (CPU and memory are each pool's share of its GPUs, rounded down per queue).
    assert [(ns, str(a), str(q)) for ns, r, a, q in bounds if r == "nvidia.com/gpu" and a != q] == []


def test_a_teams_borrowing_limit_lowers_its_namespaces_quota():
    # pretraining may borrow 4 of research's 8 gpu-training GPUs: 8 + 8 on p5-training and 8 + 4 on
    # gpu-training, 28 GPUs at 24 vCPUs and 256 GiB each. research still reaches all 32.
    config = stack_config("prod")
    config[f"{NAMESPACE}scheduling"]["teams"][0]["quotas"][1]["borrowingLimit"] = 4
    graph = run_main(config, stack="prod")
    assert graph.error is None, repr(graph.error)
    hard = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in namespace_quotas(graph)}
    assert {ns: (h["requests.nvidia.com/gpu"], h["requests.cpu"], h["requests.memory"]) for ns, h in hard.items()} == {
        "training": ("28", "672", "7Ti"), "research": ("32", "768", "8Ti"),
    }


def test_a_namespace_capped_below_the_fleet_splits_its_quota_between_flavors_in_pool_order():
    graph = capped_prod_graph({"gpus": 24})
    [queue] = graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    gpus = {f["name"]: next(e["nominalQuota"] for e in f["resources"] if e["name"] == "nvidia.com/gpu") for f in queue.inputs["spec"]["resourceGroups"][0]["flavors"]}
    # The managed pool first, whole (its 16 GPUs, so a two-node job still fits it), then what is left.
    assert gpus == {"p5-training-tas": "16", "karpenter-gpu-training": "8"}
    [quota] = namespace_quotas(graph)
    assert quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == "24"


def test_cpu_and_memory_caps_are_split_like_gpus_and_rounded_down():
    from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota
    from eks_gpu_training.workloads.kueue_queues import flavor_quotas, pool_flavors

    flavors = pool_flavors(parse_platform_args(raw()))
    # prod's pools each hold 2 × p5.48xlarge: 16 GPUs, 384 vCPUs and 4Ti of memory.
    quotas = flavor_quotas(flavors, ResolvedQuota(gpus=20, cpu="500500m", memory="5000Gi", persistent_volume_claims=5))
    assert quotas == {
        "p5-training-tas": {"cpu": "384", "memory": "4Ti", "nvidia.com/gpu": "16"},
        "karpenter-gpu-training": {"cpu": "116500m", "memory": "904Gi", "nvidia.com/gpu": "4"},
    }


def test_the_fleets_own_quota_gives_every_flavor_its_whole_pool():
    from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota
    from eks_gpu_training.workloads.kueue_queues import flavor_quotas, pool_flavors

    flavors = pool_flavors(parse_platform_args(raw()))
    quotas = flavor_quotas(flavors, ResolvedQuota(gpus=32, cpu="768", memory="8Ti", persistent_volume_claims=5))
    assert set(map(frozenset, (q.items() for q in quotas.values()))) == {
        frozenset({"cpu": "384", "memory": "4Ti", "nvidia.com/gpu": "16"}.items())
    }


def test_a_namespace_quota_below_the_fleet_is_accepted_with_a_single_pool():
    values = raw()
    values["karpenter"] = {"enabled": False}
    values["scheduling"]["namespaces"][0]["quota"]["gpus"] = 8
    values["scheduling"]["trainingApps"][0]["nodes"] = 1
    args = parse_platform_args(values)
    from eks_gpu_training.workloads.kueue_queues import kueue_queues_args

    [queues] = kueue_queues_args(args).namespaces
    assert queues.quotas["p5-training-tas"]["nvidia.com/gpu"] == "8"


def test_kueue_queues_given_a_cluster_put_their_objects_on_the_clusters_kubernetes_provider():
    from eks_gpu_training.workloads.kueue_queues import KueueQueues, KueueQueuesArgs, kueue_queues_args

    stack_args = kueue_queues_args(parse_platform_args(raw()))

    def program():
        cluster = research_cluster(two_az_network())
        KueueQueues("queues", KueueQueuesArgs(flavors=stack_args.flavors, namespaces=stack_args.namespaces, cluster=cluster))

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    provider = graph.one("pulumi:providers:kubernetes")
    queue_objects = [r for r in graph.resources if r.name.startswith("queues-")]
    assert {r.inputs["kind"] for r in queue_objects} == {"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"}
    assert {r.provider.rsplit("::", 1)[0] for r in queue_objects} == {provider.urn}


def test_kueue_settings_are_bounded():
    values = raw()
    values["kueue"].update(topologyLayer=4, podsReadyTimeoutMinutes=0, chartVersion="0.14.0")
    assert sorted(p.split(":")[0] for p in problems(values)) == ["kueue.chartVersion", "kueue.podsReadyTimeoutMinutes", "kueue.topologyLayer"]


def test_rejects_a_topology_request_kueue_would_never_read():
    spec = TrainingJobSpec(name="t", nodes=2, instance_types=("p5.48xlarge",), priority_class="p", namespace="n", topology_mode="required")
    assert [str(p) for p in validate_training_job(spec, "job")] == [
        "job.topology: a topology request needs a queue (queue_name) and a level (topology_level): only Kueue reads it"
    ]
    odd = TrainingJobSpec(**{**spec.__dict__, "queue_name": LOCAL_QUEUE, "topology_level": LAYER_3, "topology_mode": "strict"})
    assert [str(p) for p in validate_training_job(odd, "job")] == ["job.topology: 'strict' is not a Kueue topology mode; allowed: preferred, required"]


def test_rejects_a_training_namespace_named_like_kueues():
    values = raw()
    values["scheduling"]["namespaces"].append({"name": "kueue-system"})
    assert "scheduling.namespaces[1].name: 'kueue-system' is the namespace Kueue creates; choose another name" in problems(values)


def test_kueues_namespace_enforces_the_restricted_pod_security_standard(prod_graph):
    namespace = prod_graph.one("kubernetes:core/v1:Namespace", "gpu-training-kueue-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
