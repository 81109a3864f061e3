"""Who administers a cluster this program creates: an EKS access entry with cluster-wide
``AmazonEKSClusterAdminPolicy`` for each of ``cluster.adminPrincipalArns``, less the principal that
created the cluster.

EKS itself made an admin entry for the creator (pulumi-eks sets
``bootstrapClusterCreatorAdminPermissions``), and a second one fails with ``409
ResourceInUseException`` (docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html).
Who runs a later `pulumi up` says nothing about who that was, so the first `pulumi up` records the
creator in the cluster's tag ``CREATOR_TAG`` and later ones read it back (DescribeCluster); a
cluster without the tag takes it from ``cluster.creatorPrincipalArn``.

Entries are named after their principal (``IamPrincipal.key``), so adding or removing one admin
touches that entry alone; an Output ARN is named by its position and is never the creator. Each
entry carries an alias to the pulumi-eks child that made it in earlier versions (pulumi-eks
``nodejs/eks/cluster/authenticationMode.ts``, ``createAccessEntries``), so Pulumi takes it over
instead of creating a duplicate (409 again); ``delete_before_replace`` orders a later replacement.

Team members that are IAM principals get an entry too (``member-<key>``), with their team's
Kubernetes group and no access policy: their team's RoleBindings decide (``workloads/team_access``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from ..config.base import Tags, tag_map, tags_output
from ..config import ClusterConfig, Problem, TeamConfig
from ..config.team_settings import team_group
from ..config.inputs import is_unknown
from ..facts import aws_enums
from ..facts.iam_principals import iam_principal, same_principal
from .node_group_sizes import running_cluster
from .region import aws_provider_of

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy granted to ``cluster.adminPrincipalArns`` (cluster-wide scope)."""

CREATOR_TAG = "eks-gpu-training/creator-principal"
"""Tag of a created EKS cluster naming the principal whose `pulumi up` created it."""

TAG_VALUE_LIMIT = aws_enums.string_limits("eks", "TagValue")[1]
"""EKS tag values have at most 256 characters (botocore eks ``TagValue``)."""

TAGS_DOC = "docs.aws.amazon.com/eks/latest/userguide/eks-using-tags.html"
"""EKS tag restrictions: length, and the characters generally allowed (those of IAM's alphabet)."""

ADMIN_POLICY_KEY = "cluster-admin"
"""The key of the policy association under each entry (pulumi-eks's ``accessPolicies`` key before)."""

ACCESS_ENTRY_TYPE = "aws:eks/accessEntry:AccessEntry"


@dataclass(frozen=True)
class AdminEntry:
    """One admin's access entry, as data."""

    key: str
    """``admin-<account>-<kind>-<name>``, or ``admin-output-<n>`` for the n-th Output ARN."""
    principal_arn: pulumi.Input[str]
    """The ARN as listed."""
    legacy_key: str
    """``admin-<index in the list>``: the pulumi-eks child an earlier version made for it."""


@dataclass(frozen=True)
class AdminAccess:
    """Who created the cluster and which entries the stack makes."""

    creator: Optional[str]
    """The creator as ``CREATOR_TAG`` records it; None when it is not known (no plain ARN is listed then)."""
    entries: tuple[AdminEntry, ...]
    """Entries for ``adminPrincipalArns``, the creator left out."""

    @property
    def cluster_tags(self) -> dict[str, str]:
        """Tags for the EKS cluster alone (pulumi-eks ``clusterTags``)."""
        return {} if self.creator is None else {CREATOR_TAG: self.creator}


def admin_entries(admin_principal_arns: Sequence[pulumi.Input[str]], creator: Optional[str]) -> tuple[AdminEntry, ...]:
    """Entries for ``admin_principal_arns`` without the one naming ``creator`` (path and case of
    the name aside, ``facts/iam_principals.py``)."""
    entries = []
    outputs = 0
    for index, arn in enumerate(admin_principal_arns):
        principal = None if is_unknown(arn) else iam_principal(arn)
        if principal is None:
            key = f"admin-output-{outputs}"
            outputs += 1
        elif creator is not None and same_principal(arn, creator):
            continue
        else:
            key = f"admin-{principal.key}"
        entries.append(AdminEntry(key=key, principal_arn=arn, legacy_key=f"admin-{index}"))
    return tuple(entries)


