"""The cluster's network: a VPC this stack creates on a fresh account, or an existing one adopted.

A created network is plain pulumi-aws resources rather than a component package: awsx's ``Vpc``
is a remote (multi-language) component, so under the mock engine it would be one registration
with no children and its subnets, routes and NAT gateways would never be seen by a test. Here
every resource is registered by this module and shows up under mocks with its real inputs.

Layout (``config.subnet_layout``): per AZ one private subnet (nodes, control-plane ENIs, FSx,
endpoint interfaces; tagged for internal load balancers) and one public subnet (NAT gateway,
internet-facing load balancers), a route table per private subnet whose default route goes to a
NAT gateway of the same AZ (``natGateways: perAz``) or to the one gateway (``single``), and the
VPC endpoints nodes need, so image pulls and AWS calls stay off the NAT gateways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

from ..config.arguments import check_model_fields
from ..config.base import Tags, merged_tags, tag_map
from ..config.documented import component_args, documented_args, documented_component
from ..config import ConfigError, NetworkConfig, Problem, SubnetRef, network_zones, subnet_layout, validate_network
from ..facts.aws_names import PhysicalName

INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
"""Private subnets carry it so the AWS Load Balancer Controller puts internal load balancers there
(docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html, subnet tagging)."""

PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
"""Public subnets carry it so internet-facing load balancers land there (same page)."""

INTERFACE_ENDPOINT_SERVICES = ("ecr.api", "ecr.dkr", "sts", "ec2", "eks-auth")
"""Interface endpoints a private cluster's nodes need
(docs.aws.amazon.com/eks/latest/userguide/private-clusters.html): ECR API and registry, STS, EC2
(VPC CNI, node start), EKS Auth (Pod Identity). Image layers come from S3, through the gateway
endpoint."""

GATEWAY_ENDPOINT_SERVICES = ("s3",)
"""Gateway endpoints: S3 (ECR image layers, datasets, checkpoints); free of charge, unlike NAT traffic."""

HTTPS_PORT = 443


def endpoint_service_name(region: str, service: str) -> str:
    """The endpoint service name of an AWS service in a region (``com.amazonaws.<region>.<service>``)."""
    return f"com.amazonaws.{region}.{service}"


def nat_gateway_zones(network: NetworkConfig) -> list[str]:
    """The AZs that get a NAT gateway: every AZ (perAz) or the first (single)."""
    zones = network_zones(network)
    return zones if network.nat_gateways == "perAz" else zones[:1]


def nat_zone_for(network: NetworkConfig, zone: str) -> str:
    """The AZ whose NAT gateway a private subnet in ``zone`` sends its egress to."""
    return zone if network.nat_gateways == "perAz" else nat_gateway_zones(network)[0]


def endpoints_security_group_resource_name(name: str) -> str:
    """Resource name of the interface endpoints' security group (auto-named by Pulumi)."""
    return f"{name}-endpoints"


def network_physical_names(name: str, config: NetworkConfig) -> list[PhysicalName]:
    """Every length-limited AWS name ``Network(name, ...)`` generates."""
    if not config.vpc_endpoints:
        return []
    return [PhysicalName("aws:ec2/securityGroup:SecurityGroup", endpoints_security_group_resource_name(name), autonamed=True)]


@dataclass(frozen=True)
class NetworkRef:
    """What the cluster and its pools need of the network, created or adopted alike."""

    vpc_id: pulumi.Input[str]
    """The VPC."""
    subnets: tuple[SubnetRef, ...]
    """Private subnets with their AZs (IDs are Outputs for a created network)."""
    ready: tuple[pulumi.Resource, ...] = field(default_factory=tuple)
    """Resources nodes need before they launch (NAT routes and endpoints of a created network)."""

    @property
    def subnet_ids(self) -> list[pulumi.Input[str]]:
        return [s.id for s in self.subnets]


def adopted_network(network: NetworkConfig) -> NetworkRef:
    """The ref of an existing VPC and its private subnets, straight from the configuration (which
    ``validate_network`` or ``EksCluster`` has checked names the VPC)."""
    if network.vpc_id is None:
        raise ValueError("an adopted network needs its vpcId (validate_network refuses one without)")
    return NetworkRef(
        vpc_id=network.vpc_id, subnets=tuple(SubnetRef(id=s.id, availability_zone=s.availability_zone) for s in network.subnets)
    )


