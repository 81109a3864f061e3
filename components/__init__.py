"""Pulumi components that stand up GPU-training infrastructure on AWS EKS.

The package is installed as ``eks_gpu_training`` (its source folder in the repository is
``components/``). Its subpackages are layers, each importing only those below it: ``facts``,
``config``, ``aws`` (AWS resources), ``addons`` (what runs in the cluster), ``workloads``
(scheduling policy and training jobs), ``platform`` (one stack composed), and ``offline`` (mock
engine, render, check). ``labeler`` is the topology labeler's own program, built into its image.

Import what you need into your own Pulumi program::

    from eks_gpu_training import GpuTrainingPlatform, load_stack_config
    platform = GpuTrainingPlatform("gpu-training", load_stack_config())
"""

from .aws.cluster import ClusterRef, EksCluster, EksClusterArgs
from .aws.network import Network, NetworkArgs, NetworkRef, adopted_network
from .aws.storage import LustreStorage, LustreStorageArgs, node_config_user_data
from .config import (
    ConfigError,
    FsxLustreConfig,
    NetworkConfig,
    StorageConfig,
    GpuNodeGroupConfig,
    GpuOperatorConfig,
    GpuTrainingPlatformArgs,
    KarpenterConfig,
    KarpenterGpuNodePoolConfig,
    KueueConfig,
    Problem,
    S3BucketConfig,
    TopologyLabelerConfig,
)
from .addons.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_device_plugin_values, efa_needed
from .aws.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from .addons.gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os, gpu_operator_values
from .addons.gpu_node_pool import GpuNodePool, GpuNodePoolArgs, ec2_node_class_spec, node_pool_spec
from .addons.karpenter import Karpenter, KarpenterArgs, karpenter_values
from .addons.kueue import Kueue, KueueArgs, kueue_values
from .workloads.queues import KueueQueues, KueueQueuesArgs, NamespaceQueues, kueue_queues_args, pool_flavors
from .platform import PLATFORM_NAME, GpuTrainingPlatform, load_stack_config, parse_platform_args
from .workloads.fleet_capacity import fleet_gpu_capacity
from .workloads.scheduling_policies import SchedulingPolicies, SchedulingPoliciesArgs
from .workloads.smoke_test import GpuSmokeTest, GpuSmokeTestArgs
from .addons.topology_labeler import TopologyLabeler, TopologyLabelerArgs
from .aws.training_identity import TrainingIdentity, TrainingIdentityArgs, s3_access_policy
from .workloads.storage import TrainingStorage, TrainingStorageArgs
from .workloads.training_job import TrainingJob, TrainingJobArgs
from .workloads.templates import (
    TrainingJobSpec,
    rendezvous_service,
    training_job,
    training_pdb,
    training_pod_template,
)

__all__ = [
    "adopted_network",
    "ClusterRef",
    "ConfigError",
    "ec2_node_class_spec",
    "efa_device_plugin_values",
    "efa_needed",
    "EfaDevicePlugin",
    "EfaDevicePluginArgs",
    "EksCluster",
    "EksClusterArgs",
    "fleet_gpu_capacity",
    "FsxLustreConfig",
    "gpu_node_os",
    "gpu_operator_values",
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
    "karpenter_values",
    "KarpenterArgs",
    "KarpenterConfig",
    "KarpenterGpuNodePoolConfig",
    "load_stack_config",
    "LustreStorage",
    "LustreStorageArgs",
    "Network",
    "NetworkArgs",
    "NetworkConfig",
    "NetworkRef",
    "node_config_user_data",
    "node_pool_spec",
    "parse_platform_args",
    "Kueue",
    "KueueArgs",
    "KueueConfig",
    "KueueQueues",
    "KueueQueuesArgs",
    "NamespaceQueues",
    "Problem",
    "rendezvous_service",
    "s3_access_policy",
    "S3BucketConfig",
    "SchedulingPolicies",
    "SchedulingPoliciesArgs",
    "StorageConfig",
    "TopologyLabeler",
    "TopologyLabelerArgs",
    "TopologyLabelerConfig",
    "TrainingIdentity",
    "TrainingIdentityArgs",
    "TrainingJob",
    "TrainingJobArgs",
    "TrainingJobSpec",
    "PLATFORM_NAME",
    "kueue_queues_args",
    "kueue_values",
    "pool_flavors",
    "training_job",
    "training_pdb",
    "training_pod_template",
    "TrainingStorage",
    "TrainingStorageArgs",
]
