"""The network's configuration: a VPC the stack creates, or an existing one it adopts, and the
private subnets (with their availability zones) that the cluster and its pools use.

A created network's subnet IDs are unknown until ``pulumi up``, but its availability zones are
plain configuration, so every rule that places a pool (one AZ with a placement group, EFA within
one AZ) works on ``planned_subnets``: the private subnets with their AZs, whose IDs are strings
for an adopted network and ``None`` for a created one until the resources exist.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

from pydantic import Field

from .base import _AZ, _Model
from .problems import Problem
from .inputs import ResourceInput, TextOrOutput, is_unknown, shown

SubnetId = Annotated[TextOrOutput, ResourceInput(r"^subnet-[0-9a-f]{8,17}$", "a subnet ID")]
"""A subnet ID (``subnet-`` and 8 or 17 hex digits), or the ``id`` Output of a subnet made in the same program."""
VpcId = Annotated[TextOrOutput, ResourceInput(r"^vpc-[0-9a-f]{8,17}$", "a VPC ID")]
"""A VPC ID, or the ``id`` Output of a VPC made in the same program."""

VPC_PREFIX_RANGE = (16, 28)
"""IPv4 VPC CIDR blocks are /16 to /28 (docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html)."""

ADDRESSES_PER_EFA_NODE = 256
"""VPC addresses budgeted per p5.48xlarge-class node: at most 100 pods fill 3 ENIs of 50 addresses,
plus one warm ENI (WARM_ENI_TARGET=1), 200 addresses
(docs.aws.amazon.com/AWSEC2/latest/UserGuide/AvailableIpPerENI.html); EFA-only interfaces take none.
256 leaves room for a rolling update."""

PRIVATE_SUBNET_PREFIX_LENGTH = 18
"""Default private subnet size: a /18 holds 16,384 addresses, 64 nodes of ADDRESSES_PER_EFA_NODE
per AZ, with FSx and VPC endpoint interfaces beside them; three AZs take three quarters of a /16."""

PUBLIC_SUBNET_PREFIX_LENGTH = 24
"""Default public subnet size: public subnets hold only NAT gateways and internet-facing load
balancers (an ALB needs 8 free addresses per subnet), so a /24 is plenty."""


class SubnetConfig(_Model):
    """A private subnet the cluster and its nodes use."""

    id: SubnetId
    """Subnet ID, or the ``id`` Output of a subnet made in the same program (required)."""
    availability_zone: str = Field(pattern=_AZ)
    """Availability zone of the subnet, e.g. ``us-west-2a`` (required; placement groups are per AZ)."""


class NetworkConfig(_Model):
    """The VPC the cluster lives in: created by the stack, or an existing one adopted by ID."""

    create: bool = False
    """Create the VPC, its subnets, NAT and endpoints (true) or adopt `vpcId` and `subnets` (false). Default: false."""
    vpc_id: Optional[VpcId] = None
    """ID of the VPC to adopt, or the ``id`` Output of a VPC made in the same program (required when create is false)."""
    subnets: list[SubnetConfig] = []
    """Private subnets to adopt for the control plane ENIs and the nodes, with their AZs (required when create is false)."""
    cidr: str = "10.0.0.0/16"
    """IPv4 CIDR of a created VPC. Default: 10.0.0.0/16."""
    availability_zones: list[str] = []
    """AZs of a created network, one private and one public subnet each; at least two (required when create is true)."""
    nat_gateways: Literal["single", "perAz"] = "perAz"
    """NAT gateways of a created network: perAz (egress survives an AZ outage) or single (one, cheaper). Default: perAz."""
    private_subnet_prefix_length: int = Field(default=PRIVATE_SUBNET_PREFIX_LENGTH, ge=16, le=28)
    """Prefix length of a created network's private subnets (room for EFA nodes' pod addresses). Default: 18."""
    public_subnet_prefix_length: int = Field(default=PUBLIC_SUBNET_PREFIX_LENGTH, ge=16, le=28)
    """Prefix length of a created network's public subnets (NAT gateways, load balancers). Default: 24."""
    vpc_endpoints: bool = True
    """Create the VPC endpoints nodes use instead of NAT (ECR, S3, STS, EC2, EKS Auth) in a created network. Default: true."""


CREATE_ONLY_KEYS = ("cidr", "availability_zones", "nat_gateways", "private_subnet_prefix_length", "public_subnet_prefix_length", "vpc_endpoints")
"""Keys that only a created network uses."""


@dataclass(frozen=True)
class SubnetRef:
    """A private subnet as pools see it: its ID (a string, a ``pulumi.Output`` for a subnet this
    stack creates, or None before one exists) and its availability zone, always known."""

    id: Any
    availability_zone: str


@dataclass(frozen=True)
class SubnetLayout:
    """The CIDR blocks of a created network's subnets, by AZ."""

    private: dict[str, str]
    """Private subnet CIDR by AZ."""
    public: dict[str, str]
    """Public subnet CIDR by AZ."""


def network_zones(network: NetworkConfig) -> list[str]:
    """The AZs of the network's private subnets, in configuration order, each once."""
    zones = network.availability_zones if network.create else [s.availability_zone for s in network.subnets]
    return list(dict.fromkeys(zones))


def planned_subnets(network: NetworkConfig) -> list[SubnetRef]:
    """The private subnets pools choose from: the adopted ones, or one per AZ of a created network
    (ID unknown until it exists)."""
    if network.create:
        return [SubnetRef(id=None, availability_zone=zone) for zone in network_zones(network)]
    return [SubnetRef(id=s.id, availability_zone=s.availability_zone) for s in network.subnets]


