"""The control plane of an ``EksCluster``: created with pulumi-eks (with its Pod Identity and CoreDNS
add-ons, the private endpoint's own security group and the admins' access entries) or adopted by
name, each ending in the same ``ControlPlane``: what the component hands downstream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, cast

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from ..config.base import tag_map
from ..config import ClusterConfig
from .addon_versions import addon_version
from .cluster_access import admin_access_entries, cluster_stack_tags, member_access_entries
from .cluster_plan import CreatedControlPlane, EksClusterPlan, endpoint_group_resource_name, has_endpoint_sources
from .cluster_ref import ClusterRef
from .pod_identity import POD_IDENTITY_ADDON
from .region import cluster_aws_provider

API_PORT = 443
"""The port of the EKS API endpoint."""

COREDNS_ADDON = "coredns"
"""EKS add-on of the cluster's DNS, managed here so CoreDNS follows ``cluster.kubernetesVersion``:
EKS installs it self-managed, and pulumi-eks manages it only with a default node group, which this
stack has none of (docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html)."""

ADOPT_SELF_MANAGED = "OVERWRITE"
"""How the managed add-on takes over the self-managed CoreDNS EKS installed: EKS overwrites the
Deployment's fields with the add-on's (EKS API ``ResolveConflicts``), at creation and on updates."""


@dataclass(frozen=True)
class ControlPlane:
    """What a created or an adopted control plane gives the rest of the cluster."""

    eks_cluster: Optional[eks.Cluster]
    """The ``pulumi_eks.Cluster`` created; None for an adopted cluster."""
    provider: k8s.Provider
    """The Kubernetes provider of the cluster."""
    kubeconfig: pulumi.Input[str]
    """Kubeconfig (JSON) that authenticates with ``aws eks get-token``."""
    endpoint: Optional[pulumi.Input[str]]
    """The API server endpoint; None when an adopted cluster's look-up gives none (Karpenter then finds it itself)."""
    cluster_security_group_id: pulumi.Input[str]
    """The security group EKS made for the cluster."""
    kubernetes_version: pulumi.Input[str]
    """The control plane's Kubernetes version."""
    admin_access: list[aws.eks.AccessPolicyAssociation]
    """The admins' cluster-admin policies (empty for an adopted cluster)."""
    member_access: list[aws.eks.AccessEntry]
    """The team members' access entries."""
    ready: tuple[pulumi.Resource, ...] = ()
    """What in-cluster objects wait for: the cluster and the rules that open its private endpoint."""
    control_plane: tuple[pulumi.Resource, ...] = ()
    """What node groups wait for: the created cluster."""
    pod_identity: tuple[pulumi.Resource, ...] = ()
    """The Pod Identity agent add-on of a created cluster."""


def created_control_plane(plan: EksClusterPlan, created: CreatedControlPlane, parent: pulumi.Resource) -> ControlPlane:
    """The pulumi-eks cluster of ``plan`` and what comes with it, children of ``parent``."""
    name, config, network = plan.name, plan.cluster, plan.network
    cluster_provider = cluster_aws_provider(name, plan.region, parent=parent, settings=dict(created.provider_settings))
    eks_cluster_name = f"{name}-eks"
    endpoint_group = _endpoint_group(plan, parent)
    cluster = eks.Cluster(
        eks_cluster_name,
        eks.ClusterArgs(
            name=config.name,
            version=created.version,
            vpc_id=network.vpc_id,
            subnet_ids=network.subnet_ids,
            authentication_mode=eks.AuthenticationMode.API,
            # The admins' access entries are this component's (``admin_access_entries`` below).
            cluster_tags=created.access.cluster_tags,
            skip_default_node_group=True,
            # CoreDNS is the add-on ``coredns_addon`` makes, at a build resolved for the version.
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
            tags=cluster_stack_tags(plan.tags),
        ),
        # Nodes launch only once a created network routes to NAT and its endpoints exist.
        opts=pulumi.ResourceOptions(
            parent=parent,
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
        addon_version=addon_version(POD_IDENTITY_ADDON, config.kubernetes_version, config.pod_identity_agent_version, parent,
                                    plan.region),
        tags=tag_map(plan.tags),
        region=plan.region,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster]),
    )
    admin_access = admin_access_entries(
        name, created.access, cluster, eks_cluster_name, config.name, plan.partition, plan.region, plan.tags,
        provider=cluster_provider, parent=parent,
    )
    member_access = member_access_entries(
        name, plan.teams, cluster, config.name, plan.region, plan.tags, provider=cluster_provider, parent=parent,
    )
    # `pulumi up` reaches a private endpoint through these rules, so the Kubernetes provider, and
    # with it every in-cluster object, waits for them.
    endpoint_rules = _endpoint_ingress(plan, endpoint_group, parent)
    # pulumi-eks hands the endpoint out only inside its CoreData; reading the cluster back once it
    # exists gives it as a plain output, the same way as for an adopted cluster.
    endpoint = aws.eks.get_cluster_output(
        name=config.name, region=plan.region, opts=pulumi.InvokeOutputOptions(parent=parent, depends_on=[cluster])
    ).endpoint
    # The group EKS creates and puts on the control plane and every managed node: pulumi-eks's
    # clusterSecurityGroupId is the group it was given when there is one (pulumi-eks
    # nodejs/eks/cluster/cluster.ts, ``core.clusterSecurityGroup?.id ??
    # core.cluster.vpcConfig.clusterSecurityGroupId``), so it is read from the EKS cluster (a
    # resource reference, which a monitor without references leaves empty until deployment).
    cluster_security_group_id = cluster.eks_cluster.apply(
        lambda eks_cluster: eks_cluster.vpc_config.cluster_security_group_id if eks_cluster is not None else None)
    kubeconfig = cluster.kubeconfig_json
    # `pulumi up` run by a listed admin reaches the cluster through its entry, so in-cluster objects
    # wait for the entries as well (a new admin's first run creates its own).
    provider = k8s.Provider(
        f"{name}-k8s", kubeconfig=kubeconfig,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[*endpoint_rules, *admin_access]),
    )
    return ControlPlane(
        eks_cluster=cluster,
        provider=provider,
        kubeconfig=kubeconfig,
        endpoint=endpoint,
        cluster_security_group_id=cast("pulumi.Output[str]", cluster_security_group_id),  # EKS gives every cluster its group; None only while a mock leaves the reference empty
        kubernetes_version=config.kubernetes_version,
        admin_access=admin_access,
        member_access=member_access,
        ready=(cluster, *endpoint_rules),
        control_plane=(cluster,),
        pod_identity=(pod_identity_addon,),
    )


