"""The network: a created VPC (layout, NAT, endpoints, tags) and the rules of both network modes."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any, Callable

import pytest

from eks_gpu_training.aws.network import (
    GATEWAY_ENDPOINT_SERVICES,
    INTERFACE_ENDPOINT_SERVICES,
    INTERNAL_ELB_TAG,
    PUBLIC_ELB_TAG,
    Network,
    NetworkArgs,
)
from eks_gpu_training.config import ADDRESSES_PER_EFA_NODE, ConfigError, NetworkConfig, subnet_layout
from eks_gpu_training.platform import GpuTrainingPlatform, parse_platform_args
from tests.support.harness import run_program

CREATED = {"create": True, "availabilityZones": ["us-west-2a", "us-west-2b", "us-west-2c"]}


def created_config(**network: Any) -> dict[str, Any]:
    """A stack whose network is created, with a p5 pool in one AZ with a placement group and a
    Karpenter pool in the same AZ (not retained, as a created VPC without cluster.protect requires)."""
    return {
        "region": "us-west-2",
        "cluster": {"name": "research", "endpointPublicAccessCidrs": ["203.0.113.0/24"]},
        "network": {**CREATED, **network},
        "gpuNodeGroups": [{"name": "h100", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b"}],
        "topologyLabeler": {"enabled": False},
        "karpenter": {
            "enabled": True,
            "retainOnRemoval": False,
            "gpuNodePools": [{"name": "burst", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b", "gpuLimit": 16}],
        },
    }


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(config)
    return [str(p) for p in error.value.problems]


def platform_graph(config: dict[str, Any]):
    args = parse_platform_args(config)
    graph = run_program(lambda: GpuTrainingPlatform("gpu", args))
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="module")
def created_graph():
    return platform_graph(created_config())


# --- sizes ---------------------------------------------------------------------------------------


def test_default_layout_gives_each_az_a_slash_18_private_and_a_slash_24_public_subnet():
    layout = subnet_layout(NetworkConfig.model_validate(CREATED))
    assert layout.private == {"us-west-2a": "10.0.0.0/18", "us-west-2b": "10.0.64.0/18", "us-west-2c": "10.0.128.0/18"}
    assert layout.public == {"us-west-2a": "10.0.255.0/24", "us-west-2b": "10.0.254.0/24", "us-west-2c": "10.0.253.0/24"}
    blocks = [ipaddress.ip_network(c) for c in [*layout.private.values(), *layout.public.values()]]
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1 :])


def test_a_private_subnet_holds_64_p5_nodes_at_their_address_budget():
    # 100 pods (Karpenter's p5.48xlarge `pods`) fill 3 ENIs of 49 pod addresses, plus one warm ENI: 4 x 50.
    assert 4 * 50 <= ADDRESSES_PER_EFA_NODE
    assert ipaddress.ip_network("10.0.0.0/18").num_addresses // ADDRESSES_PER_EFA_NODE == 64


def test_a_smaller_vpc_places_public_subnets_at_its_top():
    layout = subnet_layout(
        NetworkConfig.model_validate({**CREATED, "cidr": "172.16.0.0/20", "privateSubnetPrefixLength": 22, "publicSubnetPrefixLength": 26})
    )
    assert layout.private["us-west-2c"] == "172.16.8.0/22"
    assert layout.public == {"us-west-2a": "172.16.15.192/26", "us-west-2b": "172.16.15.128/26", "us-west-2c": "172.16.15.64/26"}


def test_appending_an_az_moves_no_existing_subnet():
    two = subnet_layout(NetworkConfig.model_validate({**CREATED, "availabilityZones": ["us-west-2a", "us-west-2b"]}))
    three = subnet_layout(NetworkConfig.model_validate(CREATED))
    for zone in ("us-west-2a", "us-west-2b"):
        assert (two.private[zone], two.public[zone]) == (three.private[zone], three.public[zone])


# --- rules ---------------------------------------------------------------------------------------

ADOPTED = {
    "vpcId": "vpc-0123456789abcdef0",
    "subnets": [
        {"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"},
        {"id": "subnet-0000000000000000b", "availabilityZone": "us-west-2b"},
    ],
}

REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("created network with a VPC ID", lambda c: c["network"].update(vpcId="vpc-0123456789abcdef0"), "network.vpcId: is only used when create is false"),
    ("created network with subnets", lambda c: c["network"].update(subnets=ADOPTED["subnets"]), "network.subnets: are only used when create is false"),
    ("created network in one AZ", lambda c: c["network"].update(availabilityZones=["us-west-2b"]), "network.availabilityZones: must list at least two AZs"),
    ("AZ outside the region", lambda c: c["network"]["availabilityZones"].append("us-east-1a"), "network.availabilityZones[3]: 'us-east-1a' is not in region us-west-2"),
    ("AZ listed twice", lambda c: c["network"]["availabilityZones"].append("us-west-2a"), "network.availabilityZones[3]: 'us-west-2a' is listed twice"),
    ("malformed AZ", lambda c: c["network"]["availabilityZones"].append("west"), "network.availabilityZones[3]: 'west' is not an availability zone name"),
    ("CIDR with host bits", lambda c: c["network"].update(cidr="10.0.0.1/16"), "network.cidr: '10.0.0.1/16' is not an IPv4 network"),
    ("CIDR larger than a VPC", lambda c: c["network"].update(cidr="10.0.0.0/8"), "network.cidr: '10.0.0.0/8' must be an IPv4 block between /16 and /28"),
    (
        "subnets that do not fit",
        lambda c: c["network"]["availabilityZones"].append("us-west-2d"),
        "network.cidr: 4 private /18 and 4 public /24 subnets do not fit in 10.0.0.0/16",
    ),
    ("subnet larger than the VPC", lambda c: c["network"].update(cidr="10.0.0.0/20"), "network.privateSubnetPrefixLength: /18 is larger than the VPC's 10.0.0.0/20"),
    ("pool naming subnets of a created network", lambda c: c["gpuNodeGroups"][0].update(subnetIds=["subnet-0000000000000000a"]), "gpuNodeGroups[0].subnetIds: cannot name subnets of a network this stack creates"),
    ("pool in an AZ the network lacks", lambda c: c["gpuNodeGroups"][0].update(availabilityZone="us-west-2d"), "gpuNodeGroups[0].availabilityZone: 'us-west-2d' has no subnet in network.availabilityZones"),
    ("created network for an adopted cluster", lambda c: c["cluster"].update(create=False), "network.create: must be false with cluster.create false"),
    ("adopted network without a VPC", lambda c: c.update(network={"subnets": ADOPTED["subnets"]}), "network.vpcId: is required when create is false"),
    ("adopted network without subnets", lambda c: c.update(network={"vpcId": ADOPTED["vpcId"]}), "network.subnets: are required when create is false"),
    ("adopted network with a NAT setting", lambda c: c.update(network={**ADOPTED, "natGateways": "single"}), "network.natGateways: is only used when create is true"),
]


@pytest.mark.parametrize(("mutate", "expected"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_network_rules_reject(mutate, expected):
    config = copy.deepcopy(created_config())
    mutate(config)
    problems = problems_of(config)
    assert any(p.startswith(expected) for p in problems), problems


def test_nat_mode_is_one_of_single_and_per_az():
    problems = problems_of(created_config(natGateways="two"))
    assert any(p.startswith("network.natGateways: Input should be 'single' or 'perAz'") for p in problems), problems


def test_defaults_are_adopt_with_resilient_nat_when_created():
    network = NetworkConfig.model_validate(CREATED)
    assert network.nat_gateways == "perAz"
    assert network.vpc_endpoints
    assert network.cidr == "10.0.0.0/16"
    assert NetworkConfig.model_validate(ADOPTED).create is False


# --- the created network under mocks --------------------------------------------------------------


def subnets_by_zone(graph, tag: str) -> dict[str, Any]:
    return {s.inputs["availabilityZone"]: s for s in graph.of_type("aws:ec2/subnet:Subnet") if s.inputs["tags"].get(tag) == "1"}


def test_created_network_has_a_private_and_a_public_subnet_per_az_with_the_elb_tags(created_graph):
    private = subnets_by_zone(created_graph, INTERNAL_ELB_TAG)
    public = subnets_by_zone(created_graph, PUBLIC_ELB_TAG)
    assert sorted(private) == sorted(public) == ["us-west-2a", "us-west-2b", "us-west-2c"]
    assert {z: s.inputs["cidrBlock"] for z, s in private.items()}["us-west-2b"] == "10.0.64.0/18"
    assert all(PUBLIC_ELB_TAG not in s.inputs["tags"] for s in private.values())
    vpc = created_graph.one("aws:ec2/vpc:Vpc")
    assert (vpc.inputs["enableDnsSupport"], vpc.inputs["enableDnsHostnames"]) == (True, True)


def test_the_cluster_gets_the_created_private_subnets_and_vpc(created_graph):
    private = subnets_by_zone(created_graph, INTERNAL_ELB_TAG)
    cluster = created_graph.one("eks:index:Cluster")
    assert cluster.inputs["subnetIds"] == [private[z].id for z in ("us-west-2a", "us-west-2b", "us-west-2c")]
    assert cluster.inputs["vpcId"] == created_graph.one("aws:ec2/vpc:Vpc").id
    # Nodes join only once egress routes and endpoints exist.
    for route in created_graph.of_type("aws:ec2/route:Route"):
        if route.name.endswith("-default") and "private" in route.name:
            assert created_graph.depends_on(cluster, route)


def test_pools_with_a_placement_group_land_in_the_one_private_subnet_of_their_az(created_graph):
    subnet_b = subnets_by_zone(created_graph, INTERNAL_ELB_TAG)["us-west-2b"].id
    node_group = created_graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-h100-node-group")
    assert node_group.inputs["subnetIds"] == [subnet_b]
    node_class = next(r for r in created_graph.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"))
    assert node_class.inputs["spec"]["subnetSelectorTerms"] == [{"id": subnet_b}]
    assert created_graph.of_type("aws:ec2/placementGroup:PlacementGroup")


def test_per_az_nat_routes_each_private_subnet_to_the_gateway_of_its_own_az(created_graph):
    gateways = {g.inputs["subnetId"]: g for g in created_graph.of_type("aws:ec2/natGateway:NatGateway")}
    public = subnets_by_zone(created_graph, PUBLIC_ELB_TAG)
    assert sorted(gateways) == sorted(s.id for s in public.values())
    for zone in public:
        route = created_graph.one("aws:ec2/route:Route", f"gpu-network-private-{zone}-default")
        assert route.inputs["natGatewayId"] == gateways[public[zone].id].id


def test_endpoints_cover_ecr_s3_sts_ec2_and_eks_auth_in_the_private_subnets(created_graph):
    endpoints = {e.inputs["serviceName"]: e for e in created_graph.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert sorted(endpoints) == sorted(f"com.amazonaws.us-west-2.{s}" for s in (*INTERFACE_ENDPOINT_SERVICES, *GATEWAY_ENDPOINT_SERVICES))
    assert sorted(INTERFACE_ENDPOINT_SERVICES) == ["ec2", "ecr.api", "ecr.dkr", "eks-auth", "sts"]
    private_ids = sorted(s.id for s in subnets_by_zone(created_graph, INTERNAL_ELB_TAG).values())
    for service in INTERFACE_ENDPOINT_SERVICES:
        endpoint = endpoints[f"com.amazonaws.us-west-2.{service}"]
        assert endpoint.inputs["vpcEndpointType"] == "Interface"
        assert endpoint.inputs["privateDnsEnabled"] is True
        assert sorted(endpoint.inputs["subnetIds"]) == private_ids
    s3 = endpoints["com.amazonaws.us-west-2.s3"]
    assert s3.inputs["vpcEndpointType"] == "Gateway"
    assert len(s3.inputs["routeTableIds"]) == 3


def network_graph(**network: Any):
    config = NetworkConfig.model_validate({**CREATED, **network})
    graph = run_program(lambda: Network("net", NetworkArgs(config=config, region="us-west-2", name_prefix="research")))
    assert graph.error is None, repr(graph.error)
    return graph


def test_switching_nat_mode_changes_only_gateways_and_default_routes():
    """NAT mode is a route change: subnets, tables and associations keep their inputs, so nothing
    that holds nodes is replaced (a route's target is updated in place, ReplaceRoute in the EC2 API)."""
    single, per_az = network_graph(natGateways="single"), network_graph(natGateways="perAz")
    assert len(single.of_type("aws:ec2/natGateway:NatGateway")) == 1
    assert len(per_az.of_type("aws:ec2/natGateway:NatGateway")) == 3
    for type_ in ("aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/routeTableAssociation:RouteTableAssociation", "aws:ec2/vpcEndpoint:VpcEndpoint"):
        assert {r.name: r.inputs for r in single.of_type(type_)} == {r.name: r.inputs for r in per_az.of_type(type_)}, type_
    one_gateway = single.one("aws:ec2/natGateway:NatGateway").id
    assert {r.inputs.get("natGatewayId") for r in single.of_type("aws:ec2/route:Route") if "private" in r.name} == {one_gateway}


def test_changing_the_vpc_cidr_changes_every_subnet_block():
    """A subnet's CIDR cannot change (EC2 has no API for it), so a new VPC CIDR replaces every subnet
    and what runs in them; docs/operations.md says so."""
    before, after = network_graph(), network_graph(cidr="10.1.0.0/16")
    cidrs = lambda g: {s.name: s.inputs["cidrBlock"] for s in g.of_type("aws:ec2/subnet:Subnet")}  # noqa: E731 - a one-line lookup
    assert cidrs(before).keys() == cidrs(after).keys()
    assert all(cidrs(before)[name] != cidrs(after)[name] for name in cidrs(before))


def test_a_program_composes_its_own_network_cluster_and_pool():
    """What a user's program does without the platform: Network, then EksCluster on its ref, then a pool."""
    from eks_gpu_training import EksCluster, EksClusterArgs, GpuNodeGroup, GpuNodeGroupArgs
    from eks_gpu_training.config import ClusterConfig, GpuNodeGroupConfig, SystemNodeGroupConfig

    config = NetworkConfig.model_validate(CREATED)
    pool = GpuNodeGroupConfig.model_validate({"name": "train", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2c"})

    def program():
        network = Network("net", NetworkArgs(config=config, region="us-west-2", name_prefix="research"))
        cluster = EksCluster(
            "c",
            EksClusterArgs(
                cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["203.0.113.0/24"]),
                network=network.ref,
                system_node_group=SystemNodeGroupConfig(enabled=False),
                region="us-west-2",
                partition="aws",
            ),
        )
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=config))

    graph = run_program(program)
    assert graph.error is None, repr(graph.error)
    subnet_c = graph.one("aws:ec2/subnet:Subnet", "net-private-us-west-2c")
    assert graph.one("aws:eks/nodeGroup:NodeGroup").inputs["subnetIds"] == [subnet_c.id]