def subnet_layout(network: NetworkConfig) -> SubnetLayout:
    """Private subnets from the bottom of the VPC CIDR, public subnets from the top, each in AZ
    order, so appending an AZ adds subnets without moving any existing one. Raises ValueError when
    they do not fit or overlap (``validate_network`` reports it as a problem first)."""
    vpc = ipaddress.ip_network(network.cidr)
    zones = network_zones(network)
    # Iterated rather than list()ed: mypy joins list() of an IPv4-or-IPv6 iterator to list[object].
    private = [block for block in vpc.subnets(new_prefix=network.private_subnet_prefix_length)][: len(zones)]
    public_blocks = [block for block in vpc.subnets(new_prefix=network.public_subnet_prefix_length)]
    public = list(reversed(public_blocks))[: len(zones)]
    if len(private) < len(zones) or len(public) < len(zones) or any(p.overlaps(q) for p in private for q in public):
        raise ValueError(
            f"{len(zones)} private /{network.private_subnet_prefix_length} and {len(zones)} public "
            f"/{network.public_subnet_prefix_length} subnets do not fit in {vpc}"
        )
    return SubnetLayout(
        private={zone: str(block) for zone, block in zip(zones, private, strict=True)},
        public={zone: str(block) for zone, block in zip(zones, public, strict=True)},
    )


def validate_network(network: NetworkConfig, region: str, cluster_created: bool) -> list[Problem]:  # noqa: C901 - one independent check per rule, each a row of the Refused-by table under this name
    """Rules of the network section: the keys each mode needs, AZs in the region, two AZs for a
    new cluster, and subnets that fit in the VPC."""
    problems: list[Problem] = []
    problem = lambda key, message: problems.append(Problem(f"network.{key}", message))  # noqa: E731 - a one-line problem collector
    if network.create:
        if not cluster_created:
            problem("create", "must be false with cluster.create false: an adopted cluster already lives in its VPC; adopt it (vpcId, subnets)")
        if network.vpc_id is not None:
            problem("vpcId", "is only used when create is false (this stack creates the VPC)")
        if network.subnets:
            problem("subnets", "are only used when create is false (this stack creates the subnets)")
        zones = network.availability_zones
        for i, zone in enumerate(zones):
            if zones.index(zone) != i:
                problem(f"availabilityZones[{i}]", f"'{zone}' is listed twice")
            if not _az_pattern_ok(zone):
                problem(f"availabilityZones[{i}]", f"'{zone}' is not an availability zone name such as {region}a")
            elif not zone.startswith(region):
                problem(f"availabilityZones[{i}]", f"'{zone}' is not in region {region}")
        if len(set(zones)) < 2:
            problem(
                "availabilityZones",
                "must list at least two AZs: EKS places a new cluster's control-plane ENIs in subnets of at "
                f"least two availability zones (CreateCluster refuses fewer); e.g. [{region}a, {region}b]",
            )
        problems.extend(_check_cidr(network))
        return problems

    for key in CREATE_ONLY_KEYS:
        if key in network.model_fields_set:
            problem(_camel(key), "is only used when create is true (this stack adopts vpcId and subnets)")
    if network.vpc_id is None:
        problem("vpcId", "is required when create is false (the VPC to adopt); or set create: true")
    if not network.subnets:
        problem("subnets", "are required when create is false (the private subnets to adopt); or set create: true")
    subnet_ids = [s.id for s in network.subnets]
    for i, subnet in enumerate(network.subnets):
        # Outputs are unknown until their subnet exists; only known IDs can be compared.
        if not is_unknown(subnet.id) and subnet_ids.index(subnet.id) != i:
            problem(f"subnets[{i}].id", f"{shown(subnet.id)} is listed twice")
        if not subnet.availability_zone.startswith(region):
            problem(f"subnets[{i}].availabilityZone", f"'{subnet.availability_zone}' is not in region {region}")
    zones = sorted(set(network_zones(network)))
    if cluster_created and network.subnets and len(zones) < 2:
        problem(
            "subnets",
            f"are all in {', '.join(zones)}; EKS places a new cluster's control-plane ENIs in subnets of at "
            "least two availability zones (CreateCluster refuses fewer); add a subnet in another AZ",
        )
    return problems


def _check_cidr(network: NetworkConfig) -> list[Problem]:
    try:
        vpc = ipaddress.ip_network(network.cidr)
    except ValueError:
        return [Problem("network.cidr", f"'{network.cidr}' is not an IPv4 network such as 10.0.0.0/16 (host bits must be zero)")]
    low, high = VPC_PREFIX_RANGE
    if vpc.version != 4 or not low <= vpc.prefixlen <= high:
        return [Problem("network.cidr", f"'{network.cidr}' must be an IPv4 block between /{low} and /{high}")]
    for key in ("private_subnet_prefix_length", "public_subnet_prefix_length"):
        if getattr(network, key) < vpc.prefixlen:
            return [Problem(f"network.{_camel(key)}", f"/{getattr(network, key)} is larger than the VPC's {network.cidr}")]
    try:
        subnet_layout(network)
    except ValueError as error:
        return [
            Problem(
                "network.cidr",
                f"{error}; use a larger VPC CIDR, fewer availability zones or longer subnet prefix lengths",
            )
        ]
    return []


def _az_pattern_ok(zone: str) -> bool:
    return re.match(_AZ, zone) is not None


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)
