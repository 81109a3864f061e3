"""The AWS identity of training pods: an IAM role that EKS Pod Identity hands to the training
ServiceAccount of every training namespace, with least-privilege access to the stack's S3 buckets
and any policies the stack names. The ServiceAccounts themselves are Kubernetes objects, made by
``workloads.scheduling_policies``; an association may name a ServiceAccount before it exists."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from ..config import ConfigError, Problem, S3BucketConfig
from ..config.team_settings import team_data_path
from .eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from .pod_identity import PodIdentityRole, pod_identity_role
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..facts.aws_names import PhysicalName

S3_BUCKET_READ_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation")
"""Bucket-level actions: list its keys (a data loader enumerating shards) and find its region,
granted on the bucket while the object actions go on ``<bucket>/*``, as AWS's example does
(docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_examples_s3_rw-bucket.html)."""
S3_BUCKET_WRITE_ACTIONS = ("s3:ListBucketMultipartUploads",)
"""Bucket-level, ``readWrite`` only: find unfinished multipart uploads of large checkpoints."""
S3_OBJECT_READ_ACTIONS = ("s3:GetObject",)
"""Object-level, every bucket: read an object."""
S3_OBJECT_WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
"""Object-level, ``readWrite`` only: write (multipart uploads included; a checkpoint shard is large),
delete (rotating old checkpoints) and clean up an interrupted upload. No ACL, tagging, versioning or
bucket configuration action."""


S3_RESOURCE_ACCOUNT = "s3:ResourceAccount"
"""The condition key that compares the account owning the bucket an S3 request names
(docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html, condition keys)."""


def s3_access_policy(
    partition: str,
    buckets: Sequence[S3BucketConfig],
    names: Optional[Sequence[str]] = None,
    account_id: Optional[str] = None,
    prefix: Optional[str] = None,
) -> dict[str, Any]:
    """Policy document granting exactly the actions each bucket's ``access`` needs, on exactly
    those buckets and their objects, each only while its account (``account_id`` on the bucket, else
    ``account_id``, the stack's) owns it. ``names`` are the buckets' names once known, in order (a
    name may be an Output: the component resolves them and calls this inside ``apply``). With
    ``prefix`` (a team's, ``teams/<team>``) every grant is held to the keys under ``<prefix>/``
    (``prefixed_statements``)."""
    if names is not None:
        buckets = [bucket.model_copy(update={"name": name}) for bucket, name in zip(buckets, names, strict=True)]
    accounts = list(dict.fromkeys(bucket.account_id or account_id for bucket in buckets))
    statements = []
    for access, bucket_actions, object_actions in (
        ("read", S3_BUCKET_READ_ACTIONS, S3_OBJECT_READ_ACTIONS),
        ("readWrite", S3_BUCKET_READ_ACTIONS + S3_BUCKET_WRITE_ACTIONS, S3_OBJECT_READ_ACTIONS + S3_OBJECT_WRITE_ACTIONS),
    ):
        for account in accounts:
            granted = [bucket.name for bucket in buckets if bucket.access == access and (bucket.account_id or account_id) == account]
            if not granted:
                continue
            # The stack's own account keeps the plain Sids; a bucket of another account gets its own pair.
            sid = ("ReadWrite" if access == "readWrite" else "Read") + ("" if account == account_id or account is None else account)
            condition = {"Condition": {"StringEquals": {S3_RESOURCE_ACCOUNT: account}}} if account is not None else {}
            statements.append(
                {"Sid": f"{sid}Buckets", "Effect": "Allow", "Action": list(bucket_actions),
                 "Resource": [f"arn:{partition}:s3:::{n}" for n in granted], **condition}
            )
            statements.append(
                {"Sid": f"{sid}Objects", "Effect": "Allow", "Action": list(object_actions),
                 "Resource": [f"arn:{partition}:s3:::{n}/*" for n in granted], **condition}
            )
    if prefix is not None:
        statements = [scoped for statement in statements for scoped in prefixed_statements(statement, prefix)]
    return {"Version": "2012-10-17", "Statement": statements}


S3_PREFIX = "s3:prefix"
"""The condition key matching a ListObjects request's ``prefix``, so ``s3:ListBucket`` lists only
keys under it; a request without one is refused (IAM User Guide, "Amazon S3: Allows IAM users access
to their S3 home directory")."""

S3_PREFIX_FREE_ACTIONS = ("s3:GetBucketLocation",)
"""Bucket-level actions that read no key, so no prefix applies: finding the bucket's region."""


def prefixed_statements(statement: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """One statement of ``s3_access_policy`` held to the keys under ``<prefix>/``: object actions on
    ``<bucket>/<prefix>/*`` only; ``s3:ListBucket`` only with ``s3:prefix`` under it; the bucket's
    location as it is. ``s3:ListBucketMultipartUploads`` lists every key being uploaded to the bucket
    and takes no ``s3:prefix``, so a team's role does without it (its writer knows its own upload IDs)."""
    if all(resource.endswith("/*") for resource in statement["Resource"]):
        return [{**statement, "Resource": [resource[: -len("*")] + f"{prefix}/*" for resource in statement["Resource"]]}]
    condition = statement.get("Condition", {})
    free = [action for action in statement["Action"] if action in S3_PREFIX_FREE_ACTIONS]
    listed = [action for action in statement["Action"] if action == "s3:ListBucket"]
    scoped = []
    if free:
        scoped.append({**statement, "Sid": f"{statement['Sid']}Location", "Action": free})
    if listed:
        scoped.append(
            {**statement, "Action": listed,
             "Condition": {**condition, "StringLike": {S3_PREFIX: [f"{prefix}/*"]}}}
        )
    return scoped


def training_role_needed(buckets: Sequence[S3BucketConfig], policy_arns: Sequence[pulumi.Input[str]]) -> bool:
    """A role is made only when it grants something."""
    return bool(buckets) or bool(policy_arns)


@documented_args
@dataclass
class TrainingIdentityArgs:
    """Arguments of ``TrainingIdentity``."""

    cluster: ClusterInput
    """The cluster whose training pods get the role: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    namespaces: Sequence[str]
    """Training namespaces; each one's ServiceAccount gets an association."""
    service_account: str
    """Name of the training ServiceAccount in those namespaces."""
    s3_buckets: Sequence[S3BucketConfig] = ()
    """Buckets the role may reach, each with its access. Default: none."""
    policy_arns: Sequence[pulumi.Input[str]] = ()
    """Further IAM policies attached to the role. Default: none."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs). Default: none."""
    teams: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Teams and their namespaces, among ``namespaces``: each team gets a role of its own that reaches
    only ``teams/<team>/`` of every bucket, its namespaces' associations hand it out. Default: none
    (one role for every namespace, whole buckets)."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))
        teamed = [namespace for namespaces in self.teams.values() for namespace in namespaces]
        strays = sorted(set(teamed) - set(self.namespaces)) + sorted({n for n in teamed if teamed.count(n) > 1})
        if strays:
            raise ConfigError([Problem("TrainingIdentityArgs.teams", f"names {', '.join(strays)}: each must be one of namespaces, in one team")])

def training_role_resource_name(name: str) -> str:
    """Logical name of the training pods' role (auto-named)."""
    return f"{name}-role"


def s3_access_policy_resource_name(name: str) -> str:
    """Logical name of the role's S3 inline policy (auto-named)."""
    return f"{name}-s3-access"


def team_identity_name(name: str, team: str) -> str:
    """The stem of a team's role and policy names (``<stem>-role``, ``<stem>-s3-access``)."""
    return f"{name}-team-{team}"


def training_identity_physical_names(
    name: str, s3_buckets: Sequence[S3BucketConfig], teams: Sequence[str] = (), shared: bool = True
) -> list[PhysicalName]:
    """Every AWS name ``TrainingIdentity(name, ...)`` generates, from the functions it names them
    with: the shared role (``shared``: some namespace is in no team) and each team's."""
    stems = ([name] if shared else []) + [team_identity_name(name, team) for team in teams]
    names = []
    for stem in stems:
        names.append(PhysicalName("aws:iam/role:Role", training_role_resource_name(stem), autonamed=True))
        if s3_buckets:
            names.append(PhysicalName("aws:iam/rolePolicy:RolePolicy", s3_access_policy_resource_name(stem), autonamed=True))
    return names


@documented_component(TrainingIdentityArgs)
class TrainingIdentity(pulumi.ComponentResource):
    """The training pods' IAM role and its Pod Identity associations, one per training namespace."""

    role_arn: pulumi.Output[str]
    """The role of the namespaces in no team (with every namespace in a team, the first team's)."""
    associations: list[aws.eks.PodIdentityAssociation]
    """The associations; pods created before them get no credentials, so training pods wait for them."""
    role_arns: dict[str, pulumi.Output[str]]
    """Each team's role, by team."""

    def __init__(self, name: str, args: Optional[TrainingIdentityArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TrainingIdentityArgs, "TrainingIdentity", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainingIdentity({name})")
        super().__init__("eks-gpu-training:index:TrainingIdentity", name, None, opts)
        ref, tags = cluster_ref_of(args), tag_map(args.tags)
        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id if args.s3_buckets else None
        team_of = {namespace: team for team, namespaces in args.teams.items() for namespace in namespaces}
        shared = [namespace for namespace in args.namespaces if namespace not in team_of]
        identities: dict[Optional[str], PodIdentityRole] = {
            team: self._role(team_identity_name(name, team), args, ref, tags, list(namespaces), account_id, team_data_path(team))
            for team, namespaces in args.teams.items()
        }
        if shared or not identities:
            identities[None] = self._role(name, args, ref, tags, shared, account_id, None)
        # An association keeps its name whichever role it hands out: moving a namespace to a team's
        # role updates it in place (EKS takes one association per ServiceAccount).
        self.associations = [
            identities[team_of.get(namespace)].associate(f"{name}-{namespace}", namespace) for namespace in args.namespaces
        ]
        self.role_arns = {team: identity.role.arn for team, identity in identities.items() if team is not None}
        role = (identities.get(None) or next(iter(identities.values()))).role
        self.role_arn = role.arn
        self.register_outputs({"roleArn": self.role_arn})

    def _role(
        self,
        stem: str,
        args: TrainingIdentityArgs,
        ref: Any,
        tags: Tags,
        namespaces: list[str],
        account_id: Optional[pulumi.Output[str]],
        prefix: Optional[str],
    ) -> PodIdentityRole:
        """A role for the training ServiceAccount of ``namespaces``, reaching the buckets under ``prefix`` (all of them without)."""
        identity = pod_identity_role(
            training_role_resource_name(stem),
            ref,
            namespace=namespaces,
            service_account=args.service_account,
            holder="Training pods" if prefix is None else f"Training pods of {prefix}",
            tags=tags,
            parent=self,
        )
        role = identity.role
        if args.s3_buckets:
            # The cluster's account, which the stack deploys into: the buckets' owner unless one says otherwise.
            aws.iam.RolePolicy(
                s3_access_policy_resource_name(stem),
                role=role.id,
                policy=pulumi.Output.all(account_id, *(bucket.name for bucket in args.s3_buckets)).apply(
                    lambda values: json.dumps(s3_access_policy(ref.partition, args.s3_buckets, values[1:], values[0], prefix))
                ),
                # Children of the component, not of the role: whoever depends on the component waits for them.
                opts=pulumi.ResourceOptions(parent=self),
            )
        for index, policy_arn in enumerate(args.policy_arns):
            aws.iam.RolePolicyAttachment(
                f"{stem}-policy-{index}", role=role.name, policy_arn=policy_arn, opts=pulumi.ResourceOptions(parent=self)
            )
        return identity
