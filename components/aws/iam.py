"""IAM pieces shared by components: node IAM roles, managed policy and cluster ARNs (the Pod
Identity roles are ``pod_identity.py``'s)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
)
"""AWS managed policies every EKS worker needs: join the cluster, let the VPC CNI attach ENIs, pull
from ECR (docs.aws.amazon.com/eks/latest/userguide/create-node-role.html). The CNI's policy stays on
the node role on purpose (docs/architecture.md, "Node IAM roles")."""

SSM_POLICY = "AmazonSSMManagedInstanceCore"
"""Lets the SSM agent on a node register with Systems Manager, so Session Manager can open a shell
there (no SSH key, no open port). A shell on a GPU node is root on every job's data, so it is
opt-in per stack (``cluster.nodeSsmAccess``)."""


def node_policy_names(ssm_access: bool) -> tuple[str, ...]:
    """The managed policies of a node role: ``NODE_MANAGED_POLICIES``, and SSM's when opted in."""
    return NODE_MANAGED_POLICIES + ((SSM_POLICY,) if ssm_access else ())


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


def cluster_arn(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """ARN of an EKS cluster."""
    return f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"


def node_role_resource_name(name: str) -> str:
    """Logical name of the node role ``create_node_role(name, ...)`` makes (auto-named by Pulumi)."""
    return f"{name}-node-role"


@dataclass(frozen=True)
class NodeRole:
    """A node IAM role and its policy attachments: a node launched before the attachments exist
    cannot join (no ``AmazonEKSWorkerNodePolicy``) or give pods addresses (no CNI policy), so what
    launches nodes waits for ``policy_attachments``, not only for the role."""

    role: aws.iam.Role
    policy_attachments: tuple[aws.iam.RolePolicyAttachment, ...]


def create_node_role(
    name: str,
    partition: str,
    tags: Tags,
    parent: pulumi.Resource,
    extra_policy_names: Optional[tuple[str, ...]] = None,
    ssm_access: bool = False,
    retain_on_delete: bool = False,
) -> NodeRole:
    """A node IAM role named ``{name}-node-role`` with ``NODE_MANAGED_POLICIES`` attached, and
    ``AmazonSSMManagedInstanceCore`` when ``ssm_access``. With ``retain_on_delete``, removing it from
    the program leaves the role and its attachments in AWS (nodes that outlive the program keep
    running on them)."""
    role = aws.iam.Role(
        node_role_resource_name(name),
        assume_role_policy=ec2_assume_role_policy(partition),
        tags=tag_map(tags),
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=retain_on_delete),
    )
    attachments = tuple(
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy_name}",
            role=role.name,
            policy_arn=managed_policy_arn(partition, policy_name),
            opts=pulumi.ResourceOptions(parent=role, retain_on_delete=retain_on_delete),
        )
        for policy_name in node_policy_names(ssm_access) + (extra_policy_names or ())
    )
    return NodeRole(role, attachments)
