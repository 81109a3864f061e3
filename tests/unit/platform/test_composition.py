"""The whole platform and its in-cluster half alone are one composition (``compose_in_cluster``):
the same in-cluster children under the same names, with the same inputs, waiting for the same
things; the whole stack adds only what needs its AWS half."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eks_gpu_training.platform.gpu_training_in_cluster import workload_waits
from tests.support.builders import PROJECT, without_karpenter
from tests.support.harness import Graph, Registration, run_main, stack_config

PLATFORM = "eks-gpu-training:index:GpuTrainingPlatform"
IN_CLUSTER = "eks-gpu-training:index:GpuTrainingInCluster"
EFA_DEVICE_PLUGIN = "eks-gpu-training:index:EfaDevicePlugin"
TRAINING_JOB = "eks-gpu-training:index:TrainingJob"
JOBSET_CONTROLLER = "eks-gpu-training:index:JobSetController"
TRAINER_CONTROLLER = "eks-gpu-training:index:TrainerController"
IN_CLUSTER_HALF = {
    "eks-gpu-training:index:GpuOperator",
    EFA_DEVICE_PLUGIN,
    "eks-gpu-training:index:SchedulingPolicies",
    "eks-gpu-training:index:Kueue",
    "eks-gpu-training:index:KueueQueues",
    JOBSET_CONTROLLER,
    TRAINER_CONTROLLER,
    TRAINING_JOB,
    "eks-gpu-training:index:GpuSmokeTest",
    "eks-gpu-training:index:PreflightChecks",
    "eks-gpu-training:index:VerifierRole",
}
"""What ``compose_in_cluster`` makes, as direct children of either entry point."""


def settings(stack: str) -> dict:
    """``stack`` with everything the in-cluster half can deploy turned on, and nothing it refuses
    (Karpenter, FSx, the training role, the health gate), so both entry points can take the same settings: every
    app moves to the first managed pool, on at most the nodes it keeps (dev's eval-sweep on dev-gpu's
    one node), and the teams keep their quotas on it."""
    config = without_karpenter(stack_config(stack))
    # Without teams, each namespace a queue of its own: teams refuse the checks (Kueue would hold their Jobs).
    config[f"{PROJECT}:scheduling"].pop("teams")
    config[f"{PROJECT}:storage"] = {**config[f"{PROJECT}:storage"], "fsx": {"enabled": False}}
    config[f"{PROJECT}:s3Buckets"] = []
    config[f"{PROJECT}:healthGate"] = {"enabled": False}
    pool = config[f"{PROJECT}:gpuNodeGroups"][0]
    for app in config[f"{PROJECT}:scheduling"]["trainingApps"]:
        app["pool"] = pool["name"]
        app["nodes"] = min(app["nodes"], pool["minSize"])
    config[f"{PROJECT}:smokeTest"] = {"enabled": True}
    config[f"{PROJECT}:preflight"] = {**config[f"{PROJECT}:preflight"], "enabled": True}
    config[f"{PROJECT}:preflight"].setdefault("nccl", {"enabled": False})  # dev's one node has no EFA
    config[f"{PROJECT}:verify"] = {"clusterRole": True}
    return config


def api_server_cidrs(graph: Graph) -> list[str]:
    """The blocks the controllers' NetworkPolicies admit webhook calls from (the cluster's subnets)."""
    policy = graph.one("kubernetes:networking.k8s.io/v1:NetworkPolicy", "gpu-training-kueue-ingress")
    return [peer["ipBlock"]["cidr"] for peer in policy.inputs["spec"]["ingress"][0]["from"]]


def whole_and_half(stack: str) -> tuple[Graph, Graph]:
    """Both entry points; the half told the cluster's subnets, which the whole stack knows (or reads from EC2)."""
    whole = run_main(settings(stack), stack=stack)
    assert whole.error is None, repr(whole.error)
    half_settings = settings(stack)
    half_settings[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": "/home/ml/.kube/config",
                                             "apiServerCidrs": api_server_cidrs(whole)}
    half = run_main(half_settings, stack=stack)
    assert whole.error is None, repr(whole.error)
    assert half.error is None, repr(half.error)
    return whole, half