def test_without_endpoints_the_network_has_none_and_egress_still_goes_through_nat():
    graph = network_graph(vpcEndpoints=False, natGateways="single")
    assert graph.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") == []
    assert graph.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert len([r for r in graph.of_type("aws:ec2/route:Route") if r.inputs.get("natGatewayId")]) == 3


def test_components_refuse_a_misused_network_before_registering_anything():
    from eks_gpu_training import EksCluster, EksClusterArgs
    from eks_gpu_training.config import ClusterConfig, SystemNodeGroupConfig

    adopted = NetworkConfig.model_validate(ADOPTED)
    graph = run_program(lambda: Network("net", NetworkArgs(config=adopted, region="us-west-2", name_prefix="research")))
    assert isinstance(graph.error, ConfigError)
    assert "Network(net).config.create: must be true" in str(graph.error)
    one_az = NetworkConfig.model_validate({**CREATED, "availabilityZones": ["us-west-2a"]})
    graph = run_program(lambda: Network("net", NetworkArgs(config=one_az, region="us-west-2", name_prefix="research")))
    assert isinstance(graph.error, ConfigError)
    assert "network.availabilityZones: must list at least two AZs" in str(graph.error)
    created = NetworkConfig.model_validate(CREATED)
    cluster = ClusterConfig(name="research", endpoint_public_access_cidrs=["203.0.113.0/24"])
    graph = run_program(
        lambda: EksCluster(
            "c",
            EksClusterArgs(cluster=cluster, network=created, system_node_group=SystemNodeGroupConfig(enabled=False), region="us-west-2", partition="aws"),
        )
    )
    assert isinstance(graph.error, ConfigError)
    assert "EksCluster(c).network.create" in str(graph.error)
    assert graph.resources == []
    without_vpc = NetworkConfig.model_validate({"subnets": ADOPTED["subnets"]})
    graph = run_program(
        lambda: EksCluster(
            "c",
            EksClusterArgs(cluster=cluster.model_copy(update={"create": False}), network=without_vpc, region="us-west-2"),
        )
    )
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["EksCluster(c).network.vpcId"]
    assert graph.resources == []


