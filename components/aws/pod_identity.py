"""EKS Pod Identity: the agent add-on that hands out credentials, and the IAM roles it hands to
ServiceAccounts (Karpenter's controller, the topology labeler, training pods, the FSx CSI
controller), each trusted by ``pods.eks.amazonaws.com`` for one ServiceAccount of one cluster, with
the association that names the ServiceAccount.

Every such role is made by ``pod_identity_role`` and every association by its ``associate``, so the
trust policy and what an association waits for are written once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from .cluster_ref import ClusterRef
from .iam import cluster_arn

POD_IDENTITY_ADDON = "eks-pod-identity-agent"
"""EKS add-on that lets controllers (Karpenter, the topology labeler) get AWS credentials through
Pod Identity associations instead of IRSA."""

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""The service principal EKS Pod Identity assumes roles as."""


def pod_identity_trust_policy(
    partition: str,
    region: str,
    account_id: str,
    cluster_name: str,
    namespace: Union[str, Sequence[str]],
    service_account: str,
) -> dict[str, Any]:
    """Trust policy that lets EKS Pod Identity hand a role to one ServiceAccount of this cluster only:
    ``aws:SourceAccount`` and ``aws:SourceArn`` guard against a confused deputy in another cluster or
    account (docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html), and the session tags Pod
    Identity adds to its AssumeRole request, ``kubernetes-namespace`` and ``kubernetes-service-account``
    (docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html), keep another association in the same
    cluster (a mistaken or malicious one) from handing the role to any other ServiceAccount. The
    association must therefore keep session tags on (``disableSessionTags`` false, the default).
    ``namespace`` may list several namespaces whose ServiceAccount of that name gets the role."""
    namespaces = [namespace] if isinstance(namespace, str) else sorted(set(namespace))
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        "aws:SourceAccount": account_id,
                        "aws:RequestTag/kubernetes-namespace": namespaces[0] if len(namespaces) == 1 else namespaces,
                        "aws:RequestTag/kubernetes-service-account": service_account,
                    },
                    "ArnEquals": {"aws:SourceArn": cluster_arn(partition, region, account_id, cluster_name)},
                },
            }
        ],
    }


@dataclass(frozen=True)
class PodIdentityRole:
    """A role ``pod_identity_role`` made, with what its associations need to know."""

    role: aws.iam.Role
    """The IAM role; the caller attaches its permissions."""
    cluster: ClusterRef
    """The cluster whose Pod Identity may hand the role out."""
    namespaces: tuple[str, ...]
    """The namespaces whose ServiceAccount ``service_account`` the trust policy admits."""
    service_account: str
    """The ServiceAccount name the trust policy admits."""
    tags: Tags
    """Tags of the role, and of its associations."""
    parent: pulumi.Resource
    """Parent of the role and of its associations."""

    def associate(self, resource_name: str, namespace: Optional[str] = None) -> aws.eks.PodIdentityAssociation:
        """The association ``resource_name`` (a child of ``parent``) that hands the role to
        ``namespace/service_account``; ``namespace`` defaults to the only trusted one. Pods get
        credentials only if it exists when they start. The cluster name may be a plain string, so it
        waits for the cluster (``ready``) and its Pod Identity agent add-on explicitly."""
        if namespace is None:
            if len(self.namespaces) != 1:
                raise ValueError(f"{resource_name}: name the namespace, the role trusts {', '.join(self.namespaces)}")
            namespace = self.namespaces[0]
        if namespace not in self.namespaces:
            raise ValueError(f"{resource_name}: the role does not trust namespace {namespace!r}")
        ref = self.cluster
        return aws.eks.PodIdentityAssociation(
            resource_name,
            cluster_name=ref.name,
            namespace=namespace,
            service_account=self.service_account,
            role_arn=self.role.arn,
            tags=self.tags,
            region=ref.region,
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=[*ref.ready, *pod_identity_agent(ref, self.parent)]),
        )


def pod_identity_role(
    resource_name: str,
    cluster: ClusterRef,
    *,
    namespace: Union[str, Sequence[str]],
    service_account: str,
    holder: str,
    tags: Tags,
    parent: pulumi.Resource,
    account_id: Optional[pulumi.Input[str]] = None,
) -> PodIdentityRole:
    """An IAM role ``resource_name`` (auto-named, a child of ``parent``) that EKS Pod Identity of
    ``cluster`` (and only that cluster) may hand to the ServiceAccount ``namespace/service_account``
    (and only that one; or that ServiceAccount in each of several namespaces), described as
    ``<holder> of EKS cluster <name> (EKS Pod Identity)``. ``account_id`` is the cluster's account;
    default: the deployer's (``aws.get_caller_identity``). The caller attaches the role's permissions,
    then makes its associations with ``associate`` (or, for an EKS add-on, passes ``role.arn`` in the
    add-on's ``pod_identity_associations``)."""
    if account_id is None:
        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=parent)).account_id
    role = aws.iam.Role(
        resource_name,
        description=pulumi.Output.concat(f"{holder} of EKS cluster ", cluster.name, " (EKS Pod Identity)"),
        assume_role_policy=pulumi.Output.all(account_id, cluster.name).apply(
            lambda values: json.dumps(
                pod_identity_trust_policy(cluster.partition, cluster.region, values[0], values[1], namespace, service_account)
            )
        ),
        tags=tag_map(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    namespaces = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    return PodIdentityRole(role, cluster, namespaces, service_account, tags, parent)


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
