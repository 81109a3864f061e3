"""``EksClusterArgs`` and what ``EksCluster`` will build of them, decided before anything registers: every
problem collected and raised once, the reads a created cluster needs (who created it, the version
its control plane runs, the stack's AWS settings) done, and each default filled in, so the
component only wires resources to an ``EksClusterPlan`` whose fields are all settled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

import pulumi

from ..config.base import Tags
from ..config import (
    ClusterConfig,
    ConfigError,
    NetworkConfig,
    Problem,
    SystemNodeGroupConfig,
    TeamConfig,
    validate_admin_principals,
    validate_cluster_endpoint,
)
from ..config.arguments import check_model_fields
from ..facts import aws_enums
from ..facts.aws_names import PhysicalName
from .cluster_access import AdminAccess, live_admin_access, member_creator_problems
from .control_plane_version import control_plane_version, upgraded_by_eks_warning
from .iam import node_role_resource_name
from .network import NetworkRef, adopted_network
from .node_group_sizes import running_cluster
from .region import aws_provider_of, stack_provider_settings
from .system_node_group import SYSTEM_NODE_GROUP_PREFIX, system_launch_template_resource_name, system_node_group_resource_name

def endpoint_group_resource_name(name: str) -> str:
    """Resource name of the security group of the private API endpoint (auto-named by Pulumi)."""
    return f"{name}-api-endpoint"


def has_endpoint_sources(cluster: ClusterConfig) -> bool:
    """Whether the private endpoint is opened to networks or security groups beyond the cluster's own."""
    return bool(cluster.endpoint_private_access_cidrs or cluster.endpoint_private_access_security_group_ids)


def eks_cluster_physical_names(
    name: str, system_node_group: SystemNodeGroupConfig, cluster: Optional[ClusterConfig] = None
) -> list[PhysicalName]:
    """The AWS names ``EksCluster(name, ...)`` generates itself (pulumi-eks names the cluster's own roles)."""
    names = []
    if cluster is not None and cluster.create and has_endpoint_sources(cluster):
        names.append(PhysicalName("aws:ec2/securityGroup:SecurityGroup", endpoint_group_resource_name(name), autonamed=True))
    if system_node_group.enabled:
        names += [
            PhysicalName("aws:iam/role:Role", node_role_resource_name(system_node_group_resource_name(name)), autonamed=True),
            PhysicalName("aws:ec2/launchTemplate:LaunchTemplate", system_launch_template_resource_name(name), autonamed=True),
            PhysicalName("aws:eks/nodeGroup:NodeGroup", SYSTEM_NODE_GROUP_PREFIX, autonamed=False, prefix=True),
        ]
    return names


def unread_cluster_checks(create: bool, system_node_group: bool) -> str:
    """What ``EksCluster`` cannot check before deployment when the cluster name is an Output: the
    running control plane's version (a created cluster's) and the system node group's running size."""
    unread = []
    if create:
        unread.append("a control plane EKS upgraded past cluster.kubernetesVersion (supportType STANDARD) is not "
                      "kept at its version (after a `pulumi refresh` the update asks EKS to move it back, which EKS refuses)")
    if system_node_group:
        unread.append("the system node group's running desired size is not sent: an update that changes its minSize "
                      "or maxSize sends the size in Pulumi's state")
    return "; ".join(unread)


@dataclass
class EksClusterArgs:
    """Arguments of ``EksCluster``."""

    cluster: ClusterConfig
    """Create or adopt, name, version, endpoint access, admins, logs."""
    network: Union[NetworkRef, NetworkConfig]
    """VPC and private subnets of the cluster: ``Network(...).ref`` for a created network, or the
    configuration of an adopted one (``create: false``)."""
    region: str
    """AWS region: every AWS resource and look-up of the cluster goes there."""
    system_node_group: Optional[SystemNodeGroupConfig] = None
    """The untainted node group for controllers. Default: ``SystemNodeGroupConfig()`` for a created
    cluster; none for an adopted one, which has its own nodes (give one to add it)."""
    partition: Optional[str] = None
    """ARN partition of the region. Default: the region's (``aws``, ``aws-cn``, ``aws-us-gov``)."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs). Default: none."""
    teams: list[TeamConfig] = field(default_factory=list)
    """Teams (``scheduling.teams``) whose IAM members get an access entry with their team's Kubernetes group. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self)
        if self.system_node_group is None:
            created = self.cluster.create if isinstance(self.cluster, ClusterConfig) else True
            self.system_node_group = SystemNodeGroupConfig(enabled=created)
        if self.partition is None:
            self.partition = aws_enums.partition_of(self.region)


@dataclass(frozen=True)
class CreatedControlPlane:
    """A control plane this stack creates, with what was read of it before deployment."""

    access: AdminAccess
    """Who created the cluster, and the admin entries the stack makes (``cluster_access.py``)."""
    version: Optional[str]
    """The Kubernetes version sent to EKS; None keeps a control plane EKS upgraded where it runs."""
    upgraded_by_eks: str
    """The warning that says EKS upgraded the running control plane past the configuration; empty when it did not."""
    provider_settings: Mapping[str, Any]
    """The stack's AWS settings a regional provider for the cluster carries (``stack_provider_settings``)."""