def part_of(graph: Graph, top: Registration, urn: str) -> tuple[str, str]:
    """The direct child of ``top`` that ``urn`` is, or is under: the part of the stack it belongs to."""
    resource = graph.by_urn(urn)
    while resource.parent != top.urn:
        resource = graph.by_urn(resource.parent)
    return resource.type, resource.name


def in_cluster_objects(graph: Graph, top: Registration) -> dict[tuple[str, str], dict]:
    """Every resource under the in-cluster half's components, by type and name, with its inputs."""
    half = [child for child in graph.children(top) if child.type in IN_CLUSTER_HALF]
    return {(r.type, r.name): r.inputs for part in half for r in [part, *graph.subtree(part).resources]}


def waits(graph: Graph, top: Registration, type_: str) -> set[tuple[str, str]]:
    """The parts of the stack the one ``type_`` child of ``top`` waits for."""
    (workload,) = [child for child in graph.children(top) if child.type == type_]
    return {part_of(graph, top, urn) for urn in workload.dependencies}


def job_waits(graph: Graph, top: Registration) -> dict[str, tuple[set[tuple[str, str]], set[tuple[str, str]]]]:
    """Each training job of ``top``: the parts of the stack its component waits for, and those the
    object that makes its pods (its Job, JobSet or TrainJob) waits for, beyond its own component."""
    result = {}
    for job in [child for child in graph.children(top) if child.type == TRAINING_JOB]:
        (made,) = [r for r in graph.subtree(job).resources if r.inputs.get("kind") in ("Job", "JobSet", "TrainJob")]
        result[job.name] = ({part_of(graph, top, urn) for urn in job.dependencies},
                            {part_of(graph, top, urn) for urn in made.dependencies} - {(job.type, job.name)})
    return result


SCHEDULING = ("eks-gpu-training:index:SchedulingPolicies", "gpu-training-scheduling")
QUEUES = ("eks-gpu-training:index:KueueQueues", "gpu-training-kueue-queues")
JOBSET = (JOBSET_CONTROLLER, "gpu-training-jobset")
TRAINER = (TRAINER_CONTROLLER, "gpu-training-trainer")


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_whole_stack_registers_the_in_cluster_half_as_the_half_alone_does(stack):
    whole, half = whole_and_half(stack)
    platform, in_cluster = whole.one(PLATFORM), half.one(IN_CLUSTER)
    # dev's pool has no EFA, and no app of dev's is a TrainJob
    expected = IN_CLUSTER_HALF if stack == "prod" else IN_CLUSTER_HALF - {EFA_DEVICE_PLUGIN, TRAINER_CONTROLLER}
    assert {c.type for c in half.children(in_cluster)} == {*expected, "pulumi:providers:kubernetes"}
    assert in_cluster_objects(whole, platform) == in_cluster_objects(half, in_cluster)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_checks_and_jobs_wait_for_the_same_parts_and_the_whole_stack_adds_its_gpu_node_groups(stack):
    whole, half = whole_and_half(stack)
    platform, in_cluster = whole.one(PLATFORM), half.one(IN_CLUSTER)
    node_groups = {(c.type, c.name) for c in whole.children(platform) if c.type.endswith(":GpuNodeGroup")}
    assert node_groups
    for check in ("eks-gpu-training:index:GpuSmokeTest", "eks-gpu-training:index:PreflightChecks"):
        assert waits(whole, platform, check) == waits(half, in_cluster, check) | node_groups
    assert waits(half, in_cluster, "eks-gpu-training:index:GpuSmokeTest") == {
        ("eks-gpu-training:index:SchedulingPolicies", "gpu-training-scheduling"),
        ("eks-gpu-training:index:GpuOperator", "gpu-training-gpu-operator"),
        ("eks-gpu-training:index:Kueue", "gpu-training-kueue"),
    }
    # Every job waits for its policy, its queues and the job controllers the stack installs; a
    # TrainJob's component for its namespace and Trainer only, the TrainJob itself for the rest.
    every = {SCHEDULING, QUEUES, JOBSET, TRAINER} if stack == "prod" else {SCHEDULING, QUEUES, JOBSET}
    expected = {
        "dev": {"rl-training": (every, every), "finetune": (every, every), "eval-sweep": (every, every)},
        "prod": {"rl-training": (every, every), "finetune": ({SCHEDULING, TRAINER}, every)},
    }[stack]
    assert job_waits(whole, platform) == job_waits(half, in_cluster) == {f"gpu-training-training-{app}": w for app, w in expected.items()}