def test_a_created_network_feeds_your_own_eks_cluster_through_the_refs_subnets():
    """``ClusterRef.from_eks_cluster(subnets=network.ref.subnets)``: pools of a cluster you made
    yourself choose among the created subnets by AZ, before their IDs exist."""
    import pulumi_eks as eks

    from eks_gpu_training import ClusterRef, GpuNodeGroup, GpuNodeGroupArgs
    from eks_gpu_training.config import GpuNodeGroupConfig

    config = NetworkConfig.model_validate(CREATED)
    pool = GpuNodeGroupConfig.model_validate({"name": "train", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b"})

    def program():
        network = Network("net", NetworkArgs(config=config, region="us-west-2", name_prefix="research"))
        cluster = eks.Cluster("research", name="research", vpc_id=network.vpc_id, subnet_ids=network.private_subnet_ids)
        ref = ClusterRef.from_eks_cluster(cluster, region="us-west-2", name="research", subnets=network.ref.subnets)
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=ref, pool=pool, network=config))

    graph = run_program(program)
    assert graph.error is None, repr(graph.error)
    subnet_b = graph.one("aws:ec2/subnet:Subnet", "net-private-us-west-2b")
    assert graph.one("aws:eks/nodeGroup:NodeGroup").inputs["subnetIds"] == [subnet_b.id]


