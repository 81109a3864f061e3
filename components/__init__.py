"""Pulumi components that stand up GPU-training infrastructure on AWS EKS.

The package is installed as ``eks_gpu_training`` (its source folder in the repository is
``components/``). Its subpackages are layers, each importing only those below it: ``facts``,
``config``, ``aws`` (AWS resources), ``addons`` (what runs in the cluster), ``workloads``
(scheduling policy and training jobs), ``platform`` (one stack composed), ``offline`` (mock
engine, render, check) and ``verify`` (the seed's checklist run against a live cluster).
``labeler`` is the topology labeler's own program, built into its image.

Import what you need into your own Pulumi program::

    from eks_gpu_training import GpuTrainingPlatform, load_stack_config
    platform = GpuTrainingPlatform("gpu-training", load_stack_config())

Each name is imported from its layer when first used (PEP 562), so ``import eks_gpu_training`` on
its own loads nothing else: the local cluster's helper programs (``python -m
eks_gpu_training.local.node_health`` and the like) start without the Pulumi SDKs.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aws.eks_cluster import ClusterRef, EksCluster, EksClusterArgs
    from .aws.network import Network, NetworkArgs, NetworkRef, adopted_network
    from .aws.lustre_storage import LustreStorage, LustreStorageArgs, LustreVolume
    from .aws.node_config import node_config_user_data
    from .config import (
        ChartSource,
        ChartsConfig,
        ImagesConfig,
        ClusterConfig,
        ConfigError,
        DataRepositoryConfig,
        DisruptionBudgetConfig,
        FsxLustreConfig,
        GpuNodeGroupConfig,
        GpuOperatorConfig,
        GpuPoolConfig,
        GpuTrainingPlatformArgs,
        InClusterConfig,
        KarpenterConfig,
        KarpenterDisruptionConfig,
        KarpenterGpuNodePoolConfig,
        KueueConfig,
        TeamConfig,
        TeamQuotaConfig,
        JobSetConfig,
        TrainerConfig,
        LabelerResourcesConfig,
        NetworkConfig,
        NodeRepairConfig,
        NodeRepairOverrideConfig,
        PlacementGroupConfig,
        PriorityClassConfig,
        DcgmDiagConfig,
        NcclTestConfig,
        NodeMonitoringConfig,
        PreflightConfig,
        HealthGateConfig,
        Problem,
        ResourceQuotaConfig,
        SchedulingConfig,
        SmokeTestConfig,
        StorageConfig,
        SubnetConfig,
        SubnetRef,
        SystemNodeGroupConfig,
        S3BucketConfig,
        TopologyLabelerConfig,
        TrainingAppConfig,
        TrainingJobConfig,
        EnvFromSecretConfig,
        SecretKeyRefConfig,
        TrainingNamespaceConfig,
        TrainingServiceAccountConfig,
        VerifyConfig,
        MonitoringConfig,
        MultiKueueFleetConfig,
        MultiKueueWorkerConfig,
    )
    from .facts.node_os import GpuNodeOs, node_os_of
    from .addons.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_device_plugin_values, efa_needed
    from .aws.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
    from .aws.node_monitoring_agent import NodeMonitoringAgent, NodeMonitoringAgentArgs, node_monitoring_agent_configuration
    from .addons.dcgm_dashboard import dcgm_dashboard_config_map
    from .facts.nccl_baselines import NCCL_BASELINES, NcclBaseline, nccl_baseline
    from .workloads.nccl_results import judge_all_reduce, parse_all_reduce
    from .workloads.preflight_jobs import NcclTestSpec, dcgm_diag_job, nccl_test_objects
    from .workloads.preflight_checks import PreflightChecks, PreflightChecksArgs, PreflightPool, preflight_pools
    from .workloads.health_gate import HealthGate, HealthGateArgs
    from .addons.gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os, gpu_operator_values
    from .addons.gpu_node_pool import GpuNodePool, GpuNodePoolArgs, ec2_node_class_spec, node_pool_spec
    from .addons.karpenter import Karpenter, KarpenterArgs, karpenter_values
    from .addons.kueue import Kueue, KueueArgs, kueue_values
    from .addons.controller_ingress import ControllerIngress
    from .addons.job_apis import jobset_values, trainer_values
    from .addons.job_set_controller import JobSetController, JobSetControllerArgs
    from .addons.trainer_controller import TrainerController, TrainerControllerArgs
    from .workloads.job_sets import train_job, training_jobset, training_runtime
    from .workloads.kueue_queues import KueueQueues, KueueQueuesArgs, NamespaceQueues, PoolFlavor, TeamQueues, kueue_queues_args, pool_flavors, team_queues
    from .platform import PLATFORM_NAME, GpuTrainingInCluster, GpuTrainingInClusterArgs, GpuTrainingPlatform, load_stack_config, parse_platform_args, stack_program
    from .workloads.fleet_capacity import PoolCapacity, ResolvedQuota, fleet_gpu_capacity
    from .workloads.scheduling_policies import NamespacePolicy, SchedulingPolicies, SchedulingPoliciesArgs
    from .workloads.gpu_smoke_test import GpuSmokeTest, GpuSmokeTestArgs, SmokeTestPool
    from .addons.topology_labeler import TopologyLabeler, TopologyLabelerArgs
    from .addons.verifier_role import VerifierRole, VerifierRoleArgs, verifier_cluster_role
    from .addons.image_mirrors import image_mirrors
    from .aws.training_identity import TrainingIdentity, TrainingIdentityArgs, s3_access_policy
    from .workloads.training_storage import TrainingStorage, TrainingStorageArgs
    from .workloads.team_access import TeamAccess, TeamAccessArgs
    from .workloads.multikueue_manager import MultiKueueManager, MultiKueueManagerArgs, MultiKueueWorkerTarget
    from .workloads.multikueue_worker import MultiKueueWorker, MultiKueueWorkerArgs
    from .workloads.training_job import TrainingJob, TrainingJobArgs
    from .workloads.templates import rendezvous_service, training_job, training_pdb, training_pod_template
    from .workloads.node_fit import NodeLoad, NodeRoom, library_node_load, stack_node_load, training_room
    from .workloads.training_spec import SecretKeyRef, TrainingJobSpec

__all__ = [
    "ClusterConfig",
    "ClusterRef",
    "ConfigError",
    "DataRepositoryConfig",
    "DcgmDiagConfig",
    "DisruptionBudgetConfig",
    "EfaDevicePlugin",
    "EfaDevicePluginArgs",
    "EksCluster",
    "EksClusterArgs",
    "FsxLustreConfig",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "GpuNodeGroupConfig",
    "GpuNodeOs",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuOperator",
    "GpuOperatorArgs",
    "GpuOperatorConfig",
    "GpuPoolConfig",
    "GpuSmokeTest",
    "GpuSmokeTestArgs",
    "GpuTrainingPlatform",
    "GpuTrainingInCluster",
    "GpuTrainingInClusterArgs",
    "GpuTrainingPlatformArgs",
    "ChartSource",
    "ChartsConfig",
    "ImagesConfig",
    "InClusterConfig",
    "Karpenter",
    "KarpenterArgs",
    "KarpenterConfig",
    "KarpenterDisruptionConfig",
    "KarpenterGpuNodePoolConfig",
    "JobSetController",
    "JobSetControllerArgs",
    "TrainerController",
    "TrainerControllerArgs",
    "jobset_values",
    "trainer_values",
    "train_job",
    "training_jobset",
    "training_runtime",
    "Kueue",
    "KueueArgs",
    "KueueConfig",
    "TeamConfig",
    "TeamQuotaConfig",
    "JobSetConfig",
    "TrainerConfig",
    "KueueQueues",
    "KueueQueuesArgs",
    "MultiKueueFleetConfig",
    "MultiKueueManager",
    "MultiKueueManagerArgs",
    "MultiKueueWorker",
    "MultiKueueWorkerArgs",
    "MultiKueueWorkerConfig",
    "MultiKueueWorkerTarget",
    "TeamQueues",
    "team_queues",
    "LabelerResourcesConfig",
    "LustreStorage",
    "LustreStorageArgs",
    "LustreVolume",
    "NCCL_BASELINES",
    "NamespacePolicy",
    "NamespaceQueues",
    "NcclBaseline",
    "NcclTestConfig",
    "NcclTestSpec",
    "Network",
    "NetworkArgs",
    "NetworkConfig",
    "NetworkRef",
    "NodeMonitoringAgent",
    "NodeMonitoringAgentArgs",
    "NodeMonitoringConfig",
    "NodeRepairConfig",
    "NodeRepairOverrideConfig",
    "PLATFORM_NAME",
    "PlacementGroupConfig",
    "PoolCapacity",
    "PoolFlavor",
    "PreflightChecks",
    "PreflightChecksArgs",
    "PreflightConfig",
    "PreflightPool",
    "HealthGate",
    "HealthGateArgs",
    "HealthGateConfig",
    "PriorityClassConfig",
    "Problem",
    "ResolvedQuota",
    "ResourceQuotaConfig",
    "S3BucketConfig",
    "SchedulingConfig",
    "SchedulingPolicies",
    "SchedulingPoliciesArgs",
    "SmokeTestConfig",
    "SmokeTestPool",
    "StorageConfig",
    "SubnetConfig",
    "SubnetRef",
    "SystemNodeGroupConfig",
    "TopologyLabeler",
    "TopologyLabelerArgs",
    "TopologyLabelerConfig",
    "TrainingAppConfig",
    "TrainingIdentity",
    "TrainingIdentityArgs",
    "TrainingJob",
    "TrainingJobArgs",
    "TrainingJobConfig",
    "TrainingJobSpec",
    "SecretKeyRef",
    "EnvFromSecretConfig",
    "SecretKeyRefConfig",
    "NodeLoad",
    "NodeRoom",
    "library_node_load",
    "stack_node_load",
    "training_room",
    "TrainingNamespaceConfig",
    "TrainingServiceAccountConfig",
    "TrainingStorage",
    "TrainingStorageArgs",
    "VerifierRole",
    "VerifierRoleArgs",
    "TeamAccess",
    "TeamAccessArgs",
    "VerifyConfig",
    "MonitoringConfig",
    "ControllerIngress",
    "adopted_network",
    "dcgm_dashboard_config_map",
    "dcgm_diag_job",
    "ec2_node_class_spec",
    "efa_device_plugin_values",
    "efa_needed",
    "fleet_gpu_capacity",
    "gpu_node_os",
    "gpu_operator_values",
    "judge_all_reduce",
    "karpenter_values",
    "kueue_queues_args",
    "kueue_values",
    "image_mirrors",
    "load_stack_config",
    "stack_program",
    "nccl_baseline",
    "nccl_test_objects",
    "node_config_user_data",
    "node_monitoring_agent_configuration",
    "node_os_of",
    "node_pool_spec",
    "parse_all_reduce",
    "parse_platform_args",
    "pool_flavors",
    "preflight_pools",
    "rendezvous_service",
    "s3_access_policy",
    "training_job",
    "training_pdb",
    "training_pod_template",
    "verifier_cluster_role",
]


@functools.cache
def _module_of() -> dict[str, str]:
    """Each public name's module, as the ``TYPE_CHECKING`` imports above name it: they are what type
    checkers and editors read, and the one place a name's home is written."""
    tree = ast.parse(Path(__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.name: str(node.module) for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_module_of()[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