def test_the_training_role_and_file_system_are_what_the_whole_stack_adds_to_the_jobs_waits(prod_graph):
    every = {
        SCHEDULING, QUEUES, JOBSET, TRAINER,
        ("eks-gpu-training:index:TrainingIdentity", "gpu-training-training-identity"),
        ("eks-gpu-training:index:TrainingStorage", "gpu-training-training-storage"),
    }
    assert job_waits(prod_graph, prod_graph.one(PLATFORM)) == {
        "gpu-training-training-rl-training": (every, every),
        # the TrainJob's runtime is made early, waiting for its namespace and Trainer alone
        "gpu-training-training-finetune": ({SCHEDULING, TRAINER}, every),
    }


def test_the_rule_checks_wait_for_gpus_advertised_and_kueues_webhook_jobs_for_their_policy_queues_and_prerequisites():
    scheduling, operator, efa, queues, node_group, claim, jobset = (
        SimpleNamespace(role=role)
        for role in ("scheduling", "gpu-operator", "efa-device-plugin", "kueue-queues", "node-group", "claim", "jobset-release")
    )
    kueue = SimpleNamespace(release=SimpleNamespace(role="kueue-release"))
    rule = workload_waits(scheduling=scheduling, gpu_operator=operator, efa_device_plugin=efa, kueue=kueue,
                          kueue_queues=queues, gpu_nodes=[node_group], job_prerequisites=[claim], job_controllers=[jobset])
    # The job controllers' CRDs and webhooks come before a JobSet or TrainJob; the checks are Jobs.
    assert rule.training_jobs == [scheduling, claim, queues, jobset]
    assert rule.smoke_test == [scheduling, operator, node_group, kueue.release]
    assert rule.preflight == [scheduling, operator, node_group, kueue.release, efa]


def test_without_kueue_or_efa_the_checks_wait_for_the_policy_and_the_gpu_operator_alone():
    scheduling, operator = SimpleNamespace(role="scheduling"), SimpleNamespace(role="gpu-operator")
    rule = workload_waits(scheduling=scheduling, gpu_operator=operator, efa_device_plugin=None, kueue=None,
                          kueue_queues=None, gpu_nodes=[], job_prerequisites=[])
    assert rule.training_jobs == [scheduling]
    assert rule.smoke_test == rule.preflight == [scheduling, operator]



@pytest.mark.parametrize("entry_point", ["GpuTrainingPlatform", "GpuTrainingInCluster"])
def test_both_entry_points_declare_every_part_of_the_half_with_its_type_and_a_docstring(entry_point):
    import dataclasses
    import sys
    import typing

    import eks_gpu_training
    from eks_gpu_training.config.documented import field_docstrings
    from eks_gpu_training.platform.composition import InClusterHalf

    component = getattr(eks_gpu_training, entry_point)
    half = typing.get_type_hints(InClusterHalf)
    # The component's own annotations (the SDK's base classes name types their modules do not import).
    module = vars(sys.modules[component.__module__])
    declared = {name: eval(text, module) if isinstance(text, str) else text  # noqa: S307 - the library's own annotations
                for name, text in component.__annotations__.items()}
    documented = field_docstrings(component)
    for part in dataclasses.fields(InClusterHalf):
        assert declared.get(part.name) == half[part.name], part.name
        assert documented.get(part.name), part.name


def test_the_half_sets_each_of_its_parts_as_the_attribute_of_the_same_name():
    import dataclasses

    from eks_gpu_training.platform.composition import InClusterHalf

    names = [f.name for f in dataclasses.fields(InClusterHalf)]
    component = SimpleNamespace()
    InClusterHalf(**{name: f"the {name}" for name in names}).expose_on(component)
    assert vars(component) == {name: f"the {name}" for name in names}
