"""Who administers a cluster this program creates: an EKS access entry with cluster-wide
``AmazonEKSClusterAdminPolicy`` for each of ``cluster.adminPrincipalArns``, less the principal running
`pulumi up`, whom EKS has already made an admin."""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
"""EKS access policy granted to ``cluster.adminPrincipalArns`` (cluster-wide scope)."""


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


def cluster_admin_access_entries(
    admin_principal_arns: Sequence[pulumi.Input[str]], partition: str, parent: pulumi.Resource
) -> dict[str, eks.AccessEntryArgs]:
    """pulumi-eks ``access_entries`` granting ``CLUSTER_ADMIN_POLICY`` cluster-wide to each entry of
    ``admin_access_entries`` (the deployer, looked up with ``parent``, left out)."""
    return {
        key: eks.AccessEntryArgs(
            principal_arn=arn,
            access_policies={
                "cluster-admin": eks.AccessPolicyAssociationArgs(
                    policy_arn=f"arn:{partition}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}",
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                )
            },
        )
        for key, arn in admin_access_entries(admin_principal_arns, deployer_principal_arn(parent)).items()
    }
