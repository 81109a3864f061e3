"""The EKS cluster, created with pulumi-eks or adopted by name, and its system node group.

Both paths end in the same ``ClusterRef``: everything downstream (GPU node groups, Helm releases,
Kubernetes objects) is built identically whether this stack created the cluster or not, through one
Kubernetes provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from ..config import SYSTEM_NODE_ROLE_LABEL, ClusterConfig, NetworkConfig, SystemNodeGroupConfig
from .iam import create_node_role, node_group_update_transform

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy granted to ``cluster.adminPrincipalArns`` (cluster-wide scope)."""

POD_IDENTITY_ADDON = "eks-pod-identity-agent"
"""EKS add-on that lets controllers (Karpenter, the topology labeler) get AWS credentials through
Pod Identity associations instead of IRSA."""


@dataclass(frozen=True)
class ClusterRef:
    """What components need of a cluster; the same shape for a created and an adopted cluster."""

    name: str
    """EKS cluster name."""
    region: str
    """AWS region of the cluster."""
    partition: str
    """ARN partition of the region."""
    vpc_id: str
    """VPC of the cluster."""
    node_group_cluster: pulumi.Input[Any]
    """What ``eks.ManagedNodeGroup(cluster=...)`` takes: the ``eks.Cluster`` or its core data."""
    cluster_security_group_id: pulumi.Output[str]
    """The security group EKS made for the cluster; nodes need it to reach the control plane."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON) that authenticates with ``aws eks get-token``."""
    provider: k8s.Provider
    """The one Kubernetes provider every in-cluster object uses."""
    system_node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node selector that puts controllers on the system node group; empty when this stack runs no
    system node group (an adopted cluster's controllers then go wherever its scheduler puts them)."""
    ready: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Resources that must exist before in-cluster controllers are installed (cluster, add-ons,
    system nodes); GPU nodes are deliberately not among them."""
    endpoint: Optional[pulumi.Output[str]] = None
    """The API server endpoint (https URL), for controllers that are told it (Karpenter); ``EksCluster``
    always sets it, a hand-built ref may leave it out (Karpenter then discovers it itself)."""
    node_ssm_access: bool = False
    """Whether node roles made for this cluster get AmazonSSMManagedInstanceCore (``cluster.nodeSsmAccess``)."""


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


def system_node_labels() -> dict[str, str]:
    """Labels of system nodes; controllers' node selectors match them."""
    key, value = SYSTEM_NODE_ROLE_LABEL
    return {key: value}


@dataclass
class EksClusterArgs:
    """Arguments of ``EksCluster``."""

    cluster: ClusterConfig
    """Create or adopt, name, version, endpoint access, admins, logs."""
    network: NetworkConfig
    """VPC and private subnets of the cluster."""
    system_node_group: SystemNodeGroupConfig
    """The untainted node group for controllers."""
    region: str
    """AWS region."""
    partition: str
    """ARN partition of the region."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags for every AWS resource. Default: none."""


class EksCluster(pulumi.ComponentResource):
    """An EKS cluster (new via pulumi-eks, or an existing one) plus its system node group."""

    ref: ClusterRef
    """The cluster as downstream components see it."""

    def __init__(self, name: str, args: EksClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("eks-gpu-training:index:EksCluster", name, None, opts)
        config = args.cluster
        subnet_ids = [s.id for s in args.network.subnets]
        ready: list[pulumi.Resource] = []

        if config.create:
            cluster = eks.Cluster(
                f"{name}-eks",
                eks.ClusterArgs(
                    name=config.name,
                    version=config.kubernetes_version,
                    vpc_id=args.network.vpc_id,
                    subnet_ids=subnet_ids,
                    authentication_mode=eks.AuthenticationMode.API,
                    access_entries={
                        f"admin-{i}": eks.AccessEntryArgs(
                            principal_arn=arn,
                            access_policies={
                                "cluster-admin": eks.AccessPolicyAssociationArgs(
                                    policy_arn=f"arn:{args.partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}",
                                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                                )
                            },
                        )
                        for i, arn in enumerate(config.admin_principal_arns)
                    },
                    skip_default_node_group=True,
                    skip_default_security_groups=True,
                    endpoint_public_access=config.endpoint_public_access,
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
                opts=pulumi.ResourceOptions(parent=self),
            )
            # The cluster name is a plain string here, so the add-on must wait for the cluster explicitly.
            pod_identity = aws.eks.Addon(
                f"{name}-pod-identity-agent",
                cluster_name=config.name,
                addon_name=POD_IDENTITY_ADDON,
                tags=dict(args.tags),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )
            ready += [cluster, pod_identity]
            # pulumi-eks hands the endpoint out only inside its CoreData; reading the cluster back once it
            # exists gives it as a plain output, the same way as for an adopted cluster below.
            endpoint = aws.eks.get_cluster_output(
                name=config.name, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=[cluster])
            ).endpoint
            node_group_cluster: Any = cluster
            cluster_security_group_id = cluster.cluster_security_group_id
            kubeconfig = cluster.kubeconfig_json
        else:
            lookup = aws.eks.get_cluster_output(name=config.name, opts=pulumi.InvokeOutputOptions(parent=self))
            # Karpenter and the labeler get AWS credentials through Pod Identity, which an adopted
            # cluster must already run: reading the add-on fails the preview, before anything is
            # created, when it is missing (a created cluster gets the add-on above).
            aws.eks.get_addon_output(
                cluster_name=config.name, addon_name=POD_IDENTITY_ADDON, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            existing = aws.eks.Cluster.get(f"{name}-eks", id=config.name, opts=pulumi.ResourceOptions(parent=self))
            cluster_security_group_id = lookup.apply(lambda c: c.vpc_config.cluster_security_group_id if c.vpc_config else None)
            endpoint = lookup.endpoint
            kubeconfig = lookup.apply(
                lambda c: kubeconfig_for(
                    config.name,
                    args.region,
                    c.endpoint,
                    c.certificate_authorities[0].data if c.certificate_authorities else None,
                )
            )
            node_group_cluster = None  # set below, once the provider exists

        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=self))

        if not config.create:
            # The core data eks.ManagedNodeGroup reads of a cluster it did not create: the cluster itself
            # (version, authentication mode), its subnets and VPC. Access entries for node roles are made by
            # EKS itself for managed node groups when the cluster's authentication mode includes API.
            node_group_cluster = eks.CoreDataArgs(
                cluster=existing,
                cluster_iam_role=None,
                endpoint=lookup.endpoint,
                instance_roles=[],
                node_group_options=eks.ClusterNodeGroupOptionsArgs(),
                provider=self.provider,
                subnet_ids=subnet_ids,
                vpc_id=args.network.vpc_id,
            )

        if args.system_node_group.enabled:
            ready.append(self._system_node_group(name, args, node_group_cluster, subnet_ids, ready))

        self.ref = ClusterRef(
            name=config.name,
            region=args.region,
            partition=args.partition,
            vpc_id=args.network.vpc_id,
            node_group_cluster=node_group_cluster,
            cluster_security_group_id=cluster_security_group_id,
            kubeconfig=kubeconfig,
            endpoint=endpoint,
            provider=self.provider,
            system_node_selector=system_node_labels() if args.system_node_group.enabled else {},
            ready=tuple(ready),
            node_ssm_access=config.node_ssm_access,
        )
        self.cluster_name = pulumi.Output.from_input(config.name)
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})

    def _system_node_group(
        self,
        name: str,
        args: EksClusterArgs,
        node_group_cluster: Any,
        subnet_ids: list[str],
        ready: list[pulumi.Resource],
    ) -> eks.ManagedNodeGroup:
        system = args.system_node_group
        role = create_node_role(
            f"{name}-system", args.partition, args.tags, parent=self, ssm_access=args.cluster.node_ssm_access
        )
        return eks.ManagedNodeGroup(
            f"{name}-system",
            eks.ManagedNodeGroupArgs(
                cluster=node_group_cluster,
                cluster_name=args.cluster.name,
                node_group_name="system",
                node_role_arn=role.arn,
                subnet_ids=subnet_ids,
                instance_types=system.instance_types,
                ami_type=system.ami_type,
                capacity_type="ON_DEMAND",
                disk_size=system.disk_size_gib,
                labels=system_node_labels(),
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=system.min_size, desired_size=system.desired_size, max_size=system.max_size
                ),
                ignore_scaling_changes=True,
                tags=dict(args.tags),
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=list(ready), transforms=[node_group_update_transform(max_unavailable=1)]
            ),
        )