def adopted_control_plane(plan: EksClusterPlan, parent: pulumi.Resource) -> ControlPlane:
    """The running cluster of ``plan`` looked up by name, and its team members' access entries.
    An adopted cluster must already run the Pod Identity agent: the components that need it look it
    up (``pod_identity_agent``)."""
    config = plan.cluster
    adopted = ClusterRef.from_existing(
        config.name,
        plan.region,
        resource_name=plan.name,
        partition=plan.partition,
        vpc_id=plan.network.vpc_id,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    member_access = member_access_entries(
        plan.name, plan.teams, None, config.name, plan.region, plan.tags, provider=None, parent=parent,
    )
    return ControlPlane(
        eks_cluster=None,
        provider=adopted.provider,
        kubeconfig=adopted.kubeconfig,
        endpoint=adopted.endpoint,
        cluster_security_group_id=adopted.cluster_security_group_id,
        kubernetes_version=adopted.kubernetes_version,
        admin_access=[],
        member_access=member_access,
    )


def coredns_addon(plan: EksClusterPlan, ready: Sequence[pulumi.Resource], parent: pulumi.Resource) -> aws.eks.Addon:
    """The ``coredns`` add-on of a created cluster. CoreDNS pods run on the system nodes (every
    other node is tainted), and EKS reports the add-on active only once they do: it waits for ``ready``."""
    config = plan.cluster
    return aws.eks.Addon(
        f"{plan.name}-coredns",
        cluster_name=config.name,
        addon_name=COREDNS_ADDON,
        addon_version=addon_version(COREDNS_ADDON, config.kubernetes_version, config.coredns_version, parent, plan.region),
        resolve_conflicts_on_create=ADOPT_SELF_MANAGED,
        resolve_conflicts_on_update=ADOPT_SELF_MANAGED,
        tags=tag_map(plan.tags),
        region=plan.region,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(ready)),
    )


def _endpoint_group(plan: EksClusterPlan, parent: pulumi.Resource) -> Optional[aws.ec2.SecurityGroup]:
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
    config = plan.cluster
    if not has_endpoint_sources(config):
        return None
    return aws.ec2.SecurityGroup(
        endpoint_group_resource_name(plan.name),
        vpc_id=plan.network.vpc_id,
        description=pulumi.Output.concat("EKS private API endpoint of ", config.name, ": port 443 from the listed sources"),
        revoke_rules_on_delete=True,
        tags=tag_map(plan.tags),
        region=plan.region,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _endpoint_ingress(
    plan: EksClusterPlan, group: Optional[aws.ec2.SecurityGroup], parent: pulumi.Resource
) -> list[aws.vpc.SecurityGroupIngressRule]:
    """Port 443 of the endpoint's own group (``_endpoint_group``), opened to the networks and
    security groups that may reach the private endpoint. EKS: "you must ensure that your Amazon
    EKS control plane security group contains rules to allow ingress traffic on port 443 from
    your connected network" (``ENDPOINT_DOC``); without them only the cluster's own members
    reach it."""
    if group is None:
        return []
    config = plan.cluster
    return [
        aws.vpc.SecurityGroupIngressRule(
            resource_name,
            security_group_id=group.id,
            ip_protocol="tcp",
            from_port=API_PORT,
            to_port=API_PORT,
            description=pulumi.Output.concat("EKS private API endpoint of ", config.name),
            tags=tag_map(plan.tags),
            **source,
            region=plan.region,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for resource_name, source in endpoint_sources(plan.name, config)
    ]


def endpoint_sources(name: str, config: ClusterConfig) -> list[tuple[str, Mapping[str, pulumi.Input[str]]]]:
    """Each source of the private endpoint as the resource name of its rule and the rule's source
    argument (``cidr_ipv4``, ``cidr_ipv6`` or ``referenced_security_group_id``)."""
    sources: list[tuple[str, Mapping[str, pulumi.Input[str]]]] = []
    for i, cidr in enumerate(config.endpoint_private_access_cidrs):
        key = "cidr_ipv6" if ":" in cidr else "cidr_ipv4"
        sources.append((f"{name}-api-ingress-cidr-{i}", {key: cidr}))
    for i, group_id in enumerate(config.endpoint_private_access_security_group_ids):
        sources.append((f"{name}-api-ingress-sg-{i}", {"referenced_security_group_id": group_id}))
    return sources
