"""Scheduling policy and training workloads' configuration: priority classes, namespaces and
their quotas, training apps, the GPU smoke test."""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .access import TrainingServiceAccountConfig
from .image_references import ImageReference
from .inputs import InputText
from .team_settings import TeamConfig
from .base import _DNS_LABEL, _DNS_SUBDOMAIN, InstanceType, Quantity, _Model

PRIORITY_VALUE_MAX = 1_000_000_000
"""Highest value a user-defined PriorityClass may have; larger values are reserved for the system
classes (kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption)."""

TRAINING_APP_NAME_MAX = 50
"""Longest training app name: the seed's ``app: <name>-multi`` label value and the Indexed Job's pod
hostnames ``<name>-r<revision>-<index>`` must stay within the 63-character DNS label limit."""

TRAINING_JOB_REVISION_MAX = 9999
"""Highest job revision: with a 50-character name, ``-r9999`` and an index of up to five digits the
pod hostname still fits 63 characters."""

MAX_RESTARTS = 3
"""Group restarts of a JobSet or TrainJob before it fails: a rank lost to a node fault restarts every
rank from the last checkpoint, and a fault that repeats (a bad image, a bug) fails the job after
three tries instead of looping."""
MAX_RESTARTS_LIMIT = 100
"""Most group restarts a job may ask for."""

RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes owns; a training quota there would throttle the control plane's own pods."""



class PriorityClassConfig(_Model):
    """A PriorityClass: pods that name it are scheduled (and preempt) ahead of lower values."""

    name: str = Field(pattern=_DNS_SUBDOMAIN, max_length=253)
    """PriorityClass name, referenced by pods' priorityClassName (required)."""
    value: int = Field(ge=-2147483648, le=PRIORITY_VALUE_MAX)
    """Priority; higher runs first. At most 1000000000 (larger values are reserved for system classes) (required)."""
    description: str = ""
    """What the class is for. Default: empty."""
    global_default: bool = False
    """Give this priority to pods that name no class. Default: false (at most one class may be true)."""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    """Whether pods of this class evict lower-priority pods to make room. Default: PreemptLowerPriority."""

    @field_validator("name")
    @classmethod
    def _not_system(cls, value: str) -> str:
        if value.startswith("system-"):
            raise PydanticCustomError("reserved", f"'{value}': the 'system-' prefix is reserved for Kubernetes' own classes")
        return value


DEFAULT_PRIORITY_CLASSES = (
    PriorityClassConfig(name="training-critical", value=1_000_000, description="Priority class for RL training jobs"),
    PriorityClassConfig(name="evaluation-normal", value=500_000, description="Priority class for evaluation/benchmarking jobs"),
    PriorityClassConfig(name="data-prep-low", value=100_000, description="Priority class for data preparation jobs"),
)
"""The seed's three classes, none of them the global default."""


class ResourceQuotaConfig(_Model):
    """The ResourceQuota of a training namespace. Unset amounts default to what the stack's GPU fleet can provide."""

    gpus: Optional[int] = Field(default=None, ge=0)
    """`requests.nvidia.com/gpu`; at least one node's GPUs and at most the fleet's. Default: the fleet's GPU capacity (each managed pool's maxSize × GPUs per node, plus each Karpenter pool's gpuLimit)."""
    cpu: Optional[Quantity] = None
    """`requests.cpu`. Default: the fleet's vCPUs (each pool's most nodes × vCPUs per node)."""
    memory: Optional[Quantity] = None
    """`requests.memory`. Default: the fleet's memory (each pool's most nodes × memory per node)."""
    persistent_volume_claims: int = Field(default=5, ge=0)
    """`persistentvolumeclaims` the namespace's users may make; the stack's FSx claim comes on top. Default: 5."""


class TrainingNamespaceConfig(_Model):
    """A namespace training runs in, with its ResourceQuota."""

    name: str = Field(pattern=_DNS_LABEL)
    """Namespace name (required)."""
    quota: ResourceQuotaConfig = ResourceQuotaConfig()
    """Resource quota. Default: the fleet's GPU, CPU and memory capacity, 5 PVCs."""
    pod_security: Literal["baseline", "privileged"] = "baseline"
    """Pod Security Standard enforced in the namespace; `privileged` is needed for apps with hostNetwork. Default: baseline."""


