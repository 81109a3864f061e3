"""Pulumi components that stand up GPU-training infrastructure on AWS EKS.

Import what you need into your own Pulumi program::

    from components import GpuTrainingPlatform, load_stack_config
    platform = GpuTrainingPlatform("gpu-training", load_stack_config())
"""

from .cluster import ClusterRef, EksCluster, EksClusterArgs
from .config import (
    ConfigError,
    GpuNodeGroupConfig,
    GpuTrainingPlatformArgs,
    Problem,
    load_stack_config,
    parse_platform_args,
)
from .gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from .platform import GpuTrainingPlatform

__all__ = [
    "ClusterRef",
    "ConfigError",
    "EksCluster",
    "EksClusterArgs",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "GpuNodeGroupConfig",
    "GpuTrainingPlatform",
    "GpuTrainingPlatformArgs",
    "Problem",
    "load_stack_config",
    "parse_platform_args",
]
