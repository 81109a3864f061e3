"""The stack program every stack file of this project runs: read and check the stack's
configuration, build the platform (or only its in-cluster half), export its outputs.

The project's ``__main__.py`` is this program; a project of one's own that needs nothing more (only
stack files and ``Pulumi.yaml``) can run it too, and the offline tools (render, the local cluster)
run it for a project that has no ``__main__.py``.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from ..config import ConfigError
from .names import PLATFORM_NAME
from .multikueue_fleet import KUBECONFIG_OUTPUT, fleet_problems, project_worker_args
from .gpu_training_platform import GpuTrainingPlatform
from .gpu_training_in_cluster import GpuTrainingInCluster
from .loading import load_stack_config
from .stack_files import find_project, stack_config_dir


def stack_program() -> None:
    # images.lock beside the stack files: Pulumi runs the program in its project's folder.
    project_dir = find_project(Path.cwd())
    config = load_stack_config(stack_dir=stack_config_dir(project_dir) if project_dir is not None else None)
    # A manager's workers whose stack files are in this project mirror its queues, checked before anything.
    problems = fleet_problems(config, project_worker_args(config, project_dir))
    if problems:
        raise ConfigError(problems)
    if config.in_cluster.enabled:
        # inCluster: only the in-cluster half, through a kubeconfig; nothing in AWS.
        in_cluster = GpuTrainingInCluster(PLATFORM_NAME, config)
        pulumi.export("gpuOperatorStatus", in_cluster.gpu_operator_status)
        if in_cluster.multikueue_worker is not None:
            pulumi.export(KUBECONFIG_OUTPUT, in_cluster.multikueue_worker.kubeconfig)
        return
    platform = GpuTrainingPlatform(PLATFORM_NAME, config)
    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("gpuNodeGroupNames", platform.gpu_node_group_names)
    pulumi.export("placementGroupNames", platform.placement_group_names)
    pulumi.export("karpenterNodePoolNames", platform.karpenter_node_pool_names)
    pulumi.export("karpenterPlacementGroupNames", platform.karpenter_placement_group_names)
    if platform.multikueue_worker is not None:
        pulumi.export(KUBECONFIG_OUTPUT, platform.multikueue_worker.kubeconfig)