@dataclass(frozen=True)
class AdoptedControlPlane:
    """A control plane made elsewhere, looked up by name: nothing is read before deployment."""


@dataclass(frozen=True)
class EksClusterPlan:
    """``EksClusterArgs`` checked and settled: what ``EksCluster`` builds, every default filled in."""

    name: str
    """The component's resource name, which its children's names start with."""
    cluster: ClusterConfig
    """Create or adopt, name, version, endpoint access, admins, logs."""
    network: NetworkRef
    """The VPC and private subnets (an adopted network's straight from its configuration)."""
    region: str
    """AWS region of every resource and look-up."""
    partition: str
    """ARN partition of the region."""
    system_node_group: SystemNodeGroupConfig
    """The system node group (``enabled`` false: none)."""
    tags: Tags
    """Tags for every AWS resource."""
    teams: tuple[TeamConfig, ...]
    """Teams whose IAM members get an access entry."""
    control_plane: Union[CreatedControlPlane, AdoptedControlPlane]
    """The control plane created, or adopted."""
    unread: str
    """What cannot be checked before deployment (``unread_cluster_checks``); empty when nothing."""


def plan_eks_cluster(name: str, args: EksClusterArgs, opts: Optional[pulumi.ResourceOptions]) -> EksClusterPlan:
    """The plan of ``EksCluster(name, args, opts)``, or a ``ConfigError`` with every problem found.
    A created cluster's reads go through the AWS provider ``opts`` gives."""
    config = args.cluster
    # __post_init__ fills both in; the checks say so to the type checker.
    system = args.system_node_group if args.system_node_group is not None else SystemNodeGroupConfig(enabled=config.create)
    partition = args.partition if args.partition is not None else aws_enums.partition_of(args.region)
    problems = validate_cluster_endpoint(config)
    problems.extend(validate_admin_principals(config))
    control_plane: Union[CreatedControlPlane, AdoptedControlPlane] = AdoptedControlPlane()
    if config.create:
        # Who created the cluster decides its admin entries: read before anything registers.
        access, access_problems = live_admin_access(config, args.tags, args.region, opts)
        # A control plane EKS upgraded past cluster.kubernetesVersion itself is kept where it runs.
        running = running_cluster(config.name, args.region, pulumi.InvokeOptions(
            parent=opts.parent if opts else None, provider=aws_provider_of(opts)))
        running_version = running.version if running is not None else None
        problems.extend(access_problems)
        problems.extend(member_creator_problems(args.teams, access.creator))
        # A regional provider for the cluster carries the stack's AWS settings: checked up front.
        provider_settings, setting_problems = stack_provider_settings()
        problems.extend(setting_problems)
        version = control_plane_version(config.kubernetes_version, running_version, config.support_type)
        upgraded = (upgraded_by_eks_warning(config.kubernetes_version, running_version)
                    if version is None and running_version is not None else "")
        control_plane = CreatedControlPlane(access=access, version=version, upgraded_by_eks=upgraded,
                                            provider_settings=provider_settings)
    network = args.network
    if isinstance(network, NetworkConfig):
        if network.create:
            problems.append(
                Problem(f"EksCluster({name}).network.create", "a network to create is built by Network; pass Network(...).ref")
            )
        elif network.vpc_id is None:
            problems.append(Problem(f"EksCluster({name}).network.vpcId", "is required for an adopted network (the VPC to adopt)"))
    if problems:
        raise ConfigError(problems)
    return EksClusterPlan(
        name=name,
        cluster=config,
        network=adopted_network(network) if isinstance(network, NetworkConfig) else network,
        region=args.region,
        partition=partition,
        system_node_group=system,
        tags=args.tags,
        teams=tuple(args.teams),
        control_plane=control_plane,
        unread=unread_cluster_checks(config.create, system.enabled),
    )
