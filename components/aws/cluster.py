"""The EKS cluster, created with pulumi-eks or adopted by name, and its system node group.

Both paths end in the same ``ClusterRef``: everything downstream (GPU node groups, Helm releases,
Kubernetes objects) is built identically whether this stack created the cluster or not, through one
Kubernetes provider.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Union

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from ..config import (
    ENDPOINT_DOC,
    SYSTEM_NODE_ROLE_LABEL,
    ClusterConfig,
    ConfigError,
    NetworkConfig,
    Problem,
    SubnetRef,
    SystemNodeGroupConfig,
    validate_cluster_endpoint,
)
from ..facts import aws_enums
from ..config.arguments import check_model_fields
from ..config.documented import documented_args, documented_component
from .addon_versions import addon_version
from .iam import create_node_role, node_role_resource_name
from .node_group_sizes import desired_size_and_ignored
from .network import NetworkRef, adopted_network
from .node_launch import launch_template_ref, node_launch_template
from .region import aws_provider_of, check_provider_region, cluster_aws_provider, stack_region, without_aws_provider
from ..facts.aws_names import PhysicalName

API_PORT = 443
"""The port of the EKS API endpoint."""

SYSTEM_NODE_GROUP_PREFIX = "system-"
"""Prefix of the system node group's EKS name; the suffix EKS adds keeps a replacement from clashing."""

