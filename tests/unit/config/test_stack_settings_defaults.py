"""Defaults that follow from what is given: the partition from the region, system nodes only for a
created cluster, a pool's network from its cluster."""

from __future__ import annotations

import pytest

from eks_gpu_training import (
    ClusterConfig,
    ConfigError,
    EksClusterArgs,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
    SystemNodeGroupConfig,
    parse_platform_args,
)
from tests.support.harness import research_cluster, run_program, stand_in_ref, two_az_network

NETWORK = two_az_network()
POOL = GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a")


@pytest.mark.parametrize(("region", "partition"), [("us-west-2", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
def test_eks_cluster_args_take_the_partition_from_the_region(region, partition):
    assert EksClusterArgs(cluster=ClusterConfig(name="r"), network=NETWORK, region=region).partition == partition


def test_eks_cluster_args_give_a_created_cluster_system_nodes_and_an_adopted_one_none():
    created = EksClusterArgs(cluster=ClusterConfig(name="r"), network=NETWORK, region="us-west-2")
    adopted = EksClusterArgs(cluster=ClusterConfig(name="r", create=False), network=NETWORK, region="us-west-2")
    asked = EksClusterArgs(cluster=ClusterConfig(name="r", create=False), network=NETWORK, region="us-west-2", system_node_group=SystemNodeGroupConfig())
    assert (created.system_node_group, adopted.system_node_group.enabled, asked.system_node_group.enabled) == (SystemNodeGroupConfig(), False, True)


def _platform(**overrides):
    values = {
        "region": "us-west-2",
        "cluster": {"name": "research", "create": False},
        "network": {"vpcId": NETWORK.vpc_id, "subnets": [{"id": s.id, "availabilityZone": s.availability_zone} for s in NETWORK.subnets]},
    }
    return parse_platform_args({**values, **overrides})


def test_an_adopted_cluster_in_a_stack_gets_no_system_nodes_unless_asked():
    assert _platform().system_node_group.enabled is False
    assert _platform(systemNodeGroup={}).system_node_group.enabled is True
    assert _platform(cluster={"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]}).system_node_group.enabled is True


def test_a_pool_left_without_a_network_takes_its_clusters_subnets():
    def program():
        GpuNodeGroup("h100", cluster=research_cluster(NETWORK), pool=POOL)

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    pool = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert pool.inputs["subnetIds"] == ["subnet-0123456789abcdef0"]


def test_a_pool_network_given_without_a_vpc_id_takes_the_clusters():
    args = GpuNodeGroupArgs(
        cluster=stand_in_ref(), pool=POOL, network={"subnets": [{"id": "subnet-0123456789abcdef0", "availabilityZone": "us-west-2a"}]}
    )
    assert args.network.vpc_id == "vpc-0123456789abcdef0"


def test_refuses_a_pool_without_a_network_when_its_cluster_ref_holds_no_subnets():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupArgs(cluster=stand_in_ref(), pool=POOL)
    assert [p.path for p in raised.value.problems] == ["GpuNodeGroupArgs.network"]


def test_system_node_sizes_take_outputs_and_known_ones_are_still_checked():
    import pulumi

    def program():
        from eks_gpu_training import EksCluster

        size = pulumi.Output.from_input(3)
        EksCluster("c", cluster=ClusterConfig(name="r", endpoint_public_access_cidrs=["192.0.2.0/24"]), network=NETWORK,
                   region="us-west-2", system_node_group=SystemNodeGroupConfig(desired_size=size, max_size=size))

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    scaling = graph.one("aws:eks/nodeGroup:NodeGroup").inputs["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (2, 3, 3)
    assert [p.split(":")[0] for p in _problems(systemNodeGroup={"minSize": 5, "maxSize": 4})] == ["systemNodeGroup.minSize"]


def _problems(**overrides) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        _platform(cluster={"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]}, **overrides)
    return [str(p) for p in raised.value.problems]
