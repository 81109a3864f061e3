"""A training app's Kueue queue and topology request (``workloads/training_spec.py``): which jobs ask
for a topology, at which level, and the requests the configuration refuses."""

from __future__ import annotations


import pytest


from eks_gpu_training.platform.loading import parse_platform_args
from eks_gpu_training.workloads.kueue_flavors import TOPOLOGY_LEVELS
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE
from eks_gpu_training.workloads.templates import training_job
from eks_gpu_training.workloads.training_spec import TrainingJobSpec, validate_training_job
from tests.support.builders import kubernetes_objects
from tests.support.kueue_stacks import QUEUE_LABEL, PREFERRED, REQUIRED, LAYER_3, raw, problems, jobs, node_affinity_labels


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


def test_rejects_a_topology_request_without_kueue():
    values = raw()
    values["kueue"]["enabled"] = False
    values["scheduling"]["trainingApps"][0]["topology"] = "required"
    assert problems(values) == ["scheduling.trainingApps[0].topology: is only used with kueue.enabled: true"]


def test_rejects_a_topology_request_kueue_would_never_read():
    spec = TrainingJobSpec(name="t", nodes=2, instance_types=("p5.48xlarge",), priority_class="p", namespace="n", topology_mode="required")
    assert [str(p) for p in validate_training_job(spec, "job")] == [
        "job.topology: a topology request needs a queue (queue_name) and a level (topology_level): only Kueue reads it"
    ]
    odd = TrainingJobSpec(**{**spec.__dict__, "queue_name": LOCAL_QUEUE, "topology_level": LAYER_3, "topology_mode": "strict"})
    assert [str(p) for p in validate_training_job(odd, "job")] == ["job.topology: 'strict' is not a Kueue topology mode; allowed: preferred, required"]