SYSTEM_MAX_UNAVAILABLE = 1
"""System nodes replaced at a time during a roll: controllers keep running on the others."""

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy granted to ``cluster.adminPrincipalArns`` (cluster-wide scope)."""

COREDNS_ADDON = "coredns"
"""EKS add-on of the cluster's DNS. EKS installs CoreDNS self-managed when it creates a cluster, and
pulumi-eks makes it a managed add-on only with a default node group, which this stack has none of:
left so, CoreDNS is never upgraded with the control plane. Managed here, its build follows
``cluster.kubernetesVersion`` (docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html)."""

ADOPT_SELF_MANAGED = "OVERWRITE"
"""How the managed add-on takes over the self-managed CoreDNS EKS installed: EKS overwrites the
Deployment's fields with the add-on's (EKS API ``ResolveConflicts``), at creation and on updates."""

POD_IDENTITY_ADDON = "eks-pod-identity-agent"
"""EKS add-on that lets controllers (Karpenter, the topology labeler) get AWS credentials through
Pod Identity associations instead of IRSA."""


_EKS_CLUSTER_PROVIDERS: "weakref.WeakKeyDictionary[eks.Cluster, k8s.Provider]" = weakref.WeakKeyDictionary()
"""The Kubernetes provider ``ClusterRef.from_eks_cluster`` made for each cluster, so that every ref
of one cluster uses one provider."""


@dataclass(frozen=True)
class ClusterRef:
    """What components need of a cluster; the same shape for a created and an adopted cluster.

    Build one with ``ClusterRef.from_eks_cluster`` (your own ``pulumi_eks.Cluster``),
    ``ClusterRef.from_existing`` (a cluster made elsewhere, by name), or take ``EksCluster.ref``.
    Every value another resource may supply is a ``pulumi.Input``: components never format one into
    text, they pass it on or combine it with ``pulumi.Output.concat``/``apply``.

    Providers: a component given a cluster puts every Kubernetes object on ``provider`` and every AWS
    resource in ``region``; one given none takes the Kubernetes provider in its ``opts``. A Kubernetes
    provider in ``opts`` other than the cluster's, or an AWS provider for another region, is a
    ``ConfigError``.
    """

    name: pulumi.Input[str]
    """EKS cluster name (an Output when it comes from a cluster resource)."""
    region: str
    """AWS region of the cluster."""
    partition: str
    """ARN partition of the region (``aws``, ``aws-cn``, ``aws-us-gov``)."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster (an Output when this stack creates the network)."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version of the control plane; managed node groups follow it (``version``)."""
    cluster_security_group_id: pulumi.Input[str]
    """The security group EKS made for the cluster; nodes need it to reach the control plane."""
    kubeconfig: pulumi.Input[str]
    """Kubeconfig (JSON) that authenticates with ``aws eks get-token``."""
    provider: k8s.Provider
    """The one Kubernetes provider every in-cluster object of components taking this ref uses."""
    system_node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node selector that puts controllers on the system node group; empty when this stack runs no
    system node group (an adopted cluster's controllers then go wherever its scheduler puts them)."""
    ready: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Resources that must exist before in-cluster controllers are installed (cluster, system
    nodes); GPU nodes are deliberately not among them, and neither is the Pod Identity add-on."""
    control_plane: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """What node groups wait for: a cluster this program creates (when its name is a plain string, the
    data flow alone does not order them); empty for an adopted cluster."""
    pod_identity: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """The Pod Identity agent add-on a created cluster gets; only what gets AWS credentials through
    Pod Identity (Karpenter, the topology labeler, training pods, the FSx CSI driver) waits for it.
    Empty for an adopted cluster, which must already run it (``pod_identity_agent`` looks it up)."""
    creates_pod_identity_agent: bool = False
    """Whether the first component that needs the Pod Identity agent creates the add-on (a cluster
    made by this program that has none); otherwise an empty ``pod_identity`` is looked up."""
    subnets: tuple[SubnetRef, ...] = ()
    """The cluster's private subnets with their AZs, which pools choose from; empty in a hand-built ref
    (pools then take the subnets of their network configuration)."""
    endpoint: Optional[pulumi.Input[str]] = None
    """The API server endpoint (https URL), for controllers that are told it (Karpenter); when None,
    Karpenter discovers it itself."""
    node_ssm_access: bool = False
    """Whether node roles made for this cluster get AmazonSSMManagedInstanceCore (``cluster.nodeSsmAccess``)."""

    def check_aws_provider(self, opts: Optional[pulumi.ResourceOptions], path: str) -> None:
        """Refuse (``ConfigError`` naming ``<path>.opts``) an AWS provider in a component's ``opts``
        for another region than this cluster's, once its region is known."""
        check_provider_region(aws_provider_of(opts), self.region, f"{path}.opts")

    @classmethod
    def from_eks_cluster(
        cls,
        cluster: eks.Cluster,
        *,
        region: str,
        name: Optional[pulumi.Input[str]] = None,
        partition: Optional[str] = None,
        vpc_id: Optional[pulumi.Input[str]] = None,
        subnets: Sequence[SubnetRef] = (),
        provider: Optional[k8s.Provider] = None,
        system_node_selector: Optional[Mapping[str, str]] = None,
        ready: Sequence[pulumi.Resource] = (),
        pod_identity: Optional[Sequence[pulumi.Resource]] = None,
        node_ssm_access: bool = False,
    ) -> "ClusterRef":
        """The ref of a ``pulumi_eks.Cluster`` made by your program.

        ``name`` defaults to the cluster's ``eks_cluster.name`` (pass the name you gave the cluster to
        have it known at preview), ``partition`` to the region's, ``vpc_id`` to the cluster's
        ``core.vpc_id``; the Kubernetes version is the cluster's. ``subnets`` (``SubnetRef``: ID and
        AZ) are the private subnets pools choose from (default: none, pools then take their network
        configuration's). ``provider`` defaults to a new
        Kubernetes provider ``<cluster>-k8s`` (a child of the cluster) on its ``kubeconfig_json``.
        ``system_node_selector`` places controllers (default: none); ``ready`` lists what must exist
        before they install besides the cluster (e.g. your system node group); ``pod_identity`` your
        ``eks-pod-identity-agent`` add-on, which Karpenter, the topology labeler, training pods' roles
        and the FSx CSI driver need: left out (None), the first component that needs it creates the
        add-on ``<cluster>-pod-identity-agent``; ``()`` says the cluster runs it already, and it is
        looked up.
        ``node_ssm_access`` gives node roles made for it AmazonSSMManagedInstanceCore (default: no).
        """
        cluster_provider = aws_provider_of(resource=cluster)
        if cluster_provider is None and stack_region() not in (None, region):
            raise ConfigError(
                [
                    Problem(
                        "ClusterRef.from_eks_cluster.region",
                        f"the cluster has no AWS provider of its own, so it is in the stack's aws:region "
                        f"{stack_region()}, not {region}; pass region={stack_region()!r}, or create the "
                        f"cluster with an AWS provider for {region}",
                    )
                ]
            )
        check_provider_region(cluster_provider, region, "ClusterRef.from_eks_cluster.region")
        kubeconfig = cluster.kubeconfig_json
        if provider is None and cluster in _EKS_CLUSTER_PROVIDERS:
            # A second ref of the same cluster (e.g. one a component made from the cluster itself).
            provider = _EKS_CLUSTER_PROVIDERS[cluster]
        if provider is None:
            # pulumi.Resource has no public accessor for its name; the provider is named after the cluster.
            provider = k8s.Provider(
                f"{cluster._name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=cluster)
            )
            _EKS_CLUSTER_PROVIDERS[cluster] = provider
        return cls(
            name=name if name is not None else cluster.eks_cluster.name,
            region=region,
            partition=partition if partition is not None else aws_enums.partition_of(region),
            vpc_id=vpc_id if vpc_id is not None else cluster.core.vpc_id,
            subnets=tuple(subnets),
            kubernetes_version=cluster.eks_cluster.version,
            cluster_security_group_id=cluster.cluster_security_group_id,
            kubeconfig=kubeconfig,
            provider=provider,
            system_node_selector=dict(system_node_selector or {}),
            ready=(cluster, *ready),
            control_plane=(cluster,),
            pod_identity=tuple(pod_identity or ()),
            creates_pod_identity_agent=pod_identity is None,
            endpoint=cluster.core.endpoint,
            node_ssm_access=node_ssm_access,
        )

    @classmethod
    def from_existing(
        cls,
        name: pulumi.Input[str],
        region: str,
        *,
        resource_name: Optional[str] = None,
        partition: Optional[str] = None,
        vpc_id: Optional[pulumi.Input[str]] = None,
        subnets: Sequence[SubnetRef] = (),
        system_node_selector: Optional[Mapping[str, str]] = None,
        ready: Sequence[pulumi.Resource] = (),
        node_ssm_access: bool = False,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> "ClusterRef":
        """The ref of an existing EKS cluster, looked up by ``name`` in ``region`` (nothing is created
        or changed in it).

        Registers one resource: ``<resource_name>-k8s``, a Kubernetes provider whose kubeconfig gets
        tokens from ``aws eks get-token``. ``resource_name`` defaults to ``name`` (required when
        ``name`` is an Output); ``opts`` applies to the provider and the look-up (e.g. ``parent``).
        ``vpc_id`` defaults to the cluster's own, ``partition`` to the region's; ``subnets`` as in
        ``from_eks_cluster``. The cluster must run
        the ``eks-pod-identity-agent`` add-on for Karpenter and the topology labeler.
        ``node_ssm_access`` gives node roles made for it AmazonSSMManagedInstanceCore (default: no).
        """
        if resource_name is None:
            if not isinstance(name, str):
                raise TypeError("ClusterRef.from_existing: pass resource_name when the cluster name is an Output")
            resource_name = name
        opts = opts or pulumi.ResourceOptions()
        # The look-up goes to ``region`` whatever provider opts name, but one for another region is a mistake.
        check_provider_region(aws_provider_of(opts), region, f"ClusterRef.from_existing({resource_name}).region")
        lookup = aws.eks.get_cluster_output(name=name, region=region, opts=pulumi.InvokeOutputOptions(parent=opts.parent))
        kubeconfig = pulumi.Output.all(name, lookup).apply(
            lambda values: kubeconfig_for(
                values[0],
                region,
                values[1].endpoint,
                values[1].certificate_authorities[0].data if values[1].certificate_authorities else None,
            )
        )
        return cls(
            name=name,
            region=region,
            partition=partition if partition is not None else aws_enums.partition_of(region),
            vpc_id=vpc_id if vpc_id is not None else lookup.vpc_config.vpc_id,
            subnets=tuple(subnets),
            kubernetes_version=lookup.version,
            cluster_security_group_id=lookup.apply(lambda c: c.vpc_config.cluster_security_group_id if c.vpc_config else None),
            kubeconfig=kubeconfig,
            # An AWS provider in opts serves the look-up only; the Kubernetes provider cannot take it.
            provider=k8s.Provider(f"{resource_name}-k8s", kubeconfig=kubeconfig, opts=without_aws_provider(opts)),
            system_node_selector=dict(system_node_selector or {}),
            ready=tuple(ready),
            endpoint=lookup.endpoint,
            node_ssm_access=node_ssm_access,
        )


def kubeconfig_for(cluster_name: str, region: str, endpoint: Optional[str], ca_data: Optional[str]) -> str:
    """A kubeconfig (JSON) for an EKS cluster that gets its token from ``aws eks get-token``."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [{"name": cluster_name, "user": user}],
        }
    )


def deployer_principal_arn(parent: pulumi.Resource) -> Optional[str]:
    """The IAM principal running this `pulumi up`: the role of an assumed-role session (STS names
    the session, access entries name the role), or the user. ``aws.iam.get_session_context`` turns
    ``arn:aws:sts::<account>:assumed-role/<role>/<session>`` into the role's ARN, path included."""
    caller = aws.get_caller_identity(opts=pulumi.InvokeOptions(parent=parent))
    return aws.iam.get_session_context(arn=caller.arn, opts=pulumi.InvokeOptions(parent=parent)).issuer_arn


def admin_access_entries(
    admin_principal_arns: Sequence[pulumi.Input[str]], deployer_arn: Optional[str]
) -> dict[str, pulumi.Input[str]]:
    """Access entries for ``cluster.adminPrincipalArns``, keyed ``admin-<index in the list>`` so an
    entry keeps its name when another is left out, without the deployer's own principal: pulumi-eks
    creates the cluster with ``bootstrapClusterCreatorAdminPermissions``, so EKS has already made an
    admin access entry for it, and a second one fails the first `pulumi up` with
    ``409 ResourceInUseException`` (docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html;
    terraform-aws-modules/terraform-aws-eks#2969). An ARN that is an Output (a role this program
    makes) is never the deployer and is kept."""
    return {
        f"admin-{i}": arn
        for i, arn in enumerate(admin_principal_arns)
        if not (isinstance(arn, str) and deployer_arn is not None and arn == deployer_arn)
    }


def system_node_labels() -> dict[str, str]:
    """Labels of system nodes; controllers' node selectors match them."""
    key, value = SYSTEM_NODE_ROLE_LABEL
    return {key: value}


def system_node_group_resource_name(name: str) -> str:
    """Logical name of the system node group of ``EksCluster(name, ...)`` (its node role's prefix too)."""
    return f"{name}-system"


def system_launch_template_resource_name(name: str) -> str:
    """Logical name of the system node group's launch template (auto-named)."""
    return f"{name}-system-launch-template"


def eks_cluster_physical_names(name: str, system_node_group: SystemNodeGroupConfig) -> list[PhysicalName]:
    """The AWS names ``EksCluster(name, ...)`` generates itself (pulumi-eks names the cluster's own roles)."""
    if not system_node_group.enabled:
        return []
    return [
        PhysicalName("aws:iam/role:Role", node_role_resource_name(system_node_group_resource_name(name)), autonamed=True),
        PhysicalName("aws:ec2/launchTemplate:LaunchTemplate", system_launch_template_resource_name(name), autonamed=True),
        PhysicalName("aws:eks/nodeGroup:NodeGroup", SYSTEM_NODE_GROUP_PREFIX, autonamed=False, prefix=True),
    ]


@documented_args
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
    coredns: Optional[aws.eks.Addon]
    """The ``coredns`` EKS add-on of a created cluster; None for an adopted one."""
    provider: k8s.Provider
    """The Kubernetes provider of the cluster (also ``ref.provider``)."""
    cluster_name: pulumi.Output[str]
    """EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON, secret) that authenticates with ``aws eks get-token``."""

    def __init__(self, name: str, args: EksClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        problems = validate_cluster_endpoint(args.cluster)
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

        # Every AWS resource and look-up below takes ``region``; the pulumi-eks cluster, which has no
        # such input, gets a provider for it. The region an AWS provider in opts points at must agree.
        check_provider_region(aws_provider_of(resource=self), args.region, f"EksCluster({name}).region")
        if config.create:
            cluster_provider = cluster_aws_provider(name, args.region, parent=self)
            cluster = eks.Cluster(
                f"{name}-eks",
                eks.ClusterArgs(
                    name=config.name,
                    version=config.kubernetes_version,
                    vpc_id=network.vpc_id,
                    subnet_ids=subnet_ids,
                    authentication_mode=eks.AuthenticationMode.API,
                    access_entries={
                        key: eks.AccessEntryArgs(
                            principal_arn=arn,
                            access_policies={
                                "cluster-admin": eks.AccessPolicyAssociationArgs(
                                    policy_arn=f"arn:{args.partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}",
                                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                                )
                            },
                        )
                        for key, arn in admin_access_entries(config.admin_principal_arns, deployer_principal_arn(self)).items()
                    },
                    skip_default_node_group=True,
                    # CoreDNS is the add-on below, at a build resolved for the version.
                    coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
                    skip_default_security_groups=True,
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
            ready.append(cluster)
            control_plane.append(cluster)
            pod_identity.append(pod_identity_addon)
            self.eks_cluster = cluster
            # `pulumi up` reaches a private endpoint through these rules, so the Kubernetes provider, and
            # with it every in-cluster object, waits for them.
            endpoint_rules = self._endpoint_ingress(name, config, cluster.cluster_security_group_id, args.tags, args.region)
            ready.extend(endpoint_rules)
            # pulumi-eks hands the endpoint out only inside its CoreData; reading the cluster back once it
            # exists gives it as a plain output, the same way as for an adopted cluster below.
            endpoint = aws.eks.get_cluster_output(
                name=config.name, region=args.region, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[cluster])
            ).endpoint
            cluster_security_group_id = cluster.cluster_security_group_id
            kubeconfig = cluster.kubeconfig_json
            kubernetes_version: pulumi.Input[str] = config.kubernetes_version
            self.provider = k8s.Provider(
                f"{name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=self, depends_on=endpoint_rules)
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

        self.system_node_group = (
            self._system_node_group(name, args, kubernetes_version, subnet_ids, control_plane)
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
                "coredns": self.coredns,
            }
        )

    def _endpoint_ingress(
        self, name: str, config: ClusterConfig, security_group_id: pulumi.Input[str], tags: Mapping[str, str], region: str
    ) -> list[aws.vpc.SecurityGroupIngressRule]:
        """Port 443 of the cluster security group, opened to the networks and security groups that
        may reach the private endpoint. EKS: "you must ensure that your Amazon EKS control plane
        security group contains rules to allow ingress traffic on port 443 from your connected
        network" (``ENDPOINT_DOC``); without them only the cluster's own members reach it."""
        sources: list[tuple[str, dict[str, str]]] = []
        for i, cidr in enumerate(config.endpoint_private_access_cidrs):
            key = "cidr_ipv6" if ":" in cidr else "cidr_ipv4"
            sources.append((f"{name}-api-ingress-cidr-{i}", {key: cidr}))
        for i, group_id in enumerate(config.endpoint_private_access_security_group_ids):
            sources.append((f"{name}-api-ingress-sg-{i}", {"referenced_security_group_id": group_id}))
        return [
            aws.vpc.SecurityGroupIngressRule(
                resource_name,
                security_group_id=security_group_id,
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

    def _system_node_group(
        self,
        name: str,
        args: EksClusterArgs,
        kubernetes_version: pulumi.Input[str],
        subnet_ids: list[pulumi.Input[str]],
        control_plane: list[pulumi.Resource],
    ) -> aws.eks.NodeGroup:
        """The system node group: untainted, on demand, with the same launch template settings as
        the GPU pools (IMDSv2 with hop limit 1, encrypted gp3). It waits for the cluster only, not
        for the Pod Identity add-on, so the critical path is cluster, system nodes, slowest release."""
        system = args.system_node_group
        node_role = create_node_role(
            system_node_group_resource_name(name), args.partition, args.tags, parent=self,
            ssm_access=args.cluster.node_ssm_access,
        )
        role = node_role.role
        launch_template = node_launch_template(
            system_launch_template_resource_name(name),
            description=pulumi.Output.concat("System nodes of EKS cluster ", args.cluster.name),
            ami_type=system.ami_type,
            volume_size_gib=system.disk_size_gib,
            instance_name=pulumi.Output.concat(args.cluster.name, "-system"),
            instance_tags={},
            tags=args.tags,
            parent=self,
            region=args.region,
        )
        # Desired size ignored after creation, unless new bounds exclude it (node_group_sizes).
        desired_size, ignored = desired_size_and_ignored(
            args.cluster.name, SYSTEM_NODE_GROUP_PREFIX, system.desired_size, system.min_size, system.max_size, self,
            args.region,
        )
        return aws.eks.NodeGroup(
            system_node_group_resource_name(name),
            cluster_name=args.cluster.name,
            node_group_name_prefix=SYSTEM_NODE_GROUP_PREFIX,
            version=kubernetes_version,
            release_version=system.release_version,
            node_role_arn=role.arn,
            subnet_ids=subnet_ids,
            instance_types=list(system.instance_types),
            ami_type=system.ami_type,
            capacity_type="ON_DEMAND",
            labels=system_node_labels(),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.min_size, desired_size=desired_size, max_size=system.max_size
            ),
            launch_template=launch_template_ref(launch_template),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=SYSTEM_MAX_UNAVAILABLE),
            tags=dict(args.tags),
            region=args.region,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes join only with the role's policies attached.
                depends_on=[*control_plane, *node_role.policy_attachments],
                ignore_changes=ignored,
            ),
        )


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


def cluster_field(args: object) -> list[Problem]:
    """Turn the ``cluster`` field of a component's Args into a ``ClusterRef`` (``as_cluster_ref``); the
    problems, for ``check_model_fields`` to raise with those of the other fields."""
    try:
        object.__setattr__(args, "cluster", as_cluster_ref(getattr(args, "cluster"), f"{type(args).__name__}.cluster"))
    except ConfigError as error:
        return list(error.problems)
    return []


def optional_cluster_field(args: object) -> list[Problem]:
    """``cluster_field`` for Args whose ``cluster`` may be left out (None)."""
    return [] if getattr(args, "cluster") is None else cluster_field(args)


_POD_IDENTITY_AGENTS: dict[int, tuple[object, tuple[pulumi.Resource, ...]]] = {}
"""What components wait for of the Pod Identity agent: the add-on created once per cluster, or
nothing after one look-up per ref (keyed by identity; the key's object is kept so its id stays its own)."""


def pod_identity_agent(ref: ClusterRef, parent: pulumi.Resource) -> tuple[pulumi.Resource, ...]:
    """The Pod Identity agent a component that gets AWS credentials through Pod Identity waits for,
    on every path: the ref's add-on if it has one; for a cluster made by this program without one
    (``creates_pod_identity_agent``), an add-on ``<cluster>-pod-identity-agent`` created once, a child
    of the cluster; for any other cluster a look-up of the add-on, which fails the preview, before
    anything is created, when the cluster does not run it (nothing to wait for then)."""
    if ref.pod_identity:
        return tuple(ref.pod_identity)
    creates = ref.creates_pod_identity_agent and bool(ref.control_plane)
    # One add-on per cluster however many refs of it there are; one look-up per ref.
    owner: object = ref.control_plane[0] if creates else ref
    known = _POD_IDENTITY_AGENTS.get(id(owner))
    if known is not None and known[0] is owner:
        return known[1]
    agents: tuple[pulumi.Resource, ...] = ()
    if creates:
        cluster = ref.control_plane[0]
        agents = (
            aws.eks.Addon(
                f"{cluster._name}-pod-identity-agent",
                cluster_name=ref.name,
                addon_name=POD_IDENTITY_ADDON,
                region=ref.region,
                opts=pulumi.ResourceOptions(parent=cluster, depends_on=list(ref.control_plane)),
            ),
        )
    else:
        aws.eks.get_addon_output(
            cluster_name=ref.name,
            addon_name=POD_IDENTITY_ADDON,
            region=ref.region,
            opts=pulumi.InvokeOutputOptions(parent=parent, depends_on=list(ref.control_plane)),
        )
    _POD_IDENTITY_AGENTS[id(owner)] = (owner, agents)
    return agents