TORCHRUN_PORT = 29500
"""torchrun's default rendezvous (master) port."""


class SecretKeyRefConfig(_Model):
    """A key of a Kubernetes Secret in the app's namespace."""

    name: str = Field(pattern=_DNS_SUBDOMAIN, max_length=253)
    """The Secret's name (required)."""
    key: str = Field(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)
    """The key within it (required)."""


class EnvFromSecretConfig(_Model):
    """An environment variable whose value the kubelet reads from a Secret when the pod starts: the
    value never appears in the stack's configuration, its state or the pod spec."""

    secret_key_ref: SecretKeyRefConfig
    """The Secret key (required)."""


class TrainingJobConfig(_Model):
    """How the stack runs a training app: its image and command, and the settings of the job its `kind` makes (every kind gives torchrun a rendezvous through a headless Service)."""

    image: ImageReference
    """Container image of the training code (required)."""
    command: list[str] = []
    """Container command. Default: the image's entrypoint."""
    args: list[str] = []
    """Container arguments. Default: none."""
    env: dict[str, Union[InputText, EnvFromSecretConfig]] = {}
    """Extra environment variables, each a literal value or `{secretKeyRef: {name, key}}`, a key of a Secret in the app's namespace (the PET_* torchrun variables, FI_PROVIDER and CHECKPOINT_DIR are set for you). Default: none."""
    suspend: bool = False
    """Hold the Job at creation: without Kueue it is created suspended (patch `spec.suspend` to false to start it); with Kueue it waits in the namespace's held LocalQueue until labelled `kueue.x-k8s.io/queue-name=gpu-queue`. `<job>` is `<name>`, or `<name>-r<revision>`. At creation only. Default: false."""
    backoff_limit: int = Field(default=0, ge=0)
    """Pod failures tolerated before the Job fails (a failed rank breaks the whole group, so retries rarely help). Default: 0."""
    rendezvous_port: int = Field(default=TORCHRUN_PORT, ge=1, le=65535)
    """Port of the torchrun rendezvous on rank 0. Default: 29500."""
    max_restarts: int = Field(default=MAX_RESTARTS, ge=0, le=MAX_RESTARTS_LIMIT)
    """Times the whole group is restarted when one rank fails, before the job fails (JobSet's `failurePolicy.maxRestarts`; `kind: JobSet` and `TrainJob` only: a Job's ranks are not restarted together, `backoffLimit` retries one pod). Default: 3."""
    revision: int = Field(default=1, ge=1, le=TRAINING_JOB_REVISION_MAX)
    """Run of the job. A Job's pod template cannot change, so `pulumi up` leaves a revision's Job alone; raise the revision to run changed settings (or the same again): it creates `<name>-r<revision>` beside the previous Job, which keeps running outside the stack. Default: 1 (the Job is named `<name>`)."""


