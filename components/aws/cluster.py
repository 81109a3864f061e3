"""The EKS cluster, created with pulumi-eks or adopted by name, with its system node group
(``system_node_group.py``), and ``ClusterInput``: what a component accepts as its cluster.

Both paths end in the same ``ClusterRef`` (``cluster_ref.py``): everything downstream (GPU node
groups, Helm releases, Kubernetes objects) is built identically whether this stack created the
cluster or not, through one Kubernetes provider.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol, Union

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

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
from ..facts import aws_enums
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component
from .addon_versions import addon_version
from .cluster_access import admin_access_entries, live_admin_access, member_access_entries, member_creator_problems
from .cluster_ref import ClusterRef
from .control_plane_version import control_plane_version, upgraded_by_eks_warning
from .node_group_sizes import running_cluster, warn_unread
from .iam import node_role_resource_name
from .network import NetworkRef, adopted_network
from .pod_identity import POD_IDENTITY_ADDON
from .region import aws_provider_of, check_provider_region, cluster_aws_provider, stack_provider_settings, stack_region
from .system_node_group import (
    SYSTEM_NODE_GROUP_PREFIX,
    system_launch_template_resource_name,
    system_node_group,
    system_node_group_resource_name,
    system_node_labels,
)
from ..facts.aws_names import PhysicalName

API_PORT = 443
"""The port of the EKS API endpoint."""

COREDNS_ADDON = "coredns"
"""EKS add-on of the cluster's DNS. EKS installs CoreDNS self-managed when it creates a cluster, and
pulumi-eks makes it a managed add-on only with a default node group, which this stack has none of:
left so, CoreDNS is never upgraded with the control plane. Managed here, its build follows
``cluster.kubernetesVersion`` (docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html)."""

ADOPT_SELF_MANAGED = "OVERWRITE"
"""How the managed add-on takes over the self-managed CoreDNS EKS installed: EKS overwrites the
Deployment's fields with the add-on's (EKS API ``ResolveConflicts``), at creation and on updates."""


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


@documented_args
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
    tags: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Tags for every AWS resource. Default: none."""
    teams: list[TeamConfig] = field(default_factory=list)
    """Teams (``scheduling.teams``) whose IAM members get an access entry with their team's Kubernetes group. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self)
        if self.system_node_group is None:
            created = self.cluster.create if isinstance(self.cluster, ClusterConfig) else True
            self.system_node_group = SystemNodeGroupConfig(enabled=created)
        if self.partition is None:
            self.partition = aws_enums.partition_of(self.region)


@documented_component(EksClusterArgs)
class EksCluster(pulumi.ComponentResource):
    """An EKS cluster (new via pulumi-eks, or an existing one) plus its system node group."""

    ref: ClusterRef
    """The cluster as downstream components see it."""
    eks_cluster: Optional[eks.Cluster]
    """The ``pulumi_eks.Cluster`` this component created; None for an adopted cluster."""
    system_node_group: Optional[aws.eks.NodeGroup]
    """The system node group; None when ``systemNodeGroup.enabled`` is false."""
    admin_access: list[aws.eks.AccessPolicyAssociation]
    """The cluster-admin policy of each of ``adminPrincipalArns`` but the cluster's creator, each under
    its access entry (``cluster_access.py``); empty for an adopted cluster."""
    member_access: list[aws.eks.AccessEntry]
    """The access entry of each team member that is an IAM principal, with its team's Kubernetes group
    and no access policy (``cluster_access.py``), on a created or an adopted cluster."""
    coredns: Optional[aws.eks.Addon]
    """The ``coredns`` EKS add-on of a created cluster; None for an adopted one."""
    provider: k8s.Provider
    """The Kubernetes provider of the cluster (also ``ref.provider``)."""
    cluster_name: pulumi.Output[str]
    """EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON, secret) that authenticates with ``aws eks get-token``."""

    def __init__(self, name: str, args: Optional[EksClusterArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(EksClusterArgs, "EksCluster", name, args, fields)
        problems = validate_cluster_endpoint(args.cluster)
        problems.extend(validate_admin_principals(args.cluster))
        # Who created the cluster decides its admin entries: read before anything registers.
        access, access_problems = live_admin_access(args.cluster, args.tags, args.region, opts) if args.cluster.create else (None, [])
        # A control plane EKS upgraded past cluster.kubernetesVersion itself is kept where it runs.
        running_version = None
        if args.cluster.create:
            running = running_cluster(args.cluster.name, args.region, pulumi.InvokeOptions(
                parent=opts.parent if opts else None, provider=aws_provider_of(opts)))
            running_version = running.version if running is not None else None
        problems.extend(access_problems)
        problems.extend(member_creator_problems(args.teams, access.creator) if access is not None else [])
        # A regional provider for the cluster carries the stack's AWS settings: checked up front.
        provider_settings, setting_problems = stack_provider_settings() if args.cluster.create else ({}, [])
        problems.extend(setting_problems)
        network = args.network
        if isinstance(network, NetworkConfig):
            if network.create:
                problems.append(
                    Problem(f"EksCluster({name}).network.create", "a network to create is built by Network; pass Network(...).ref")
                )
            else:
                network = adopted_network(network)
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:EksCluster", name, None, opts)
        config = args.cluster
        subnet_ids = network.subnet_ids
        ready: list[pulumi.Resource] = []
        control_plane: list[pulumi.Resource] = []
        pod_identity: list[pulumi.Resource] = []
        self.eks_cluster = None
        self.admin_access = []
        self.member_access = []
        unread = unread_cluster_checks(config.create, args.system_node_group.enabled)
        if unread:
            warn_unread(config.name, f"EksCluster({name})", unread, self)

        # Every AWS resource and look-up below takes ``region``; the pulumi-eks cluster, which has no
        # such input, gets a provider for it. The region an AWS provider in opts points at must agree.
        check_provider_region(aws_provider_of(resource=self), args.region, f"EksCluster({name}).region")
        if config.create:
            cluster_version = control_plane_version(config.kubernetes_version, running_version, config.support_type)
            if cluster_version is None and running_version is not None:
                pulumi.log.warn(upgraded_by_eks_warning(config.kubernetes_version, running_version), resource=self)
            cluster_provider = cluster_aws_provider(name, args.region, parent=self, settings=provider_settings)
            eks_cluster_name = f"{name}-eks"
            endpoint_group = self._endpoint_group(name, config, network.vpc_id, args.tags, args.region)
            cluster = eks.Cluster(
                eks_cluster_name,
                eks.ClusterArgs(
                    name=config.name,
                    version=cluster_version,
                    vpc_id=network.vpc_id,
                    subnet_ids=subnet_ids,
                    authentication_mode=eks.AuthenticationMode.API,
                    # The admins' access entries are this component's (``admin_access_entries`` below).
                    cluster_tags=access.cluster_tags,
                    skip_default_node_group=True,
                    # CoreDNS is the add-on below, at a build resolved for the version.
                    coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
                    skip_default_security_groups=True,
                    # The only group pulumi-eks hands EKS as vpcConfig.securityGroupIds, which EKS puts
                    # on its control-plane ENIs alone; nodes and pods carry the cluster security group
                    # EKS creates (below), never this one.
                    cluster_security_group=endpoint_group,
                    endpoint_public_access=config.endpoint_public_access,
                    public_access_cidrs=config.endpoint_public_access_cidrs or None,
                    endpoint_private_access=config.endpoint_private_access,
                    enabled_cluster_log_types=config.enabled_log_types,
                    create_oidc_provider=False,
                    # The VPC CNI's network policy agent enforces the NetworkPolicies of the training
                    # and labeler namespaces; without it EKS ignores NetworkPolicy objects
                    # (docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html). Turning it on
                    # rolls the aws-node pods, not the nodes; pods no policy selects stay unrestricted.
                    vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
                    # EKS's own guards, beside Pulumi's `protect`: deletion protection refuses
                    # DeleteCluster from any tool (docs.aws.amazon.com/eks/latest/userguide/deletion-protection.html),
                    # and the upgrade policy decides whether the cluster enters paid extended support
                    # or is upgraded by EKS at the end of standard support (view-upgrade-policy.html).
                    # Both change in place (EKS UpdateClusterConfig takes deletionProtection and
                    # upgradePolicy); pulumi-eks 4.1 and later pass them to its aws.eks.Cluster.
                    deletion_protection=config.protect,
                    upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=config.support_type),
                    tags=dict(args.tags),
                ),
                # Nodes launch only once a created network routes to NAT and its endpoints exist.
                opts=pulumi.ResourceOptions(
                    parent=self,
                    protect=config.protect,
                    depends_on=list(network.ready),
                    providers={"aws": cluster_provider} if cluster_provider is not None else None,
                ),
            )
            # The cluster name may be a plain string here, so the add-on must wait for the cluster explicitly.
            pod_identity_addon = aws.eks.Addon(
                f"{name}-pod-identity-agent",
                cluster_name=config.name,
                addon_name=POD_IDENTITY_ADDON,
                addon_version=addon_version(POD_IDENTITY_ADDON, config.kubernetes_version, config.pod_identity_agent_version, self,
                                            args.region),
                tags=dict(args.tags),
                region=args.region,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )
            self.admin_access = admin_access_entries(
                name, access, cluster, eks_cluster_name, config.name, args.partition, args.region, args.tags,
                provider=cluster_provider, parent=self,
            )
            self.member_access = member_access_entries(
                name, args.teams, cluster, config.name, args.region, args.tags, provider=cluster_provider, parent=self,
            )
            ready.append(cluster)
            control_plane.append(cluster)
            pod_identity.append(pod_identity_addon)
            self.eks_cluster = cluster
            # `pulumi up` reaches a private endpoint through these rules, so the Kubernetes provider, and
            # with it every in-cluster object, waits for them.
            endpoint_rules = self._endpoint_ingress(name, config, endpoint_group, args.tags, args.region)
            ready.extend(endpoint_rules)
            # pulumi-eks hands the endpoint out only inside its CoreData; reading the cluster back once it
            # exists gives it as a plain output, the same way as for an adopted cluster below.
            endpoint = aws.eks.get_cluster_output(
                name=config.name, region=args.region, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[cluster])
            ).endpoint
            # The group EKS creates and puts on the control plane and every managed node: pulumi-eks's
            # clusterSecurityGroupId is the group it was given when there is one (pulumi-eks
            # nodejs/eks/cluster/cluster.ts, ``core.clusterSecurityGroup?.id ??
            # core.cluster.vpcConfig.clusterSecurityGroupId``), so it is read from the EKS cluster (a
            # resource reference, which a monitor without references leaves empty until deployment).
            cluster_security_group_id = cluster.eks_cluster.apply(
                lambda eks_cluster: eks_cluster.vpc_config.cluster_security_group_id if eks_cluster is not None else None)
            kubeconfig = cluster.kubeconfig_json
            kubernetes_version: pulumi.Input[str] = config.kubernetes_version
            # `pulumi up` run by a listed admin reaches the cluster through its entry, so in-cluster objects
            # wait for the entries as well (a new admin's first run creates its own).
            self.provider = k8s.Provider(
                f"{name}-k8s", kubeconfig=kubeconfig,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*endpoint_rules, *self.admin_access]),
            )
        else:
            # An adopted cluster must already run the Pod Identity agent: the components that need it
            # look it up (``pod_identity_agent``); a created cluster gets the add-on above.
            adopted = ClusterRef.from_existing(
                config.name,
                args.region,
                resource_name=name,
                partition=args.partition,
                vpc_id=network.vpc_id,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.provider = adopted.provider
            cluster_security_group_id = adopted.cluster_security_group_id
            endpoint = adopted.endpoint
            kubeconfig = adopted.kubeconfig
            kubernetes_version = adopted.kubernetes_version
            self.member_access = member_access_entries(
                name, args.teams, None, config.name, args.region, args.tags, provider=None, parent=self,
            )

        self.system_node_group = (
            system_node_group(
                name,
                args.system_node_group,
                config,
                partition=args.partition,
                region=args.region,
                tags=args.tags,
                kubernetes_version=kubernetes_version,
                subnet_ids=subnet_ids,
                control_plane=control_plane,
                parent=self,
            )
            if args.system_node_group.enabled
            else None
        )
        if self.system_node_group is not None:
            ready.append(self.system_node_group)
        self.coredns = None
        if config.create:
            # CoreDNS pods run on the system nodes (every other node is tainted), and EKS reports the
            # add-on active only once they do.
            self.coredns = aws.eks.Addon(
                f"{name}-coredns",
                cluster_name=config.name,
                addon_name=COREDNS_ADDON,
                addon_version=addon_version(COREDNS_ADDON, config.kubernetes_version, config.coredns_version, self,
                                            args.region),
                resolve_conflicts_on_create=ADOPT_SELF_MANAGED,
                resolve_conflicts_on_update=ADOPT_SELF_MANAGED,
                tags=dict(args.tags),
                region=args.region,
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(ready)),
            )

        self.ref = ClusterRef(
            name=config.name,
            region=args.region,
            partition=args.partition,
            vpc_id=network.vpc_id,
            subnets=tuple(network.subnets),
            kubernetes_version=kubernetes_version,
            cluster_security_group_id=cluster_security_group_id,
            kubeconfig=kubeconfig,
            endpoint=endpoint,
            provider=self.provider,
            system_node_selector=system_node_labels() if args.system_node_group.enabled else {},
            ready=tuple(ready),
            node_ssm_access=config.node_ssm_access,
            control_plane=tuple(control_plane),
            pod_identity=tuple(pod_identity),
        )
        self.cluster_name = pulumi.Output.from_input(config.name)
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "eksCluster": self.eks_cluster,
                "systemNodeGroup": self.system_node_group,
                "adminAccess": self.admin_access,
                "memberAccess": self.member_access,
                "coredns": self.coredns,
            }
        )

    def _endpoint_group(
        self, name: str, config: ClusterConfig, vpc_id: pulumi.Input[str], tags: Mapping[str, pulumi.Input[str]], region: str
    ) -> Optional[aws.ec2.SecurityGroup]:
        """The security group of the private API endpoint alone, when the endpoint is opened to
        anything beyond the cluster: EKS attaches the groups of ``vpcConfig.securityGroupIds`` to the
        cross-account ENIs it creates for the control plane only (botocore eks ``VpcConfigRequest``,
        ``securityGroupIds``), while the cluster security group EKS creates is also on every managed
        node and, through the VPC CNI, every pod's ENI: a 443 rule there would reach any node or pod
        listening on 443, not just the API. No rule allows egress (pulumi-aws removes the default
        one AWS adds): answers to inbound connections pass anyway, and the control plane's own
        traffic leaves through the cluster security group.

        What ``pulumi up`` does with it: on a new cluster, the group is created before the cluster
        and given to it. On a running cluster created without it, the group is created and the
        cluster updated in place (EKS UpdateClusterConfig changes a running cluster's security groups,
        and the cluster keeps serving during the update; pulumi-aws's ``vpcConfig.securityGroupIds``
        has updated in place since hashicorp/terraform-provider-aws#34209), then the 443 rules are
        created on it; the old rules on the cluster security group are deleted last, so the deployer
        never loses the endpoint midway. Removing the last source detaches the group the same way
        before deleting it."""
        if not has_endpoint_sources(config):
            return None
        return aws.ec2.SecurityGroup(
            endpoint_group_resource_name(name),
            vpc_id=vpc_id,
            description=pulumi.Output.concat("EKS private API endpoint of ", config.name, ": port 443 from the listed sources"),
            revoke_rules_on_delete=True,
            tags=dict(tags),
            region=region,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _endpoint_ingress(
        self, name: str, config: ClusterConfig, group: Optional[aws.ec2.SecurityGroup], tags: Mapping[str, pulumi.Input[str]], region: str
    ) -> list[aws.vpc.SecurityGroupIngressRule]:
        """Port 443 of the endpoint's own group (``_endpoint_group``), opened to the networks and
        security groups that may reach the private endpoint. EKS: "you must ensure that your Amazon
        EKS control plane security group contains rules to allow ingress traffic on port 443 from
        your connected network" (``ENDPOINT_DOC``); without them only the cluster's own members
        reach it."""
        if group is None:
            return []
        sources: list[tuple[str, dict[str, str]]] = []
        for i, cidr in enumerate(config.endpoint_private_access_cidrs):
            key = "cidr_ipv6" if ":" in cidr else "cidr_ipv4"
            sources.append((f"{name}-api-ingress-cidr-{i}", {key: cidr}))
        for i, group_id in enumerate(config.endpoint_private_access_security_group_ids):
            sources.append((f"{name}-api-ingress-sg-{i}", {"referenced_security_group_id": group_id}))
        return [
            aws.vpc.SecurityGroupIngressRule(
                resource_name,
                security_group_id=group.id,
                ip_protocol="tcp",
                from_port=API_PORT,
                to_port=API_PORT,
                description=pulumi.Output.concat("EKS private API endpoint of ", config.name),
                tags=dict(tags),
                **source,
                region=region,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for resource_name, source in sources
        ]


ClusterInput = Union[ClusterRef, EksCluster, eks.Cluster]
"""What a component takes as its cluster: a ``ClusterRef``, this library's ``EksCluster``, or your
own ``pulumi_eks.Cluster``."""

_EKS_CLUSTER_REFS: "weakref.WeakKeyDictionary[eks.Cluster, ClusterRef]" = weakref.WeakKeyDictionary()
"""The ref made for each ``pulumi_eks.Cluster`` given to a component, so that every component given
the same cluster shares one ref and one Kubernetes provider."""


def as_cluster_ref(value: object, path: str) -> ClusterRef:
    """``value`` (a ``ClusterInput``) as a ``ClusterRef``. A ``pulumi_eks.Cluster`` becomes
    ``ClusterRef.from_eks_cluster(cluster, region=<the stack's aws:region>)`` once per cluster; one
    made with an AWS provider of its own, or in a stack without ``aws:region``, needs its region said,
    so it must be passed as ``ClusterRef.from_eks_cluster(cluster, region=...)``; anything else is a
    ``ConfigError`` naming ``path``."""
    if isinstance(value, ClusterRef):
        return value
    if isinstance(value, EksCluster):
        return value.ref
    if isinstance(value, eks.Cluster):
        if value in _EKS_CLUSTER_REFS:
            return _EKS_CLUSTER_REFS[value]
        region = stack_region()
        if aws_provider_of(resource=value) is not None or region is None:
            why = "it has an AWS provider of its own" if region is not None else "the stack sets no aws:region"
            raise ConfigError(
                [Problem(path, f"the region of this pulumi_eks.Cluster is not known ({why}); pass ClusterRef.from_eks_cluster(cluster, region=...)")]
            )
        _EKS_CLUSTER_REFS[value] = ref = ClusterRef.from_eks_cluster(value, region=region)
        return ref
    raise ConfigError(
        [Problem(path, f"expected a ClusterRef, an EksCluster or a pulumi_eks.Cluster, got {type(value).__name__}")]
    )


class ArgsWithCluster(Protocol):
    """A component's Args: any dataclass with a ``cluster`` field."""

    cluster: Any


def cluster_field(args: ArgsWithCluster) -> list[Problem]:
    """Turn the ``cluster`` field of a component's Args into a ``ClusterRef`` (``as_cluster_ref``); the
    problems, for ``check_model_fields`` to raise with those of the other fields."""
    try:
        object.__setattr__(args, "cluster", as_cluster_ref(args.cluster, f"{type(args).__name__}.cluster"))
    except ConfigError as error:
        return list(error.problems)
    return []


def cluster_ref_of(args: ArgsWithCluster) -> ClusterRef:
    """The ``ClusterRef`` in the ``cluster`` of Args that ``cluster_field`` checked (a no-op lookup
    then; the type says what the component holds)."""
    return as_cluster_ref(args.cluster, f"{type(args).__name__}.cluster")


def optional_cluster_field(args: ArgsWithCluster) -> list[Problem]:
    """``cluster_field`` for Args whose ``cluster`` may be left out (None)."""
    return [] if args.cluster is None else cluster_field(args)
