"""The stack configuration: one typed model, its defaults, and every rule it must satisfy.

Every key a stack file may set is a field below, with its type, its default (here and nowhere else)
and a one-line docstring, which also feeds ``docs/configuration.md``. ``platform.load_stack_config``
returns a fully-typed ``GpuTrainingPlatformArgs`` or raises one ``ConfigError`` listing every
problem with its key path, before any resource is registered. Rules over more than one key live in
``validate_platform`` and its ``validate_*`` helpers, which components call too, so the rules hold
whether a stack file or another program builds the arguments.

A module per part of the stack, imports running one way (``tests/unit/project/test_layers.py``
checks for circles): ``problems`` and ``inputs`` import nothing of the package; ``arguments`` and
``documented`` report through ``problems``; ``base`` holds constants, the base model and AWS enum
checks; ``images`` and ``gpu_sharing`` are shared helpers; then the sections, each importing only
those before it (``access``, ``network``, ``cluster``, ``node_repair``, ``kueue``, ``verify``,
``storage``, ``pool_placement``, ``pools``, ``karpenter``, ``addons``, ``scheduling``, ``health``);
last ``stack``, the whole stack's arguments and the rules spanning its sections. Reading a stack
and the rules that span layers live in ``platform``.
"""

from .problems import ConfigError, Problem, ProblemSink
from ..facts.gpu_nodes import GPU_NODE_ROLE_LABEL, SYSTEM_NODE_ROLE_LABEL
from .base import (
    validate_tags,
    supported_version,
    Quantity,
    PROJECT,
    NVIDIA_AMI_TYPES,
    END_OF_LIFE_AMI_TYPES,
    SUPPORTED_KUBERNETES_VERSIONS,
    InstanceType,
    AmiType,
)
from .network_settings import (
    ADDRESSES_PER_EFA_NODE,
    SubnetConfig,
    SubnetRef,
    SubnetLayout,
    NetworkConfig,
    network_zones,
    planned_subnets,
    subnet_layout,
    validate_network,
)
from .storage_settings import (
    DataRepositoryConfig,
    FsxLustreConfig,
    StorageConfig,
    fsx_zone,
    validate_fsx_file_system,
    validate_storage,
)
from .cluster_settings import (
    ClusterConfig,
    SystemNodeGroupConfig,
    WORLD_CIDR,
    ENDPOINT_DOC,
    RELEASE_VERSION_PATTERN,
    validate_admin_principals,
    validate_cluster_endpoint,
)
from .node_auto_repair import (
    NODE_MONITORING_CONDITIONS,
    DEFAULT_MAX_PARALLEL_NODES_REPAIRED,
    DEFAULT_MAX_UNHEALTHY_PERCENTAGE,
    NodeRepairOverrideConfig,
    NodeRepairConfig,
    node_repair_settings,
)
from .pools import (
    GpuPoolConfig,
    KARPENTER_CAPACITY_TYPES,
    SPOT_REFUSAL,
    PlacementGroupConfig,
    efa_on,
    GpuNodeGroupConfig,
    pool_subnets,
    subnet_problems,
    validate_gpu_node_group,
)
from .karpenter_settings import (
    KARPENTER_CHART_VERSION,
    KARPENTER_CHART_VERSIONS,
    DisruptionBudgetConfig,
    DEFAULT_DISRUPTION_BUDGETS,
    KarpenterDisruptionConfig,
    KarpenterGpuNodePoolConfig,
    KarpenterConfig,
    validate_karpenter_gpu_node_pool,
    validate_karpenter,
)
from .image_references import ImageReference, image_reference_problem
from .gpu_sharing import GPU_SHARING_REFUSED, GPU_SHARING_NODE_LABELS, MIG_DISABLED_CONFIG
from .addon_settings import (
    GPU_OPERATOR_CHART_VERSIONS,
    GpuOperatorConfig,
    LabelerResourcesConfig,
    TopologyLabelerConfig,
    validate_gpu_node_os,
    validate_gpu_operator,
    validate_topology_labeler,
)
from .access import S3_BUCKET_NAME, S3BucketConfig, TrainingServiceAccountConfig
from .kueue_settings import (
    KUEUE_CHART_VERSIONS,
    PODS_READY_TIMEOUT_MINUTES,
    RECOVERY_TIMEOUT_MINUTES,
    TOPOLOGY_MODES,
    KueueConfig,
)
from .job_api_settings import JOB_KINDS, JOBSET_CHART_VERSIONS, TRAINER_CHART_VERSIONS, JobSetConfig, TrainerConfig
from .monitoring import MonitoringConfig
from .multikueue import MultiKueueFleetConfig, MultiKueueWorkerConfig
from .team_settings import TEAM_COHORT, TeamConfig, TeamQuotaConfig
from .scheduling import (
    PRIORITY_VALUE_MAX,
    TRAINING_APP_NAME_MAX,
    RESERVED_NAMESPACES,
    PriorityClassConfig,
    DEFAULT_PRIORITY_CLASSES,
    ResourceQuotaConfig,
    TrainingNamespaceConfig,
    TORCHRUN_PORT,
    TrainingJobConfig,
    TrainingAppConfig,
    SchedulingConfig,
    EnvFromSecretConfig,
    SecretKeyRefConfig,
    SMOKE_TEST_IMAGE,
    SmokeTestConfig,
)
from .health_settings import (
    DCGM_DIAG_LEVELS,
    DCGM_IMAGE,
    NCCL_MAX_BYTES,
    NODE_MONITORING_AGENT_ADDON,
    DcgmDiagConfig,
    HealthGateConfig,
    NcclTestConfig,
    NodeMonitoringConfig,
    PreflightConfig,
    validate_health_gate,
)
from .verify import VERIFIER_GROUP, VerifyConfig
from .chart_settings import ChartSource, ChartsConfig
from .image_references import ImagesConfig
from .in_cluster_settings import InClusterConfig
from .stack_settings import (
    GpuTrainingPlatformArgs,
    gpu_pool_ami_types,
    gpu_pool_zones,
    validate_platform,
)