def creator_tag_value(arn: str) -> str:
    """What ``CREATOR_TAG`` records for ``arn``: a role's or user's ARN without its path (the name is
    unique in the account, and an IAM path of up to 512 characters would not fit in a tag); any
    other principal (the account's root) as it is."""
    principal = iam_principal(arn)
    return principal.arn if principal is not None else arn


def creator_record(
    cluster: ClusterConfig, running_tags: Optional[Mapping[str, str]], caller_arn: Optional[str], path: str = "cluster"
) -> tuple[Optional[str], list[Problem]]:
    """The creator's ``CREATOR_TAG`` value and the problems with it. ``running_tags``: the tags of
    the running cluster, None when there is none (a first deployment) or its name is an Output;
    ``caller_arn``: the principal running `pulumi up`, who creates a cluster that does not run yet."""
    setting = cluster.creator_principal_arn
    setting_path = f"{path}.creatorPrincipalArn"
    problems: list[Problem] = []
    if running_tags is not None:
        recorded = running_tags.get(CREATOR_TAG)
        if recorded:
            if setting is not None and not same_principal(setting, recorded):
                problems.append(
                    Problem(
                        setting_path,
                        f"is '{setting}', but the running cluster records '{recorded}' as its creator (tag {CREATOR_TAG}), "
                        "whom EKS gave its own admin entry; remove the setting or correct it",
                    )
                )
            return recorded, problems
        creator = setting
    elif isinstance(cluster.name, str):
        creator = caller_arn
        if setting is not None and iam_principal(caller_arn) is not None and not same_principal(setting, caller_arn):
            problems.append(
                Problem(
                    setting_path,
                    f"is '{setting}', but cluster '{cluster.name}' does not exist yet: this `pulumi up` creates it as "
                    f"'{caller_arn}', whom EKS makes its admin; remove the setting, or create the cluster as that principal",
                )
            )
    else:
        creator = setting
    if creator is None:
        # A first deployment always learns its caller from STS; only a mock that answers nothing leaves
        # it out, and then nothing is left out or recorded.
        first_deployment = running_tags is None and isinstance(cluster.name, str)
        if not first_deployment and any(not is_unknown(arn) for arn in cluster.admin_principal_arns):
            why = (
                f"the running cluster '{cluster.name}' has no {CREATOR_TAG} tag (it was created by a library version before the tag)"
                if running_tags is not None
                else f"{path}.name is an Output, so the running cluster's {CREATOR_TAG} tag cannot be read before deployment"
            )
            problems.append(
                Problem(
                    setting_path,
                    f"is needed: {why}, so the principal that created it is not known. EKS gave that principal an admin "
                    "access entry itself, and if adminPrincipalArns lists it, a second one fails with 409 "
                    "ResourceInUseException. Set it to the IAM role or user that created the cluster (`aws eks "
                    "list-access-entries` lists it among the cluster's principals; CloudTrail's CreateCluster event names "
                    "it); `pulumi up` then records it in the tag",
                )
            )
        return None, problems
    value = creator_tag_value(creator)
    if len(value) > TAG_VALUE_LIMIT or (iam_principal(value) is not None and not aws_enums.iam_tag_text_ok(value)):
        problems.append(
            Problem(
                setting_path,
                f"the creator '{value}' cannot be recorded in the cluster's {CREATOR_TAG} tag: EKS tag values have at most "
                f"{TAG_VALUE_LIMIT} characters, generally {aws_enums.iam_tag_alphabet()} ({TAGS_DOC}); create the "
                "cluster as a principal whose name has none other",
            )
        )
    return value, problems