def test_a_pool_refuses_a_network_whose_subnets_it_cannot_reach():
    """Before anything registers: an adopted network without subnets, or a network to create given
    as configuration to a cluster ref that does not hold its subnets."""
    import pulumi_eks as eks

    from eks_gpu_training import ClusterRef, GpuNodeGroup, GpuNodeGroupArgs
    from eks_gpu_training.config import GpuNodeGroupConfig

    pool = GpuNodeGroupConfig.model_validate({"name": "train", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b"})

    anywhere = GpuNodeGroupConfig.model_validate(
        {"name": "train", "instanceTypes": ["p5.48xlarge"], "placementGroup": {"mode": "none"}, "efa": "disabled"}
    )

    def program(network: NetworkConfig, pool: GpuNodeGroupConfig):
        def run():
            cluster = eks.Cluster("research", name="research")
            ref = ClusterRef.from_eks_cluster(cluster, region="us-west-2", name="research")
            GpuNodeGroup("train", GpuNodeGroupArgs(cluster=ref, pool=pool, network=network))

        return run

    graph = run_program(program(NetworkConfig(vpc_id="vpc-0123456789abcdef0"), anywhere))
    assert [str(p) for p in graph.error.problems] == [
        "GpuNodeGroup(train).network.subnets: leave the pool without a subnet; list the VPC's private subnets with their AZs"
    ]
    graph = run_program(program(NetworkConfig.model_validate(CREATED), pool))
    assert [p.path for p in graph.error.problems] == ["GpuNodeGroup(train).network.create"]
    assert "ClusterRef.from_eks_cluster(..., subnets=network.ref.subnets)" in str(graph.error)
    assert [r for r in graph.resources if r.type.startswith("eks-gpu-training")] == []


def test_an_adopted_network_given_as_outputs_skips_the_comparisons_it_cannot_make():
    import pulumi

    from eks_gpu_training.config import SubnetConfig, validate_network

    a, b = pulumi.Output.from_input("subnet-a"), pulumi.Output.from_input("subnet-b")
    network = NetworkConfig(
        vpc_id=pulumi.Output.from_input("vpc"),
        subnets=[SubnetConfig(id=a, availability_zone="us-west-2a"), SubnetConfig(id=b, availability_zone="us-west-2b")],
    )
    assert validate_network(network, "us-west-2", cluster_created=True) == []
    twice = network.model_copy(update={"subnets": [*network.subnets, SubnetConfig(id="subnet-0123456789abcdef0", availability_zone="us-west-2a")] * 2})
    assert [str(p) for p in validate_network(twice, "us-west-2", cluster_created=True)] == [
        "network.subnets[5].id: 'subnet-0123456789abcdef0' is listed twice"
    ]