__all__ = [
    "TEAM_COHORT",
    "TeamConfig",
    "TeamQuotaConfig",
    "JOB_KINDS",
    "JOBSET_CHART_VERSIONS",
    "TRAINER_CHART_VERSIONS",
    "JobSetConfig",
    "MonitoringConfig",
    "TrainerConfig",
    "supported_version",
    "GpuPoolConfig",
    "PROJECT",
    "GPU_NODE_ROLE_LABEL",
    "SYSTEM_NODE_ROLE_LABEL",
    "NVIDIA_AMI_TYPES",
    "END_OF_LIFE_AMI_TYPES",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "ConfigError",
    "Problem",
    "InstanceType",
    "AmiType",
    "ProblemSink",
    "SubnetConfig",
    "NetworkConfig",
    "DataRepositoryConfig",
    "FsxLustreConfig",
    "StorageConfig",
    "fsx_zone",
    "validate_storage",
    "validate_fsx_file_system",
    "ADDRESSES_PER_EFA_NODE",
    "SubnetRef",
    "SubnetLayout",
    "network_zones",
    "planned_subnets",
    "subnet_layout",
    "validate_network",
    "ClusterConfig",
    "SystemNodeGroupConfig",
    "WORLD_CIDR",
    "ENDPOINT_DOC",
    "RELEASE_VERSION_PATTERN",
    "validate_admin_principals",
    "validate_cluster_endpoint",
    "NODE_MONITORING_CONDITIONS",
    "DEFAULT_MAX_PARALLEL_NODES_REPAIRED",
    "DEFAULT_MAX_UNHEALTHY_PERCENTAGE",
    "NodeRepairOverrideConfig",
    "NodeRepairConfig",
    "node_repair_settings",
    "KARPENTER_CAPACITY_TYPES",
    "SPOT_REFUSAL",
    "PlacementGroupConfig",
    "efa_on",
    "GpuNodeGroupConfig",
    "pool_subnets",
    "subnet_problems",
    "validate_gpu_node_group",
    "KARPENTER_CHART_VERSION",
    "KARPENTER_CHART_VERSIONS",
    "DisruptionBudgetConfig",
    "DEFAULT_DISRUPTION_BUDGETS",
    "KarpenterDisruptionConfig",
    "KarpenterGpuNodePoolConfig",
    "KarpenterConfig",
    "validate_karpenter_gpu_node_pool",
    "validate_karpenter",
    "GPU_OPERATOR_CHART_VERSIONS",
    "ImageReference",
    "image_reference_problem",
    "GPU_SHARING_REFUSED",
    "GPU_SHARING_NODE_LABELS",
    "MIG_DISABLED_CONFIG",
    "GpuOperatorConfig",
    "LabelerResourcesConfig",
    "TopologyLabelerConfig",
    "gpu_pool_ami_types",
    "validate_gpu_node_os",
    "validate_gpu_operator",
    "validate_topology_labeler",
    "KUEUE_CHART_VERSIONS",
    "PODS_READY_TIMEOUT_MINUTES",
    "RECOVERY_TIMEOUT_MINUTES",
    "TOPOLOGY_MODES",
    "KueueConfig",
    "MultiKueueFleetConfig",
    "MultiKueueWorkerConfig",
    "PRIORITY_VALUE_MAX",
    "TRAINING_APP_NAME_MAX",
    "S3_BUCKET_NAME",
    "S3BucketConfig",
    "TrainingServiceAccountConfig",
    "RESERVED_NAMESPACES",
    "Quantity",
    "PriorityClassConfig",
    "DEFAULT_PRIORITY_CLASSES",
    "ResourceQuotaConfig",
    "TrainingNamespaceConfig",
    "TORCHRUN_PORT",
    "TrainingJobConfig",
    "TrainingAppConfig",
    "EnvFromSecretConfig",
    "SecretKeyRefConfig",
    "SchedulingConfig",
    "SMOKE_TEST_IMAGE",
    "SmokeTestConfig",
    "DCGM_DIAG_LEVELS",
    "DCGM_IMAGE",
    "NCCL_MAX_BYTES",
    "NODE_MONITORING_AGENT_ADDON",
    "DcgmDiagConfig",
    "NcclTestConfig",
    "NodeMonitoringConfig",
    "PreflightConfig",
    "HealthGateConfig",
    "validate_health_gate",
    "VERIFIER_GROUP",
    "VerifyConfig",
    "ChartSource",
    "ChartsConfig",
    "ImagesConfig",
    "InClusterConfig",
    "GpuTrainingPlatformArgs",
    "gpu_pool_zones",
    "validate_platform",
    "validate_tags",
]