class TrainingAppConfig(_Model):
    """A training app: its pods get the training pod template and a PodDisruptionBudget; with `job`, the stack also runs it."""

    name: str = Field(pattern=_DNS_LABEL, max_length=TRAINING_APP_NAME_MAX)
    """App name; pods are labelled `app: <name>-multi` (multi-node) or `app: <name>` (single-node) (required)."""
    nodes: int = Field(ge=1)
    """Nodes (= pods, one per node) the app runs on (required)."""
    namespace: Optional[str] = None
    """Namespace among `scheduling.namespaces`. Default: the first one."""
    pool: Optional[str] = None
    """GPU pool the app's defaults come from (a `gpuNodeGroups[].name` or `karpenter.gpuNodePools[].name`); its pods may land on any GPU node of their instance types. Default: the only pool (required when there are several)."""
    instance_types: Optional[list[InstanceType]] = None
    """Instance types the pods may land on, among the pool's. Default: all of the pool's."""
    gpus_per_node: Optional[int] = Field(default=None, ge=1)
    """`nvidia.com/gpu` per pod. Default: every GPU of the node."""
    efa: Optional[bool] = None
    """Request all of the node's EFA devices plus the hugepages EFA uses. Default: on when the pool has EFA."""
    priority_class: Optional[str] = None
    """PriorityClass of the pods, among `scheduling.priorityClasses`. Default: the class with the highest value."""
    host_network: bool = False
    """Run pods in the node's network namespace (NCCL bypasses the pod network); bypasses network policies. Default: false."""
    cpu: Optional[Quantity] = None
    """CPU request per pod. Default: what the smallest allowed node offers a pod beside the stack's DaemonSets, less 1% (at least 500m), in whole cores."""
    memory: Optional[Quantity] = None
    """Memory request per pod. Default: what the smallest allowed node offers a pod beside the stack's DaemonSets and EFA's hugepages, less 1% (at least 1 GiB)."""
    shm_size_limit: Optional[Quantity] = None
    """Size limit of the /dev/shm memory volume (NCCL and data loaders use it). Default: no limit beyond the node's memory."""
    topology: Optional[Literal["preferred", "required", "none"]] = None
    """Kueue topology request of the app's pods (with `kueue.enabled`); `preferred`/`required` only on a pool whose nodes exist (a managed pool with minSize > 0, or a Capacity Block). Default: `kueue.topologyMode` on such pools, none on the others."""
    kind: Literal["Job", "JobSet", "TrainJob"] = "Job"
    """What the app runs as: `Job` (an Indexed Job and a headless Service), `JobSet` (one Indexed Job whose ranks all restart when one fails, up to `job.maxRestarts`) or `TrainJob` (a Kubeflow Trainer TrainJob run as such a JobSet). A change makes a new object; the old one keeps running. Default: Job."""
    job: Optional[TrainingJobConfig] = None
    """Run the app from this stack (as `kind` says). Default: none (the app is deployed by other means and only gets its PDB)."""


class SchedulingConfig(_Model):
    """Scheduling policy: priority classes, training namespaces with quotas, and training apps."""

    priority_classes: list[PriorityClassConfig] = list(DEFAULT_PRIORITY_CLASSES)
    """PriorityClasses; names and values unique. Default: training-critical 1000000, evaluation-normal 500000, data-prep-low 100000, none the global default."""
    namespaces: list[TrainingNamespaceConfig] = [TrainingNamespaceConfig(name="training")]
    """Training namespaces, each with a ResourceQuota. Default: `training`."""
    training_apps: list[TrainingAppConfig] = []
    """Training apps to protect with a PodDisruptionBudget (and to run, with `job`). Default: none."""
    teams: list[TeamConfig] = []
    """Teams sharing the GPU pools (with `kueue.enabled`): each a ClusterQueue in one cohort with its own quota per pool, borrowing idle GPUs and reclaiming its own by preemption; every training namespace then belongs to one. Default: none (a ClusterQueue per namespace)."""
    service_account: TrainingServiceAccountConfig = TrainingServiceAccountConfig()
    """The ServiceAccount training pods run as, created in every training namespace; with `s3Buckets` or `policyArns` it gets an EKS Pod Identity role. Default: `training`, no policies."""


SMOKE_TEST_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
"""CUDA base image for the smoke test: nvidia-smi comes from the node's driver through the NVIDIA
container runtime, and CUDA 12.8 needs driver 570 or newer, which the AL2023 and Bottlerocket
NVIDIA AMIs ship."""


class SmokeTestConfig(_Model):
    """A Job per GPU pool that runs nvidia-smi on each of the pool's initial nodes, awaited by `pulumi up`."""

    enabled: bool = False
    """Run the smoke test. Default: false."""
    image: ImageReference = SMOKE_TEST_IMAGE
    """Image with nvidia-smi on its path. Default: nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04."""
    namespace: Optional[str] = None
    """Namespace among `scheduling.namespaces`. Default: the first one."""
    timeout_minutes: int = Field(default=30, ge=1, le=720)
    """How long `pulumi up` waits for every node's check (GPU nodes take minutes to join). Default: 30."""
