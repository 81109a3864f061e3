"""Keeping a node group's desired size inside new bounds.

After creation ``scalingConfig.desiredSize`` is ignored (an autoscaler or a person owns it), so a
``pulumi up`` that raises ``minSize`` above the group's current desired size, or lowers ``maxSize``
below it, sends EKS the old desired size with the new bounds, and EKS refuses the update ("Minimum
capacity N can't be greater than desired size M"; UpdateNodegroupConfig requires
minSize <= desiredSize <= maxSize, docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html).

So the program reads the running group's desired size (DescribeNodegroup, at preview and at update
alike) and, only when it lies outside the new bounds, sends it clamped to them for that one update.
Raising ``minSize`` then launches nodes up to it; lowering ``maxSize`` terminates nodes down to it
(EKS picks which, so a node running a job may go: lower ``maxSize`` between jobs).
"""

from __future__ import annotations

import re
from typing import Any, Optional

import pulumi
import pulumi_aws as aws



def clamped_desired_size(current: Optional[int], min_size: int, max_size: int) -> Optional[int]:
    """The desired size to send with new bounds: ``current`` moved into ``[min_size, max_size]``,
    or None when it already lies inside them (or there is no running group)."""
    if current is None or min_size <= current <= max_size:
        return None
    return min(max(current, min_size), max_size)


def _generated_name(prefix: str) -> re.Pattern[str]:
    # terraform-plugin-sdk id.PrefixedUniqueId: an 18-digit timestamp and an 8-digit hex counter
    # (config.pools.UNIQUE_SUFFIX_LENGTH), so pool "a" never matches pool "a-b"'s group.
    return re.compile(rf"^{re.escape(prefix)}\d{{18}}[0-9a-f]{{8}}$")


def _invoke(parent: Optional[pulumi.Resource], provider: Optional[pulumi.ProviderResource] = None) -> pulumi.InvokeOptions:
    return pulumi.InvokeOptions(parent=parent, provider=provider)


def running_cluster(
    cluster_name: pulumi.Input[str], parent: Optional[pulumi.Resource] = None, region: Optional[str] = None,
    provider: Optional[pulumi.ProviderResource] = None,
) -> Optional[Any]:
    """The running EKS cluster of that name in ``region`` (DescribeCluster); None when it does not
    exist yet or its name is known only after deployment. ``provider``: the AWS provider to ask
    through, for a look-up before the component that would pass it on is registered."""
    if not isinstance(cluster_name, str):
        return None
    if cluster_name not in (aws.eks.get_clusters(region=region, opts=_invoke(parent, provider)).names or []):
        return None
    return aws.eks.get_cluster(name=cluster_name, region=region, opts=_invoke(parent, provider))


def running_node_group(
    cluster_name: pulumi.Input[str], name_prefix: str, parent: Optional[pulumi.Resource] = None,
    region: Optional[str] = None,
) -> Optional[Any]:
    """The cluster's one node group named ``name_prefix`` plus a generated suffix (DescribeNodegroup);
    None when the cluster or the group does not exist yet, when the cluster name is known only after
    deployment, or when two such groups exist (a replacement under way)."""
    if not isinstance(cluster_name, str):
        return None
    if cluster_name not in (aws.eks.get_clusters(region=region, opts=_invoke(parent)).names or []):
        return None
    pattern = _generated_name(name_prefix)
    groups = [g for g in aws.eks.get_node_groups(cluster_name=cluster_name, region=region, opts=_invoke(parent)).names or []
              if pattern.match(g)]
    if len(groups) != 1:
        return None
    return aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=groups[0], region=region, opts=_invoke(parent))


def running_desired_size(
    cluster_name: pulumi.Input[str], name_prefix: str, parent: pulumi.Resource, region: Optional[str] = None
) -> Optional[int]:
    """The desired size of the running node group (``running_node_group``); None without one."""
    group = running_node_group(cluster_name, name_prefix, parent, region)
    return group.scaling_configs[0].desired_size if group is not None and group.scaling_configs else None


def desired_size_and_ignored(
    cluster_name: pulumi.Input[str], name_prefix: str, initial_size: int, min_size: int, max_size: int, parent: pulumi.Resource,
    region: Optional[str] = None,
) -> tuple[int, list[str]]:
    """The node group's ``scalingConfig.desiredSize`` input and its ``ignore_changes``: the size at
    creation, ignored afterwards; or, when the running group's desired size lies outside the new
    bounds, that size clamped to them and not ignored, for this update."""
    clamped = clamped_desired_size(running_desired_size(cluster_name, name_prefix, parent, region), min_size, max_size)
    if clamped is None:
        return initial_size, ["scalingConfig.desiredSize"]
    return clamped, []
