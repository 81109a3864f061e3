"""The stack configuration: one typed model, its defaults, and every rule it must satisfy.

Every key a stack file may set is a field below, with its type, its default (here and nowhere
else) and a one-line description (the attribute docstring, which also feeds the generated
configuration reference, ``docs/configuration.md``). ``platform.load_stack_config`` reads the stack's configuration and either returns
a fully-typed ``GpuTrainingPlatformArgs`` or raises one ``ConfigError`` listing every problem with
its key path and what is allowed. It runs before any resource is registered, so a bad stack file
creates nothing.

Rules that involve more than one key live in ``validate_platform`` and the ``validate_*`` helpers
it calls; components call the same helpers, so the rules hold whether a stack file or another
Pulumi program builds the arguments.

The model is one package, a module per part of the stack, and its imports run one way (bottom to
top; ``tests/unit/project/test_layers.py`` checks that no package's modules import each other in a circle):

1. ``problems`` (a problem, ``ConfigError``) and ``inputs`` (the field types of values another
   resource can supply: a string, or a ``pulumi.Output`` in a program) import nothing of the
   package.
2. ``arguments`` (the check of a dict given where a component expects a model) and ``documented``
   (the ``help()`` text of components' arguments) report through ``problems``.
3. ``base``: constants, the base model (whose ``help()`` text ``documented`` writes), AWS enum
   checks.
4. Helpers more than one section shares: ``images`` (image references) and ``gpu_sharing`` (why
   MIG and time-slicing are refused, and the pool labels that would ask for them).
5. The sections, each importing only the modules above and sections before it: ``access``,
   ``network``, ``cluster``, ``node_repair``, ``kueue``, ``verify`` (the verify command's read-only
   access); ``storage`` (uses ``access``, ``network``); ``pools`` (managed GPU pools and the rules
   all GPU pools share; uses ``network``, ``cluster``, ``node_repair``); ``karpenter`` (uses
   ``pools``); ``addons`` (GPU Operator, topology labeler); ``scheduling`` (uses ``access``);
   ``health`` (node monitoring, pre-flight checks).
6. ``stack``: the whole stack's arguments and the rules that span its sections.

Reading a stack and the rules that span layers live in ``platform``.
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
from .network import (
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
from .storage import (
    DataRepositoryConfig,
    FsxLustreConfig,
    StorageConfig,
    fsx_zone,
    validate_fsx_file_system,
    validate_storage,
)
from .cluster import (
    ClusterConfig,
    SystemNodeGroupConfig,
    WORLD_CIDR,
    ENDPOINT_DOC,
    RELEASE_VERSION_PATTERN,
    validate_admin_principals,
    validate_cluster_endpoint,
)
from .node_repair import (
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
from .karpenter import (
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
from .images import ImageReference, image_reference_problem
from .gpu_sharing import GPU_SHARING_REFUSED, GPU_SHARING_NODE_LABELS, MIG_DISABLED_CONFIG
from .addons import (
    GPU_OPERATOR_CHART_VERSIONS,
    GpuOperatorConfig,
    LabelerResourcesConfig,
    TopologyLabelerConfig,
    validate_gpu_node_os,
    validate_gpu_operator,
    validate_topology_labeler,
)
from .access import S3_BUCKET_NAME, S3BucketConfig, TrainingServiceAccountConfig
from .kueue import (
    KUEUE_CHART_VERSIONS,
    PODS_READY_TIMEOUT_MINUTES,
    RECOVERY_TIMEOUT_MINUTES,
    TOPOLOGY_MODES,
    KueueConfig,
)
from .job_apis import JOB_KINDS, JOBSET_CHART_VERSIONS, TRAINER_CHART_VERSIONS, JobSetConfig, TrainerConfig
from .monitoring import MonitoringConfig
from .teams import TEAM_COHORT, TeamConfig, TeamQuotaConfig
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
from .health import (
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
from .charts import ChartsConfig
from .images import ImagesConfig
from .in_cluster import InClusterConfig
from .stack import (
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
    "ChartsConfig",
    "ImagesConfig",
    "InClusterConfig",
    "GpuTrainingPlatformArgs",
    "gpu_pool_zones",
    "validate_platform",
    "validate_tags",
]
