"""The system node group: the cluster's untainted, on-demand nodes for controllers (Karpenter, Kueue,
CoreDNS, the GPU Operator's operands that are not per GPU node). ``EksCluster`` makes it; its names
are also what the stack's physical-name check reads."""

from __future__ import annotations

from typing import Sequence

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from ..config import SYSTEM_NODE_ROLE_LABEL, ClusterConfig, SystemNodeGroupConfig
from .iam import create_node_role
from .node_group_sizes import desired_size_and_ignored
from .node_launch import launch_template_data, launch_template_ref, node_launch_template

SYSTEM_NODE_GROUP_PREFIX = "system-"
"""Prefix of the system node group's EKS name; the suffix EKS adds keeps a replacement from clashing."""

SYSTEM_MAX_UNAVAILABLE = 1
"""System nodes replaced at a time during a roll: controllers keep running on the others."""


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


def system_node_group(
    name: str,
    system: SystemNodeGroupConfig,
    cluster: ClusterConfig,
    *,
    partition: str,
    region: str,
    tags: Tags,
    kubernetes_version: pulumi.Input[str],
    subnet_ids: list[pulumi.Input[str]],
    control_plane: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> aws.eks.NodeGroup:
    """The system node group of ``EksCluster(name, ...)``, with its node role and launch template, all
    children of ``parent``: untainted, on demand, with the same launch template settings as the GPU
    pools (IMDSv2 with hop limit 1, encrypted gp3). It waits for the cluster only, not for the Pod
    Identity add-on, so the critical path is cluster, system nodes, slowest release."""
    node_role = create_node_role(
        system_node_group_resource_name(name), partition, tags, parent=parent,
        ssm_access=cluster.node_ssm_access,
    )
    role = node_role.role
    launch_template = node_launch_template(
        system_launch_template_resource_name(name),
        launch_template_data(
            description=pulumi.Output.concat("System nodes of EKS cluster ", cluster.name),
            ami_type=system.ami_type,
            volume_size_gib=system.disk_size_gib,
            instance_name=pulumi.Output.concat(cluster.name, "-system"),
            instance_tags={},
        ),
        tags=tags,
        parent=parent,
        region=region,
    )
    # Desired size ignored while the bounds stay; the running size is sent when they move (node_group_sizes).
    desired_size, ignored = desired_size_and_ignored(
        cluster.name, SYSTEM_NODE_GROUP_PREFIX, system.desired_size, system.min_size, system.max_size, parent,
        region,
    )
    return aws.eks.NodeGroup(
        system_node_group_resource_name(name),
        cluster_name=cluster.name,
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
        tags=tag_map(tags),
        region=region,
        opts=pulumi.ResourceOptions(
            parent=parent,
            # Nodes join only with the role's policies attached.
            depends_on=[*control_plane, *node_role.policy_attachments],
            ignore_changes=ignored,
        ),
    )
