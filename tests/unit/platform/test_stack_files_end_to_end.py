"""Both stack files, run end to end through __main__.py under the mock engine."""

from __future__ import annotations

import pytest

from eks_gpu_training.facts.gpu_nodes import GPU_TAINT_EFFECT, GPU_TAINT_KEY, GPU_TAINT_VALUE
from tests.support.harness import stack_config

MNG = "aws:eks/nodeGroup:NodeGroup"


def gpu_node_groups(graph):
    return [r for r in graph.of_type(MNG) if r.inputs.get("taints")]


def test_prod_creates_cluster_system_group_and_one_tainted_gpu_group(prod_graph):
    cluster = prod_graph.one("eks:index:Cluster")
    assert cluster.inputs["name"] == "gpu-training-prod"
    assert cluster.inputs["authenticationMode"] == "API"
    assert cluster.inputs["skipDefaultNodeGroup"] is True
    assert prod_graph.one("aws:eks/addon:Addon", "gpu-training-cluster-pod-identity-agent").inputs["addonName"] == "eks-pod-identity-agent"

    system = prod_graph.one(MNG, "gpu-training-cluster-system")
    assert "taints" not in system.inputs
    assert system.inputs["labels"] == {"role": "system"}

    (gpu,) = gpu_node_groups(prod_graph)
    assert gpu.inputs["taints"] == [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT},
                                    {"key": "eks-gpu-training/unverified", "effect": "NO_SCHEDULE"}]
    assert gpu.inputs["labels"] == {"role": "gpu-training", "eks-gpu-training/pool": "p5-training", "environment": "prod"}
    assert gpu.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert gpu.inputs["capacityType"] == "ON_DEMAND"
    assert gpu.inputs["instanceTypes"] == ["p5.48xlarge"]
    assert gpu.inputs["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 2}
    assert gpu.ignore_changes == ["scalingConfig.desiredSize"]


def test_prod_gpu_launch_template_uses_the_created_cluster_placement_group(prod_graph):
    placement = prod_graph.one("aws:ec2/placementGroup:PlacementGroup", "gpu-training-p5-training-placement-group")
    assert placement.inputs["strategy"] == "cluster"
    template = prod_graph.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-training-p5-training-launch-template")
    assert template.inputs["placement"] == {"groupName": placement.inputs["name"]}
    assert prod_graph.depends_on(template, placement)
    (gpu,) = gpu_node_groups(prod_graph)
    assert prod_graph.depends_on(gpu, template)


def test_prod_gpu_subnets_are_all_in_the_pool_availability_zone(prod_graph):
    config = stack_config("prod")
    zone_of = {s["id"]: s["availabilityZone"] for s in config["eks-gpu-training:network"]["subnets"]}
    (gpu,) = gpu_node_groups(prod_graph)
    assert {zone_of[s] for s in gpu.inputs["subnetIds"]} == {"us-west-2b"}


def test_prod_lays_out_32_efa_interfaces_for_p5(prod_graph):
    template = prod_graph.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-training-p5-training-launch-template")
    interfaces = template.inputs["networkInterfaces"]
    assert len(interfaces) == 32
    assert interfaces[0]["interfaceType"] == "efa"
    assert interfaces[0]["deviceIndex"] == 0
    assert {i["interfaceType"] for i in interfaces[1:]} == {"efa-only"}
    assert [i["networkCardIndex"] for i in interfaces] == list(range(32))


def test_dev_has_one_small_gpu_pool_without_placement_group_or_efa(dev_graph):
    (gpu,) = gpu_node_groups(dev_graph)
    assert gpu.inputs["instanceTypes"] == ["g6e.xlarge"]
    assert dev_graph.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    template = dev_graph.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-training-dev-gpu-launch-template")
    assert "placement" not in template.inputs
    assert "networkInterfaces" not in template.inputs


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_exports_cluster_name_secret_kubeconfig_and_group_names(stack, request):
    graph = request.getfixturevalue(f"{stack}_graph")
    assert graph.exports["clusterName"] == f"gpu-training-{stack}"
    assert "kubeconfig" in graph.secret_exports
    # EKS names each group from its pool's prefix plus a unique suffix.
    (name,) = graph.exports["gpuNodeGroupNames"]
    (pool,) = stack_config(stack)["eks-gpu-training:gpuNodeGroups"]
    assert name.startswith(f"{pool['name']}-")
    assert name != f"{pool['name']}-"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_shipped_pool_can_get_nodes(stack):
    # Nothing in these stacks scales a managed node group (Karpenter launches nodes of its own
    # NodePools only), so a managed pool gets nodes only from its minSize; a Karpenter pool needs a
    # GPU limit of at least one node's GPUs.
    from eks_gpu_training.platform import parse_platform_args

    config = stack_config(stack)
    values = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("eks-gpu-training:")}
    args = parse_platform_args({**values, "region": config["aws:region"]})
    assert args.gpu_node_groups
    for pool in args.gpu_node_groups:
        assert pool.min_size >= 1, f"{stack}: {pool.name} has minSize {pool.min_size} and nothing scales it"
    for pool in args.karpenter.gpu_node_pools:
        assert pool.gpu_limit >= pool.gpus_per_node, f"{stack}: {pool.name} cannot launch one node"
