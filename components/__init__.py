"""Pulumi components that stand up GPU-training infrastructure on AWS EKS.

Import what you need into your own Pulumi program::

    from components import GpuTrainingPlatform, load_stack_config
    platform = GpuTrainingPlatform("gpu-training", load_stack_config())
"""

from .cluster import ClusterRef, EksCluster, EksClusterArgs
from .config import (
    ConfigError,
    GpuNodeGroupConfig,
    GpuOperatorConfig,
    GpuTrainingPlatformArgs,
    KarpenterConfig,
    KarpenterGpuNodePoolConfig,
    Problem,
    TopologyLabelerConfig,
    load_stack_config,
    parse_platform_args,
)
from .efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_device_plugin_values, efa_needed
from .gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from .gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os, gpu_operator_values
from .gpu_node_pool import GpuNodePool, GpuNodePoolArgs, ec2_node_class_spec, node_pool_spec
from .karpenter import Karpenter, KarpenterArgs, karpenter_values
from .platform import GpuTrainingPlatform
from .fleet_capacity import fleet_gpu_capacity
from .scheduling_policies import SchedulingPolicies, SchedulingPoliciesArgs
from .smoke_test import GpuSmokeTest, GpuSmokeTestArgs
from .topology_labeler import TopologyLabeler, TopologyLabelerArgs
from .training_job import TrainingJob, TrainingJobArgs
from .workloads import (
    TrainingJobSpec,
    rendezvous_service,
    training_job,
    training_pdb,
    training_pod_template,
)

__all__ = [
    "ClusterRef",
    "ConfigError",
    "EfaDevicePlugin",
    "EfaDevicePluginArgs",
    "EksCluster",
    "EksClusterArgs",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "GpuNodeGroupConfig",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "GpuOperatorConfig",
    "GpuSmokeTest",
    "GpuSmokeTestArgs",
    "GpuTrainingPlatform",
    "GpuTrainingPlatformArgs",
    "Karpenter",
    "KarpenterArgs",
    "KarpenterConfig",
    "KarpenterGpuNodePoolConfig",
    "Problem",
    "SchedulingPolicies",
    "SchedulingPoliciesArgs",
    "TopologyLabeler",
    "TopologyLabelerArgs",
    "TopologyLabelerConfig",
    "TrainingJob",
    "TrainingJobArgs",
    "TrainingJobSpec",
    "ec2_node_class_spec",
    "efa_device_plugin_values",
    "efa_needed",
    "fleet_gpu_capacity",
    "gpu_node_os",
    "gpu_operator_values",
    "karpenter_values",
    "load_stack_config",
    "node_pool_spec",
    "parse_platform_args",
    "rendezvous_service",
    "training_job",
    "training_pdb",
    "training_pod_template",
]