def creator_tag_problems(tags: Tags, path: str = "tags") -> list[Problem]:
    """Stack tags reach the EKS cluster after its own (pulumi-eks merges ``tags`` over
    ``clusterTags``), so one named ``CREATOR_TAG`` would overwrite the record. An Output of a whole
    map has no keys yet: ``cluster_stack_tags`` leaves that one out of it."""
    if not isinstance(tags, Mapping) or CREATOR_TAG not in tags:
        return []
    return [Problem(f"{path}.{CREATOR_TAG}", "is the tag the cluster records its creator in; leave it out of tags")]


def cluster_stack_tags(tags: Tags) -> Tags:
    """``tags`` as the created cluster's ``tags``: a map as it is (``creator_tag_problems`` refuses one
    naming ``CREATOR_TAG``); an Output of a whole map, whose keys are known only at deployment,
    without ``CREATOR_TAG``, so the record in ``clusterTags`` stays."""
    if isinstance(tags, Mapping):
        return dict(tags)
    return tags_output(tags).apply(lambda known: {k: v for k, v in known.items() if k != CREATOR_TAG})


def deployer_principal_arn(
    parent: Optional[pulumi.Resource] = None, provider: Optional[pulumi.ProviderResource] = None
) -> Optional[str]:
    """The IAM principal running this `pulumi up`: the role of an assumed-role session (STS names
    the session, access entries name the role), or the user. ``aws.iam.get_session_context`` turns
    ``arn:aws:sts::<account>:assumed-role/<role>/<session>`` into the role's ARN, path included."""
    opts = pulumi.InvokeOptions(parent=parent, provider=provider)
    caller = aws.get_caller_identity(opts=opts)
    return aws.iam.get_session_context(arn=caller.arn, opts=opts).issuer_arn


def live_admin_access(
    cluster: ClusterConfig, tags: Tags, region: str, opts: Optional[pulumi.ResourceOptions] = None
) -> tuple[AdminAccess, list[Problem]]:
    """``AdminAccess`` of a created cluster and its problems, read before anything is registered,
    through the AWS provider ``opts`` gives: the running cluster's tags (DescribeCluster), or, for
    a cluster that does not run yet, the principal running `pulumi up` (its creator)."""
    parent = opts.parent if opts is not None else None
    provider = aws_provider_of(opts)
    running = running_cluster(cluster.name, region, pulumi.InvokeOptions(parent=parent, provider=provider))
    running_tags = dict(running.tags or {}) if running is not None else None
    caller = deployer_principal_arn(parent, provider) if running is None and isinstance(cluster.name, str) else None
    creator, problems = creator_record(cluster, running_tags, caller)
    problems.extend(creator_tag_problems(tags))
    return AdminAccess(creator=creator, entries=admin_entries(cluster.admin_principal_arns, creator)), problems


def admin_access_entries(
    name: str,
    access: AdminAccess,
    eks_cluster: eks.Cluster,
    eks_cluster_name: str,
    cluster_name: pulumi.Input[str],
    partition: str,
    region: str,
    tags: Tags,
    provider: Optional[pulumi.ProviderResource],
    parent: pulumi.Resource,
) -> list[aws.eks.AccessPolicyAssociation]:
    """Each entry of ``access`` as ``<name>-<key>`` with ``CLUSTER_ADMIN_POLICY`` associated
    cluster-wide under it (``<name>-<key>-cluster-admin``), aliased to the pulumi-eks children of
    ``eks_cluster`` (resource name ``eks_cluster_name``) an earlier version made for it. ``provider``: the AWS provider pulumi-eks's
    children had (the cluster's own, or None for the default)."""
    policy_arn = f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"
    associations = []
    for entry in access.entries:
        legacy_entry = f"{eks_cluster_name}-{entry.legacy_key}"
        access_entry = aws.eks.AccessEntry(
            f"{name}-{entry.key}",
            cluster_name=cluster_name,
            principal_arn=entry.principal_arn,
            tags=tag_map(tags),
            region=region,
            # The cluster name may be a plain string, so the entry must wait for the cluster explicitly.
            opts=pulumi.ResourceOptions(
                parent=parent,
                provider=provider,
                depends_on=[eks_cluster],
                delete_before_replace=True,
                aliases=[pulumi.Alias(name=legacy_entry, parent=eks_cluster)],
            ),
        )
        legacy_entry_urn = pulumi.resource.create_urn(legacy_entry, ACCESS_ENTRY_TYPE, parent=eks_cluster)
        associations.append(
            aws.eks.AccessPolicyAssociation(
                f"{name}-{entry.key}-{ADMIN_POLICY_KEY}",
                cluster_name=cluster_name,
                principal_arn=access_entry.principal_arn,
                policy_arn=policy_arn,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                region=region,
                opts=pulumi.ResourceOptions(
                    parent=access_entry,
                    provider=provider,
                    delete_before_replace=True,
                    aliases=[pulumi.Alias(name=f"{legacy_entry}-{ADMIN_POLICY_KEY}", parent=legacy_entry_urn)],
                ),
            )
        )
    return associations


