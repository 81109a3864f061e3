"""IAM pieces shared by components: node IAM role, Pod Identity trust."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
"""AWS managed policies every EKS worker needs: join the cluster, let the VPC CNI attach ENIs,
pull images from ECR (pull-only, narrower than ReadOnly), and be reachable through SSM Session
Manager instead of SSH (docs.aws.amazon.com/eks/latest/userguide/create-node-role.html)."""


def managed_policy_arn(partition: str, policy_name: str) -> str:
    """ARN of an AWS managed policy in a partition (``aws``, ``aws-cn``, ``aws-us-gov``)."""
    return f"arn:{partition}:iam::aws:policy/{policy_name}"


def ec2_assume_role_policy(partition: str) -> str:
    """Trust policy that lets EC2 instances assume a role."""
    service = "ec2.amazonaws.com.cn" if partition == "aws-cn" else "ec2.amazonaws.com"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
"""The service principal EKS Pod Identity assumes roles as."""


def cluster_arn(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """ARN of an EKS cluster."""
    return f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"


def pod_identity_trust_policy(partition: str, region: str, account_id: str, cluster_name: str) -> dict[str, Any]:
    """Trust policy that lets EKS Pod Identity hand a role to the ServiceAccount an association
    names, for this cluster only: ``aws:SourceAccount`` and ``aws:SourceArn`` guard against a confused
    deputy in another cluster or account (docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnEquals": {"aws:SourceArn": cluster_arn(partition, region, account_id, cluster_name)},
                },
            }
        ],
    }


def create_pod_identity_role(
    resource_name: str,
    *,
    account_id: pulumi.Input[str],
    partition: str,
    region: str,
    cluster_name: str,
    description: str,
    tags: Mapping[str, str],
    parent: pulumi.Resource,
) -> aws.iam.Role:
    """An IAM role that EKS Pod Identity of this cluster (and only this cluster) may hand to a
    ServiceAccount; the caller attaches its permissions and makes the association."""
    return aws.iam.Role(
        resource_name,
        description=description,
        assume_role_policy=pulumi.Output.from_input(account_id).apply(
            lambda account: json.dumps(pod_identity_trust_policy(partition, region, account, cluster_name))
        ),
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )


def node_role_resource_name(name: str) -> str:
    """Logical name of the node role ``create_node_role(name, ...)`` makes (auto-named by Pulumi)."""
    return f"{name}-node-role"


def create_node_role(
    name: str,
    partition: str,
    tags: Mapping[str, str],
    parent: pulumi.Resource,
    extra_policy_names: Optional[tuple[str, ...]] = None,
) -> aws.iam.Role:
    """A node IAM role named ``{name}-node-role`` with ``NODE_MANAGED_POLICIES`` attached."""
    role = aws.iam.Role(
        node_role_resource_name(name),
        assume_role_policy=ec2_assume_role_policy(partition),
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    for policy_name in NODE_MANAGED_POLICIES + (extra_policy_names or ()):
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy_name}",
            role=role.name,
            policy_arn=managed_policy_arn(partition, policy_name),
            opts=pulumi.ResourceOptions(parent=role),
        )
    return role
