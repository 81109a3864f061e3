"""A change that rolls GPU nodes under a running job is refused unless the pool opts in.

An update rolls a managed pool's nodes when it changes the node group's Kubernetes version, its
AMI release or its launch template (``aws.node_group_rolls`` says which differences do). A running
job's PodDisruptionBudget keeps its pods, so EKS gives up after 15 minutes with
``PodEvictionFailure`` (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html),
after a created cluster's control plane has already moved, which does not go back. A preview
cannot see whether a job runs, so every roll of a running pool needs ``forceUpdateVersion: true``,
with which EKS evicts the protected pods: stop or hold the pool's jobs first, or accept losing them.

Refused without it, for each running managed GPU pool: a created cluster's
``cluster.kubernetesVersion`` other than the running control plane's (unless EKS upgraded it
itself, ``aws.control_plane_version``); a node group behind the version it is sent (a created
cluster's, or an adopted cluster's live one); a pinned ``releaseVersion`` other than the running
one; a launch-template change (``fastImagePull``, ``storage.instanceStore``, ``efa``, ...), or a
node group not on its template's latest version.

The running cluster, node groups and launch templates are read (DescribeCluster,
DescribeNodegroup, DescribeLaunchTemplateVersions) before anything is registered; a first
deployment has none, and a cluster name that is an Output cannot be looked up.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ..aws.gpu_node_group import node_group_name_prefix, planned_launch_template
from ..aws.control_plane_version import upgraded_by_eks
from ..aws.node_group_rolls import PlannedNodeGroup, RunningNodeGroup, roll_problem, roll_reasons, running_state
from ..aws.node_group_sizes import running_cluster, running_node_group
from ..config import GpuTrainingPlatformArgs, Problem


def roll_problems(
    args: GpuTrainingPlatformArgs, running_version: Optional[str], running_groups: Mapping[str, RunningNodeGroup]
) -> list[Problem]:
    """Pools a change would roll without ``forceUpdateVersion``, one problem each with every reason.
    ``running_version`` is the running cluster's Kubernetes version; ``running_groups`` maps the pool
    names of running node groups to what they run."""
    create = args.cluster.create
    # A control plane EKS upgraded itself (supportType STANDARD) stays where it is (EksCluster warns).
    upgraded = upgraded_by_eks(args.cluster.kubernetes_version, running_version, args.cluster.support_type)
    cluster_moves = create and running_version is not None and running_version != args.cluster.kubernetes_version and not upgraded
    raid0 = args.storage.instance_store == "raid0"
    problems = []
    for i, pool in enumerate(args.gpu_node_groups):
        if pool.force_update_version or pool.name not in running_groups:
            continue
        reasons = []
        if cluster_moves:
            # The node group follows the control plane; the move is the reason, said once.
            reasons.append(f"cluster.kubernetesVersion moves the running cluster from {running_version} to {args.cluster.kubernetes_version}")
            version, source = None, ""
        elif create:
            version = args.cluster.kubernetes_version
            source = f"cluster.kubernetesVersion is {version} (an earlier upgrade stopped before the node group)"
        else:
            version = running_version
            source = f"the adopted cluster runs {version} (its owners upgraded the control plane; node groups follow it)"
        cluster_name = args.cluster.name
        assert isinstance(cluster_name, str), "running groups are read by a cluster name that is no Output"  # noqa: S101 - an invariant of the caller
        planned = PlannedNodeGroup(
            version=version,
            version_source=source,
            release_version=pool.release_version,
            launch_template=planned_launch_template(pool, cluster_name, raid0),
        )
        reasons += roll_reasons(planned, running_groups[pool.name])
        if reasons:
            problems.append(roll_problem(f"gpuNodeGroups[{i}].forceUpdateVersion", reasons, control_plane_moves=cluster_moves))
    return problems


def live_roll_problems(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """``roll_problems`` for what runs now, read from EKS and EC2; nothing for a cluster not created
    yet, or one whose name is an Output."""
    if not args.gpu_node_groups or all(p.force_update_version for p in args.gpu_node_groups):
        return []
    cluster = running_cluster(args.cluster.name, region=args.region)
    if cluster is None:
        return []
    groups = {}
    for pool in args.gpu_node_groups:
        if pool.force_update_version:
            continue
        group = running_node_group(args.cluster.name, node_group_name_prefix(pool.name), region=args.region)
        if group is not None:
            groups[pool.name] = running_state(group, region=args.region)
    return roll_problems(args, cluster.version, groups)