MEMBER_ENTRY_PREFIX = "member"
"""Member entries are ``<name>-member-<account>-<kind>-<name>``, named after the principal alone, so
moving a member to another team updates its entry's group in place."""


@dataclass(frozen=True)
class MemberEntry:
    """A team member's access entry, as data: the principal and its team's Kubernetes group."""

    key: str
    """``member-<account>-<kind>-<name>``."""
    principal_arn: str
    """The ARN as listed."""
    team: str
    """The team's name."""
    kubernetes_groups: tuple[str, ...]
    """The groups the entry carries: the team's alone (``team_group``)."""


def member_entries(teams: Sequence[TeamConfig]) -> tuple[MemberEntry, ...]:
    """An entry for each IAM principal among the teams' members (Kubernetes groups need none)."""
    entries = []
    for team in teams:
        for member in team.members:
            principal = iam_principal(member)
            if principal is not None:
                entries.append(MemberEntry(f"{MEMBER_ENTRY_PREFIX}-{principal.key}", member, team.name, (team_group(team.name),)))
    return tuple(entries)


def member_creator_problems(teams: Sequence[TeamConfig], creator: Optional[str]) -> list[Problem]:
    """A member who created the cluster has EKS's own admin entry, and a second entry fails with 409."""
    if creator is None:
        return []
    return [
        Problem(f"scheduling.teams[{i}].members[{j}]", f"'{member}' created the cluster (tag {CREATOR_TAG}), so EKS made it an admin "
                "with an access entry of its own; a member entry for it would fail with 409 ResourceInUseException. Remove it here")
        for i, team in enumerate(teams)
        for j, member in enumerate(team.members)
        if iam_principal(member) is not None and same_principal(member, creator)
    ]


def member_access_entries(
    name: str,
    teams: Sequence[TeamConfig],
    eks_cluster: Optional[eks.Cluster],
    cluster_name: pulumi.Input[str],
    region: str,
    tags: Tags,
    provider: Optional[pulumi.ProviderResource],
    parent: pulumi.Resource,
) -> list[aws.eks.AccessEntry]:
    """Each member entry as ``<name>-<key>``: a STANDARD entry carrying its team's Kubernetes group,
    with no access policy, so the member gets only what the team's RoleBindings grant
    (``workloads/team_access.py`` says why no EKS access policy). ``eks_cluster``: the created
    cluster they wait for; None for an adopted one, whose authentication mode must allow access
    entries (``API`` or ``API_AND_CONFIG_MAP``), or EKS refuses them."""
    return [
        aws.eks.AccessEntry(
            f"{name}-{entry.key}",
            cluster_name=cluster_name,
            principal_arn=entry.principal_arn,
            kubernetes_groups=list(entry.kubernetes_groups),
            type="STANDARD",
            tags=tag_map(tags),
            region=region,
            opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[eks_cluster] if eks_cluster else [],
                                        delete_before_replace=True),
        )
        for entry in member_entries(teams)
    ]
