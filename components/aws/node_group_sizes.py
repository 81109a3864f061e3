"""The desired size a node group's update sends: the running group's, kept inside the new bounds.

After creation an autoscaler or a person owns a node group's desired size, but the provider sends
the whole ``scalingConfig`` with any change to it
(docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html), and ``ignoreChanges``
only sends the state's value instead. So ignoring ``desiredSize`` alone would set a pool scaled
from 2 to 3 back to 2 on an ``up`` that raises ``maxSize``, and EKS would terminate a GPU node of
its choosing; always sending the running size would show a hand resize in every preview.

So the program reads the running group's scaling config (DescribeNodegroup). While the bounds are
unchanged, ``scalingConfig`` is not sent (terraform-provider-aws ``node_group.go``,
``resourceNodeGroupUpdate``) and ``desiredSize`` is ignored, as pulumi-eks ignores it. When the
bounds change, the running size is sent, moved into the new bounds (EKS requires minSize <=
desiredSize <= maxSize): lowering ``maxSize`` below it terminates nodes EKS picks, so lower it
between jobs. A group not running yet gets the configured size. A scale-out in the seconds between
the read and the update is not seen; bounds changed by hand to what the stack file then says need a
``pulumi refresh`` before the ``up``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_aws as aws


def clamped_desired_size(current: int, min_size: int, max_size: int) -> int:
    """The desired size to send with new bounds: the running group's ``current`` size, moved into
    ``[min_size, max_size]``."""
    return min(max(current, min_size), max_size)


def _generated_name(prefix: str) -> re.Pattern[str]:
    # terraform-plugin-sdk id.PrefixedUniqueId: an 18-digit timestamp and an 8-digit hex counter
    # (config.pools.UNIQUE_SUFFIX_LENGTH), so pool "a" never matches pool "a-b"'s group.
    return re.compile(rf"^{re.escape(prefix)}\d{{18}}[0-9a-f]{{8}}$")


def running_cluster(
    cluster_name: pulumi.Input[str], region: Optional[str] = None, invoke: Optional[pulumi.InvokeOptions] = None
) -> Optional[Any]:
    """The running EKS cluster of that name in ``region`` (DescribeCluster); None when it does not
    exist yet or its name is known only after deployment. ``invoke`` chooses the AWS provider."""
    if not isinstance(cluster_name, str):
        return None
    if cluster_name not in (aws.eks.get_clusters(region=region, opts=invoke).names or []):
        return None
    return aws.eks.get_cluster(name=cluster_name, region=region, opts=invoke)


def running_node_group(
    cluster_name: pulumi.Input[str], name_prefix: str, region: Optional[str] = None,
    invoke: Optional[pulumi.InvokeOptions] = None,
) -> Optional[Any]:
    """The cluster's one node group named ``name_prefix`` plus a generated suffix (DescribeNodegroup);
    None when the cluster or the group does not exist yet, when the cluster name is known only after
    deployment, or when two such groups exist (a replacement under way)."""
    if not isinstance(cluster_name, str):
        return None
    if cluster_name not in (aws.eks.get_clusters(region=region, opts=invoke).names or []):
        return None
    pattern = _generated_name(name_prefix)
    groups = [g for g in aws.eks.get_node_groups(cluster_name=cluster_name, region=region, opts=invoke).names or []
              if pattern.match(g)]
    if len(groups) != 1:
        return None
    return aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=groups[0], region=region, opts=invoke)


def unread_warning(component: str, unread: str) -> str:
    """What `pulumi up` says when ``component``'s cluster name is an Output: the reads that need the
    name before deployment (DescribeCluster, DescribeNodegroup) are skipped, so ``unread`` is not
    checked."""
    return (
        f"{component}: the cluster name is an Output, known only at deployment, so the running cluster is not read "
        f"before it and {unread}. Pass the name as a plain string (a ClusterRef or ClusterConfig with name='...') "
        "to have these checks"
    )


def warn_unread(cluster_name: pulumi.Input[str], component: str, unread: str, resource: Optional[pulumi.Resource]) -> None:
    """``unread_warning`` as a Pulumi warning on ``resource``, when ``cluster_name`` is not a string."""
    if not isinstance(cluster_name, str):
        pulumi.log.warn(unread_warning(component, unread), resource=resource)


DESIRED_SIZE = "scalingConfig.desiredSize"
"""The node group input an autoscaler or a person owns after creation."""


@dataclass(frozen=True)
class RunningSize:
    """A running node group's scaling config (DescribeNodegroup ``scalingConfig``)."""

    desired: int
    min: int
    max: int


def running_size(group: Optional[Any]) -> Optional[RunningSize]:
    """The scaling config of a running node group (``running_node_group``); None without one."""
    if group is None or not group.scaling_configs:
        return None
    config = group.scaling_configs[0]
    return RunningSize(desired=config.desired_size, min=config.min_size, max=config.max_size)


def desired_size_for(running: Optional[RunningSize], initial_size: int, min_size: int, max_size: int) -> tuple[int, list[str]]:
    """The node group's ``scalingConfig.desiredSize`` input and its ``ignore_changes``, given the
    running group's scaling config: with the running bounds, the running size, ignored (the update
    leaves ``scalingConfig`` alone, and a hand resize is no change); with new bounds, the running size
    clamped to them, not ignored, so the update sends what runs; without a running group the size at
    creation, ignored afterwards."""
    if running is None:
        return initial_size, [DESIRED_SIZE]
    if (running.min, running.max) == (min_size, max_size):
        return running.desired, [DESIRED_SIZE]
    return clamped_desired_size(running.desired, min_size, max_size), []


def desired_size_and_ignored(
    cluster_name: pulumi.Input[str], name_prefix: str, initial_size: int, min_size: int, max_size: int, parent: pulumi.Resource,
    region: Optional[str] = None,
) -> tuple[int, list[str]]:
    """``desired_size_for`` the running node group named ``name_prefix`` (read through ``parent``'s
    AWS provider)."""
    group = running_node_group(cluster_name, name_prefix, region, pulumi.InvokeOptions(parent=parent))
    return desired_size_for(running_size(group), initial_size, min_size, max_size)
