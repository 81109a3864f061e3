"""A change that rolls GPU nodes under a running job is refused unless the pool opts in.

A ``cluster.kubernetesVersion`` or ``releaseVersion`` change rolls a managed pool's nodes. A running
training job's PodDisruptionBudget keeps every one of its pods, so EKS cannot evict them and gives
up after 15 minutes with ``PodEvictionFailure``
(docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html), after the control
plane has already moved to the new version, which does not go back. A preview cannot see whether a
job runs, so every such roll of a pool needs the explicit opt-in ``forceUpdateVersion: true``, with
which EKS evicts the protected pods (UpdateNodegroupVersion ``force``): the operator stops or
holds the pool's jobs first, or accepts losing them.

The rolls are found by reading the running cluster and node groups (DescribeCluster,
DescribeNodegroup) before anything is registered; a first deployment has none. Launch-template
changes (root volume, EFA, placement group, instance tags) roll nodes as well but are not detected
here: docs/operations.md says so.
"""

from __future__ import annotations

from typing import Optional

from ..aws.gpu_node_group import node_group_name_prefix
from ..aws.node_group_sizes import running_cluster, running_node_group
from ..config import GpuTrainingPlatformArgs, Problem


def roll_problems(
    args: GpuTrainingPlatformArgs, running_version: Optional[str], running_releases: dict[str, Optional[str]]
) -> list[Problem]:
    """Pools a change would roll without ``forceUpdateVersion``: every managed GPU pool when the
    running cluster's version differs from ``cluster.kubernetesVersion``, a pool whose pinned
    ``releaseVersion`` differs from its running group's. ``running_releases`` maps the pool names of
    running groups to their AMI release."""
    problems = []
    version_moves = running_version is not None and running_version != args.cluster.kubernetes_version
    for i, pool in enumerate(args.gpu_node_groups):
        if pool.force_update_version or pool.name not in running_releases:
            continue
        running_release = running_releases[pool.name]
        if version_moves:
            why = f"cluster.kubernetesVersion moves the running cluster from {running_version} to {args.cluster.kubernetes_version}"
        elif pool.release_version is not None and running_release is not None and pool.release_version != running_release:
            why = f"releaseVersion moves the running nodes from {running_release} to {pool.release_version}"
        else:
            continue
        problems.append(
            Problem(
                f"gpuNodeGroups[{i}].forceUpdateVersion",
                f"{why}, which rolls the pool's nodes; a running job's PodDisruptionBudget would make EKS give up "
                "after 15 minutes with PodEvictionFailure, after the control plane has moved. Stop or hold the "
                "pool's jobs (ClusterQueue stopPolicy HoldAndDrain) and set forceUpdateVersion: true for this change "
                "(EKS then evicts whatever still runs)",
            )
        )
    return problems


def live_roll_problems(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """``roll_problems`` for what runs now, read from EKS; nothing for an adopted cluster's version
    (the stack does not set it) or a cluster not created yet."""
    if not args.gpu_node_groups or all(p.force_update_version for p in args.gpu_node_groups):
        return []
    cluster = running_cluster(args.cluster.name, region=args.region)
    if cluster is None:
        return []
    releases = {}
    for pool in args.gpu_node_groups:
        group = running_node_group(args.cluster.name, node_group_name_prefix(pool.name), region=args.region)
        if group is not None:
            releases[pool.name] = group.release_version
    return roll_problems(args, cluster.version if args.cluster.create else None, releases)
