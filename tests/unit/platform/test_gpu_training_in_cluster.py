"""The in-cluster half alone (``inCluster``): through a kubeconfig, nothing in AWS, and refused
where it would need what only the AWS half creates."""

from __future__ import annotations

from eks_gpu_training import ConfigError
from tests.support.builders import without_karpenter
from tests.support.harness import run_main, stack_config

PROJECT = "eks-gpu-training"
KUBECONFIG = "/home/ml/.kube/config"


def in_cluster_config(stack: str = "prod", **settings) -> dict:
    """``stack`` as the in-cluster half takes it: no FSx, buckets, health gate or Karpenter (whose pool
    the teams then have no quota on)."""
    config = without_karpenter(stack_config(stack))
    config[f"{PROJECT}:healthGate"] = {"enabled": False}
    config[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": KUBECONFIG, **settings}
    config[f"{PROJECT}:storage"] = {**config[f"{PROJECT}:storage"], "fsx": {"enabled": False}}
    config[f"{PROJECT}:s3Buckets"] = []
    return config


def test_the_in_cluster_half_registers_no_aws_resource_and_one_kubernetes_provider():
    graph = run_main(in_cluster_config(context="training"))
    assert graph.error is None
    types = {r.type for r in graph.resources}
    assert not [t for t in types if t.startswith(("aws:", "eks:"))]
    provider = graph.one("pulumi:providers:kubernetes")
    assert (provider.inputs["kubeconfig"], provider.inputs["context"]) == (KUBECONFIG, "training")
    assert {r.provider.rsplit("::", 1)[0] for r in graph.resources if r.custom and r.type.startswith("kubernetes:")} == {
        provider.urn}
    releases = {r.inputs["name"] for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    # prod's finetune is a TrainJob: Kubeflow Trainer runs it, as a JobSet
    assert releases == {"gpu-operator", "aws-efa-k8s-device-plugin", "kueue", "jobset", "kubeflow-trainer"}
    for kind in ("PriorityClass", "ResourceQuota", "LocalQueue", "ClusterQueue", "Job"):
        assert [r for r in graph.resources if r.type.endswith(f":{kind}")], kind
    assert graph.exports == {"gpuOperatorStatus": graph.exports["gpuOperatorStatus"]}


def test_controllers_go_on_the_system_nodes_the_stack_describes():
    graph = run_main(in_cluster_config())
    assert graph.error is None, repr(graph.error)
    releases = {r.inputs["name"]: r.inputs["values"] for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["kueue"]["controllerManager"]["nodeSelector"]["role"] == "system"
    assert releases["jobset"]["controller"]["nodeSelector"]["role"] == "system"
    assert releases["kubeflow-trainer"]["manager"]["nodeSelector"]["role"] == "system"


def test_what_needs_the_aws_half_is_refused_together_and_nothing_is_registered():
    config = stack_config("prod")  # FSx for Lustre, and S3 buckets for the training role
    config[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": KUBECONFIG}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    paths = [p.path for p in graph.error.problems]
    assert "storage.fsx.enabled" in paths
    assert "s3Buckets" in paths
    assert "karpenter.enabled" in paths


def test_karpenter_is_refused_rather_than_left_out_silently():
    # Its controller needs an IAM role, an SQS queue and EC2NodeClasses naming AWS resources; a
    # stack that asks for it and got none would leave its pools' pending pods waiting for nodes.
    config = in_cluster_config()
    config[f"{PROJECT}:karpenter"] = stack_config("prod")[f"{PROJECT}:karpenter"]
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [(p.path, p.message) for p in graph.error.problems] == [
        ("karpenter.enabled", "Karpenter needs its controller's IAM role, an SQS interruption queue and EC2NodeClasses "
         "naming the cluster's node role, subnets and security groups, which inCluster does not create; turn it off, "
         "or deploy the whole stack")
    ]


def test_without_a_system_node_group_the_controllers_select_no_node_label():
    # A cluster made elsewhere has no role=system nodes unless its maker labelled them so: controllers
    # that required the label would stay Pending, and each release would roll back at its timeout.
    config = in_cluster_config()
    del config[f"{PROJECT}:systemNodeGroup"]
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    releases = {r.inputs["name"]: r.inputs["values"] for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["kueue"]["controllerManager"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert releases["jobset"]["controller"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert releases["kubeflow-trainer"]["manager"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "operator" not in releases["gpu-operator"]
    assert "nodeSelector" not in releases["gpu-operator"]["node-feature-discovery"]["master"]


def test_in_cluster_needs_a_kubeconfig():
    config = in_cluster_config()
    config[f"{PROJECT}:inCluster"] = {"enabled": True}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert [(p.path, p.message) for p in graph.error.problems] == [
        ("inCluster.kubeconfig", "is required when inCluster.enabled: a kubeconfig file's path or its content")
    ]


def test_the_whole_platform_refuses_in_cluster_and_the_half_refuses_its_absence():
    from eks_gpu_training import GpuTrainingInCluster, GpuTrainingPlatform
    from eks_gpu_training.platform.loading import platform_args_from_settings
    from tests.support.harness import run_program

    whole = platform_args_from_settings(in_cluster_config())
    graph = run_program(lambda: GpuTrainingPlatform("gpu-training", whole))
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [p.path for p in graph.error.problems] == ["inCluster"]
    half = platform_args_from_settings(stack_config("dev"))
    graph = run_program(lambda: GpuTrainingInCluster("gpu-training", half))
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [p.path for p in graph.error.problems] == ["inCluster.enabled"]


def test_in_cluster_refusals_come_with_the_stacks_other_problems(tmp_path):
    config = in_cluster_config("dev")
    config[f"{PROJECT}:s3Buckets"] = [{"name": "acme-training-data", "access": "read"}]
    config[f"{PROJECT}:charts"] = {"directory": str(tmp_path / "absent")}
    # dev's Karpenter, and its teams' quotas on its pool, back
    config[f"{PROJECT}:karpenter"] = stack_config("dev")[f"{PROJECT}:karpenter"]
    config[f"{PROJECT}:scheduling"] = stack_config("dev")[f"{PROJECT}:scheduling"]
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [p.path for p in graph.error.problems] == ["charts.directory", "karpenter.enabled", "s3Buckets"]