@documented_args
@dataclass
class NetworkArgs:
    """Arguments of ``Network``."""

    config: NetworkConfig
    """The network section (``create`` must be true)."""
    region: str
    """AWS region (endpoint service names)."""
    name_prefix: pulumi.Input[str]
    """Prefix of the resources' ``Name`` tags (the cluster name, which may be an Output)."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs). Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self)


@documented_component(NetworkArgs)
class Network(pulumi.ComponentResource):
    """A VPC with private and public subnets in each AZ, NAT egress and the VPC endpoints of a private cluster."""

    ref: NetworkRef
    """The network as ``EksClusterArgs.network`` and ``ClusterRef.from_eks_cluster(subnets=...)`` take it."""
    vpc_id: pulumi.Output[str]
    """The VPC's ID."""
    private_subnet_ids: pulumi.Output[list[str]]
    """Private subnet IDs, in AZ order."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Public subnet IDs, in AZ order."""

    def __init__(self, name: str, args: Optional[NetworkArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(NetworkArgs, "Network", name, args, fields)
        config = args.config
        problems = validate_network(config, args.region, cluster_created=True)
        if not config.create:
            problems.insert(0, Problem(f"Network({name}).config.create", "must be true: Network creates a VPC; an adopted one needs no component (adopted_network)"))
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:Network", name, None, opts)
        tags = tag_map(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        layout = subnet_layout(config)
        zones = network_zones(config)

        def named(suffix: str, extra: Optional[Mapping[str, str]] = None) -> Tags:
            return merged_tags(tags, {**(extra or {}), "Name": pulumi.Output.concat(args.name_prefix, "-", suffix)})

        # DNS support and hostnames: interface endpoints with private DNS and EKS nodes need both
        # (docs.aws.amazon.com/eks/latest/userguide/network-reqs.html).
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=config.cidr,
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=named("vpc"),
            region=args.region,
            opts=child,
        )
        in_vpc = pulumi.ResourceOptions(parent=vpc)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=named("igw"), region=args.region, opts=in_vpc)

        public_table = aws.ec2.RouteTable(f"{name}-public-routes", vpc_id=vpc.id, tags=named("public"), region=args.region, opts=in_vpc)
        internet_route = aws.ec2.Route(
            f"{name}-public-default",
            route_table_id=public_table.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=gateway.id,
            region=args.region,
            opts=pulumi.ResourceOptions(parent=public_table),
        )
        public_subnets: dict[str, aws.ec2.Subnet] = {}
        for zone in zones:
            public_subnets[zone] = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                cidr_block=layout.public[zone],
                availability_zone=zone,
                tags=named(f"public-{zone}", {PUBLIC_ELB_TAG: "1"}),
                region=args.region,
                opts=in_vpc,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}-association",
                subnet_id=public_subnets[zone].id,
                route_table_id=public_table.id,
                region=args.region,
                opts=pulumi.ResourceOptions(parent=public_subnets[zone]),
            )

        nat_gateways: dict[str, aws.ec2.NatGateway] = {}
        for zone in nat_gateway_zones(config):
            address = aws.ec2.Eip(f"{name}-nat-{zone}-address", domain="vpc", tags=named(f"nat-{zone}"), region=args.region, opts=in_vpc)
            # A NAT gateway forwards nothing until its subnet routes to the internet gateway.
            nat_gateways[zone] = aws.ec2.NatGateway(
                f"{name}-nat-{zone}",
                subnet_id=public_subnets[zone].id,
                allocation_id=address.allocation_id,
                connectivity_type="public",
                tags=named(f"nat-{zone}"),
                region=args.region,
                opts=pulumi.ResourceOptions(parent=public_subnets[zone], depends_on=[internet_route]),
            )

        private_subnets: dict[str, aws.ec2.Subnet] = {}
        private_tables: list[aws.ec2.RouteTable] = []
        ready: list[pulumi.Resource] = []
        for zone in zones:
            subnet = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                cidr_block=layout.private[zone],
                availability_zone=zone,
                tags=named(f"private-{zone}", {INTERNAL_ELB_TAG: "1"}),
                region=args.region,
                opts=in_vpc,
            )
            private_subnets[zone] = subnet
            # One table per private subnet whatever the NAT mode, so switching modes changes a route,
            # not the tables or the subnets' associations.
            table = aws.ec2.RouteTable(f"{name}-private-{zone}-routes", vpc_id=vpc.id, tags=named(f"private-{zone}"), region=args.region, opts=in_vpc)
            private_tables.append(table)
            ready.append(
                aws.ec2.Route(
                    f"{name}-private-{zone}-default",
                    route_table_id=table.id,
                    destination_cidr_block="0.0.0.0/0",
                    nat_gateway_id=nat_gateways[nat_zone_for(config, zone)].id,
                    region=args.region,
                    opts=pulumi.ResourceOptions(parent=table),
                )
            )
            ready.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{zone}-association",
                    subnet_id=subnet.id,
                    route_table_id=table.id,
                    region=args.region,
                    opts=pulumi.ResourceOptions(parent=subnet),
                )
            )

        if config.vpc_endpoints:
            ready += self._endpoints(name, args, vpc, list(private_subnets.values()), private_tables, named)

        self.ref = NetworkRef(
            vpc_id=vpc.id,
            subnets=tuple(SubnetRef(id=private_subnets[zone].id, availability_zone=zone) for zone in zones),
            ready=tuple(ready),
        )
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*(private_subnets[zone].id for zone in zones))
        self.public_subnet_ids = pulumi.Output.all(*(public_subnets[zone].id for zone in zones))
        self.register_outputs(
            {"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids, "publicSubnetIds": self.public_subnet_ids}
        )

    def _endpoints(self, name, args: NetworkArgs, vpc, private_subnets, private_tables, named) -> list[pulumi.Resource]:
        in_vpc = pulumi.ResourceOptions(parent=vpc)
        group = aws.ec2.SecurityGroup(
            endpoints_security_group_resource_name(name),
            vpc_id=vpc.id,
            description="HTTPS from the VPC to its interface endpoints",
            tags=named("endpoints"),
            region=args.region,
            opts=in_vpc,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-endpoints-https",
            security_group_id=group.id,
            cidr_ipv4=args.config.cidr,
            ip_protocol="tcp",
            from_port=HTTPS_PORT,
            to_port=HTTPS_PORT,
            description="HTTPS from the VPC",
            tags=tag_map(args.tags),
            region=args.region,
            opts=pulumi.ResourceOptions(parent=group),
        )
        endpoints: list[pulumi.Resource] = []
        for service in GATEWAY_ENDPOINT_SERVICES:
            endpoints.append(
                aws.ec2.VpcEndpoint(
                    f"{name}-{service}",
                    vpc_id=vpc.id,
                    service_name=endpoint_service_name(args.region, service),
                    vpc_endpoint_type="Gateway",
                    route_table_ids=[t.id for t in private_tables],
                    tags=named(service),
                    region=args.region,
                    opts=in_vpc,
                )
            )
        for service in INTERFACE_ENDPOINT_SERVICES:
            endpoints.append(
                aws.ec2.VpcEndpoint(
                    f"{name}-{service.replace('.', '-')}",
                    vpc_id=vpc.id,
                    service_name=endpoint_service_name(args.region, service),
                    vpc_endpoint_type="Interface",
                    private_dns_enabled=True,
                    subnet_ids=[s.id for s in private_subnets],
                    security_group_ids=[group.id],
                    tags=named(service),
                    region=args.region,
                    opts=in_vpc,
                )
            )
        return endpoints


def cluster_subnet_cidrs(network: NetworkConfig, region: str) -> list[pulumi.Input[str]]:
    """The CIDRs of the cluster's subnets, where EKS places the control plane's network interfaces
    (the source of its webhook calls): a created network's private subnets, known now; an adopted
    network's subnets as EC2 describes them (``aws.ec2.get_subnet``, DescribeSubnets)."""
    if network.create:
        return list(subnet_layout(network).private.values())
    return [aws.ec2.get_subnet_output(id=subnet.id, region=region).cidr_block for subnet in network.subnets]
