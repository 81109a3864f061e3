"""The stack configuration: one typed model, its defaults, and every rule it must satisfy.

Every key a stack file may set is a field below, with its type, its default (here and nowhere
else) and a one-line description (the attribute docstring, which also feeds the README's
configuration reference). ``load_stack_config`` reads the stack's configuration and either returns
a fully-typed ``GpuTrainingPlatformArgs`` or raises one ``ConfigError`` listing every problem with
its key path and what is allowed. It runs before any resource is registered, so a bad stack file
creates nothing.

Rules that involve more than one key live in ``validate_platform`` and the ``validate_*`` helpers
it calls; components call the same helpers, so the rules hold whether a stack file or another
Pulumi program builds the arguments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Optional

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from . import aws_enums
from .catalog import GPU_INSTANCE_TYPES, efa_interface_count, has_efa
from .node_os import node_os_of
from .labeler.settings import DEFAULT_INTERVAL_SECONDS
from .quantity import QUANTITY_PATTERN

PROJECT = "eks-gpu-training"
"""The Pulumi project name; stack configuration keys live in this namespace."""

GPU_NODE_ROLE_LABEL = ("role", "gpu-training")
"""The label every GPU node carries; training pods select on it (seed: ``role=gpu-training``)."""

SYSTEM_NODE_ROLE_LABEL = ("role", "system")
"""The label every system node carries; controllers select on it."""

NVIDIA_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA_FIPS")
"""x86_64 EKS AMI types that ship the NVIDIA driver (the GPU catalog lists x86_64 types only)."""

END_OF_LIFE_AMI_TYPES = {
    "AL2_x86_64_GPU": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; "
    "use AL2023_x86_64_NVIDIA (driver, container toolkit, fabric manager and EFA included)",
    "AL2_x86_64": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; use AL2023_x86_64_STANDARD",
    "AL2_ARM_64": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; use AL2023_ARM_64_STANDARD",
}
"""AMI types EKS still accepts but this library refuses, with the reason."""

SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36")
"""EKS Kubernetes versions in standard or extended support on the EKS release calendar
(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html) that this library is tested for."""


GPU_OPERATOR_CHART_VERSIONS = ("v26.7.0", "v24.9.2")
"""GPU Operator chart versions this library derives values for; ``tests/test_chart_values.py``
checks every values key against each one's ``values.yaml``. The first is the default: the current
release; v24.9.2 is the version the seed names."""

GPU_SHARING_REFUSED = (
    "training pods get whole GPUs: sharing a GPU (MIG slices or time-slicing) adds latency to every "
    "step and leaves each process less VRAM"
)
"""Why MIG and time-slicing are refused (the seed's reason)."""

GPU_SHARING_NODE_LABELS = {
    "nvidia.com/mig.config": "makes the GPU Operator's MIG manager partition the node's GPUs",
    "nvidia.com/device-plugin.config": "selects a device-plugin configuration (how time-slicing or MPS is "
    "turned on per node)",
}
"""Node labels through which a pool would ask the GPU Operator for GPU sharing, with what each does.
``nvidia.com/mig.config=all-disabled`` (no MIG) is the one value allowed."""

MIG_DISABLED_CONFIG = "all-disabled"
"""The MIG manager configuration that turns MIG off."""
KARPENTER_CAPACITY_TYPES = ("on-demand", "spot", "reserved")
"""Values of Karpenter's ``karpenter.sh/capacity-type`` label (Karpenter 1.14 docs-nodepools.md,
"karpenter.sh/capacity-type"); a NodePool's requirement must spell them exactly so."""

SPOT_REFUSAL = "a reclaimed node stops the whole distributed job"
"""Why training pools never use spot (seed: "Never use spot for training")."""


class ConfigError(ValueError):
    """Invalid stack configuration: every problem, each with its key path."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        super().__init__(f"invalid configuration ({count}), rejected before registering any resource:\n{lines}")


@dataclass(frozen=True)
class Problem:
    """One configuration problem: where (key path) and what is wrong or allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


def _enum_error(value: str, allowed: frozenset[str], what: str, source: str) -> PydanticCustomError:
    hint = aws_enums.suggestion(value, allowed)
    return PydanticCustomError("aws_enum", f"'{value}' is not {what} ({source}){hint}")


def _check_instance_type(value: str) -> str:
    if value not in aws_enums.ec2_instance_types():
        raise _enum_error(value, aws_enums.ec2_instance_types(), "an EC2 instance type", "botocore ec2 InstanceType")
    return value


def _check_ami_type(value: str) -> str:
    if value not in aws_enums.eks_ami_types():
        raise _enum_error(value, aws_enums.eks_ami_types(), "an EKS AMI type", "botocore eks AMITypes")
    if value in END_OF_LIFE_AMI_TYPES:
        raise PydanticCustomError("end_of_life", f"'{value}' is refused: {END_OF_LIFE_AMI_TYPES[value]}")
    return value


InstanceType = Annotated[str, AfterValidator(_check_instance_type)]
"""An EC2 instance type name, checked against botocore."""
AmiType = Annotated[str, AfterValidator(_check_ami_type)]
"""An EKS AMI type, checked against botocore; end-of-life types refused."""

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_AZ = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d[a-z]$"


class SubnetConfig(_Model):
    """A private subnet the cluster and its nodes use."""

    id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$")
    """Subnet ID (required)."""
    availability_zone: str = Field(pattern=_AZ)
    """Availability zone of the subnet, e.g. ``us-west-2a`` (required; placement groups are per AZ)."""


class NetworkConfig(_Model):
    """The VPC the cluster lives in."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    """VPC ID (required)."""
    subnets: list[SubnetConfig] = Field(min_length=1)
    """Private subnets for the control plane ENIs and the nodes, with their AZs (required)."""


class ClusterConfig(_Model):
    """The EKS cluster: created here with pulumi-eks, or an existing one adopted by name."""

    name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    """EKS cluster name (required): the cluster to create, or the existing one to adopt."""
    create: bool = True
    """Create the cluster (true) or adopt an existing cluster of that name (false). Default: true."""
    kubernetes_version: str = "1.34"
    """Kubernetes version of a created cluster. Default: 1.34."""
    endpoint_public_access: bool = True
    """Expose the API server endpoint publicly (a created cluster). Default: true."""
    endpoint_private_access: bool = True
    """Expose the API server endpoint inside the VPC (a created cluster). Default: true."""
    admin_principal_arns: list[str] = []
    """IAM role/user ARNs granted cluster-admin through EKS access entries (a created cluster). Default: none."""
    enabled_log_types: list[str] = ["api", "audit", "authenticator"]
    """Control-plane log types sent to CloudWatch (a created cluster). Default: api, audit, authenticator."""

    @field_validator("kubernetes_version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            raise PydanticCustomError(
                "version", f"'{value}' is not supported; allowed: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}"
            )
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principal_arns(cls, values: list[str]) -> list[str]:
        pattern = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
        for value in values:
            if not pattern.match(value):
                raise PydanticCustomError(
                    "arn", f"'{value}' is not an IAM role or user ARN (arn:<partition>:iam::<account>:role/<name>)"
                )
        return values

    @field_validator("enabled_log_types")
    @classmethod
    def _log_types(cls, values: list[str]) -> list[str]:
        allowed = aws_enums.eks_log_types()
        for value in values:
            if value not in allowed:
                raise _enum_error(value, allowed, "an EKS log type", "botocore eks LogType")
        return values


class SystemNodeGroupConfig(_Model):
    """A small untainted managed node group for controllers (Karpenter, the GPU Operator's operator, CoreDNS)."""

    enabled: bool = True
    """Create the system node group. Default: true (an adopted cluster that already runs its controllers elsewhere may turn it off)."""
    instance_types: list[InstanceType] = Field(default=["m7i.xlarge"], min_length=1)
    """Instance types of system nodes. Default: m7i.xlarge."""
    ami_type: AmiType = "AL2023_x86_64_STANDARD"
    """EKS AMI type of system nodes. Default: AL2023_x86_64_STANDARD."""
    min_size: int = Field(default=2, ge=0)
    """Minimum number of system nodes. Default: 2 (controllers survive one node's loss)."""
    desired_size: int = Field(default=2, ge=0)
    """Number of system nodes at creation; later changes are left to autoscalers. Default: 2."""
    max_size: int = Field(default=4, ge=1)
    """Maximum number of system nodes. Default: 4."""
    disk_size_gib: int = Field(default=50, ge=20, le=16384)
    """Root volume size of system nodes in GiB. Default: 50."""


class PlacementGroupConfig(_Model):
    """The cluster placement group that keeps a pool's nodes on one low-latency network segment."""

    mode: Literal["create", "existing", "none"] = "create"
    """create: the pool makes its own group; existing: use the group named below; none: no group. Default: create."""
    name: Optional[str] = None
    """Name of the existing placement group (mode existing only). Default: none."""
    strategy: str = "cluster"
    """Placement strategy of a created group. Default: cluster (the only one that co-locates for training)."""

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        allowed = aws_enums.ec2_placement_strategies()
        if value not in allowed:
            raise _enum_error(value, allowed, "a placement strategy", "botocore ec2 PlacementStrategy")
        if value != "cluster":
            raise PydanticCustomError(
                "strategy",
                f"'{value}' spreads instances apart; training pools need 'cluster' (low-latency, high-bandwidth placement)",
            )
        return value


def efa_on(efa: str, instance_types: list[str]) -> bool:
    """The ``efa`` setting of a pool resolved: ``auto`` is on when every instance type has EFA."""
    if efa == "auto":
        return all(t in GPU_INSTANCE_TYPES for t in instance_types) and has_efa(instance_types)
    return efa == "enabled"


class GpuNodeGroupConfig(_Model):
    """One pool of GPU training nodes: an EKS managed node group with its launch template."""

    name: str = Field(pattern=_DNS_LABEL)
    """Pool name, a DNS label; also the EKS node group name (required)."""
    instance_types: list[InstanceType] = Field(default=["p5.48xlarge", "p4de.24xlarge"], min_length=1)
    """EC2 instance types of the pool (NVIDIA GPU types). Default: p5.48xlarge, p4de.24xlarge."""
    ami_type: AmiType = "AL2023_x86_64_NVIDIA"
    """EKS AMI type. Default: AL2023_x86_64_NVIDIA (driver, toolkit, fabric manager, EFA included)."""
    capacity_type: str = "ON_DEMAND"
    """ON_DEMAND or CAPACITY_BLOCK (SPOT is refused for training). Default: ON_DEMAND."""
    capacity_reservation_id: Optional[str] = Field(default=None, pattern=r"^cr-[0-9a-f]{17}$")
    """Capacity reservation (ODCR or Capacity Block) the pool launches into; required for CAPACITY_BLOCK. Default: none."""
    min_size: int = Field(default=0, ge=0)
    """Minimum number of nodes. Default: 0."""
    desired_size: Optional[int] = Field(default=None, ge=0)
    """Number of nodes at creation; later changes are left to autoscalers and ignored by `pulumi up`. Default: min size."""
    max_size: int = Field(default=2, ge=1)
    """Maximum number of nodes. Default: 2 (the seed's two-node training job)."""
    availability_zone: Optional[str] = Field(default=None, pattern=_AZ)
    """The pool's single AZ; required with a placement group. Default: none (all subnets' AZs)."""
    subnet_ids: Optional[list[str]] = None
    """Subnets of the pool, among `network.subnets`. Default: the network's subnets in the pool's AZ (all of them without one)."""
    placement_group: PlacementGroupConfig = PlacementGroupConfig()
    """Cluster placement group of the pool. Default: a group created for the pool."""
    efa: Literal["auto", "enabled", "disabled"] = "auto"
    """EFA network interfaces: auto turns them on when every instance type has EFA. Default: auto."""
    root_volume_size_gib: int = Field(default=500, ge=100, le=16384)
    """Encrypted gp3 root volume in GiB, sized for multi-GB CUDA/PyTorch images. Default: 500."""
    labels: dict[str, str] = {}
    """Node labels added to `role=gpu-training`; GPU-sharing labels (`nvidia.com/mig.config`, `nvidia.com/device-plugin.config`) are refused. Default: none."""
    update_max_unavailable: int = Field(default=1, ge=1, le=100)
    """Nodes replaced at once during a node group update. Default: 1."""

    @field_validator("capacity_type")
    @classmethod
    def _capacity_type(cls, value: str) -> str:
        allowed = aws_enums.eks_capacity_types()
        if value not in allowed:
            raise _enum_error(value, allowed, "an EKS capacity type", "botocore eks CapacityTypes")
        if value == "SPOT":
            raise PydanticCustomError(
                "spot",
                f"SPOT is refused for training pools: {SPOT_REFUSAL}; use ON_DEMAND or CAPACITY_BLOCK",
            )
        return value

    @property
    def initial_size(self) -> int:
        """Nodes at creation: ``desired_size`` when set, else ``min_size``."""
        return self.min_size if self.desired_size is None else self.desired_size

    @property
    def efa_enabled(self) -> bool:
        """Whether the pool's launch template lays out EFA interfaces."""
        return efa_on(self.efa, self.instance_types)

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node (0 when EFA is off)."""
        return efa_interface_count(self.instance_types) if self.efa_enabled else 0


class GpuOperatorConfig(_Model):
    """The NVIDIA GPU Operator (a Helm release); its values are derived from the GPU pools' node OS."""

    chart_version: str = GPU_OPERATOR_CHART_VERSIONS[0]
    """Chart version of `gpu-operator` from helm.ngc.nvidia.com/nvidia. Default: v26.7.0 (v24.9.2 also accepted)."""
    prometheus_operator: bool = False
    """Whether the cluster runs the Prometheus operator: only then is a ServiceMonitor made for the DCGM exporter. Default: false."""
    service_monitor_labels: dict[str, str] = {}
    """Labels on that ServiceMonitor, matching Prometheus' `serviceMonitorSelector` (e.g. `release: kube-prometheus-stack`). Default: none."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """MIG strategy of the device plugin. Only `none`: MIG slices a training GPU (latency, less VRAM per process). Default: none."""
    time_slicing_replicas: int = Field(default=1, ge=1)
    """Pods that share each GPU by time-slicing. Only 1: sharing adds latency and splits VRAM. Default: 1."""

    @field_validator("chart_version")
    @classmethod
    def _chart_version(cls, value: str) -> str:
        if value not in GPU_OPERATOR_CHART_VERSIONS:
            raise PydanticCustomError(
                "version", f"'{value}' is not supported; allowed: {', '.join(GPU_OPERATOR_CHART_VERSIONS)}"
            )
        return value

    @field_validator("mig_strategy")
    @classmethod
    def _no_mig(cls, value: str) -> str:
        if value != "none":
            raise PydanticCustomError("gpu_sharing", f"'{value}' is refused: {GPU_SHARING_REFUSED}; use 'none'")
        return value

    @field_validator("time_slicing_replicas")
    @classmethod
    def _no_time_slicing(cls, value: int) -> int:
        if value != 1:
            raise PydanticCustomError("gpu_sharing", f"{value} is refused: {GPU_SHARING_REFUSED}; use 1")
        return value


_IMAGE_REFERENCE = re.compile(
    r"^(?P<name>(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::\d+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
"""A container image reference as the distribution spec's grammar defines it (registry host and
port, lowercase repository path, tag, sha256 digest)."""


def _check_image_reference(value: str) -> str:
    match = _IMAGE_REFERENCE.match(value)
    if match is None or len(match.group("name")) > 255:
        raise PydanticCustomError(
            "image",
            f"'{value}' is not an image reference; use <registry>/<repository>@sha256:<64 hex digits> "
            "(or <registry>/<repository>:<tag>)",
        )
    if match.group("digest") is None and match.group("tag") in (None, "latest"):
        raise PydanticCustomError(
            "image",
            f"'{value}' names no fixed image (no digest, and its tag is '{match.group('tag') or 'latest'}'); "
            "pin it by digest (@sha256:...) or by a release tag",
        )
    return value


_CPU_QUANTITY = r"^([1-9][0-9]*m|[0-9]+(\.[0-9]{1,3})?)$"
_MEMORY_QUANTITY = r"^[1-9][0-9]*(Ki|Mi|Gi)$"


def cpu_millicores(quantity: str) -> int:
    """A CPU quantity (``250m``, ``0.5``, ``2``) in millicores."""
    return int(quantity[:-1]) if quantity.endswith("m") else round(float(quantity) * 1000)


def memory_bytes(quantity: str) -> int:
    """A memory quantity (``128Mi``, ``1Gi``) in bytes."""
    return int(quantity[:-2]) * {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[quantity[-2:]]


class LabelerResourcesConfig(_Model):
    """CPU and memory of the labeler container. The process idles almost all the time; memory is
    mostly the EC2 service model that botocore loads (about 85 MiB resident, measured)."""

    cpu_request: str = Field(default="10m", pattern=_CPU_QUANTITY)
    """CPU request. Default: 10m."""
    memory_request: str = Field(default="128Mi", pattern=_MEMORY_QUANTITY)
    """Memory request. Default: 128Mi."""
    cpu_limit: str = Field(default="250m", pattern=_CPU_QUANTITY)
    """CPU limit. Default: 250m (start-up imports take about half a CPU-second)."""
    memory_limit: str = Field(default="256Mi", pattern=_MEMORY_QUANTITY)
    """Memory limit. Default: 256Mi (headroom for the liveness probe's own interpreter)."""


class TopologyLabelerConfig(_Model):
    """The topology labeler: a DaemonSet on GPU nodes that fills in missing
    ``topology.k8s.aws/network-node-layer-N`` labels from EC2 and never overwrites one."""

    enabled: bool = True
    """Run the labeler on GPU nodes. Default: true."""
    image: Optional[Annotated[str, AfterValidator(_check_image_reference)]] = None
    """Prebuilt labeler image, pinned by digest (`<registry>/<repository>@sha256:...`) or a release tag; skips the ECR repository and the image build. Default: none (the stack builds `components/labeler` and pushes it to a private ECR repository it creates; needs Docker where `pulumi up` runs)."""
    interval_seconds: int = Field(default=DEFAULT_INTERVAL_SECONDS, ge=60, le=86400)
    """Seconds between re-checks of a node. Default: 600."""
    resources: LabelerResourcesConfig = LabelerResourcesConfig()
    """Requests and limits of the labeler container. Default: 10m/128Mi requested, 250m/256Mi limit."""


KARPENTER_CHART_VERSION = "1.14.1"
"""Karpenter chart (and controller) version: the release the CRD schemas in the tests come from."""

_KARPENTER_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"
"""Pattern of NodePool ``consolidateAfter`` and ``expireAfter`` (karpenter.sh_nodepools.yaml)."""


class DisruptionBudgetConfig(_Model):
    """A NodePool disruption budget: how many nodes Karpenter may disrupt at once, for which reasons, when."""

    nodes: str = Field(pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$")
    """Nodes that may be disrupted at once: a count (``"1"``) or a percentage (``"10%"``) (required)."""
    reasons: Optional[list[Literal["Empty", "Drifted", "Underutilized"]]] = None
    """Disruption reasons the budget applies to. Default: all reasons."""
    schedule: Optional[str] = Field(default=None, pattern=r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$")
    """Cron schedule (UTC) from which the budget is active, together with `duration`. Default: always active."""
    duration: Optional[str] = Field(default=None, pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
    """How long the budget is active after each `schedule` start, e.g. ``8h``. Default: none."""


DEFAULT_DISRUPTION_BUDGETS = [
    DisruptionBudgetConfig(nodes="0", reasons=["Drifted"]),
    DisruptionBudgetConfig(nodes="1"),
]
"""Never replace a drifted node that is still running (a busy training node is replaced only once
it is empty and removed as such), and disrupt at most one node at a time otherwise."""


class KarpenterDisruptionConfig(_Model):
    """When Karpenter may take nodes of a GPU pool away. Consolidation is always ``WhenEmpty``: a
    training node is never drained to pack its pods elsewhere."""

    consolidate_after: str = Field(default="30m", pattern=_KARPENTER_DURATION)
    """How long a node must be empty before it is removed. Default: 30m (a failed job's restart or the next queued job still finds the node)."""
    budgets: list[DisruptionBudgetConfig] = Field(default=DEFAULT_DISRUPTION_BUDGETS, max_length=50)
    """Disruption budgets. Default: no replacement of drifted nodes while they run, one node at a time otherwise."""
    expire_after: str = Field(default="Never", pattern=_KARPENTER_DURATION)
    """Maximum node lifetime; expiry drains a node even mid-job. Default: Never."""


class KarpenterGpuNodePoolConfig(_Model):
    """One Karpenter GPU pool: an EC2NodeClass and a NodePool that launch tainted GPU nodes on demand."""

    name: str = Field(pattern=_DNS_LABEL)
    """Pool name, a DNS label; also the name of its EC2NodeClass and NodePool (required)."""
    instance_types: list[InstanceType] = Field(default=["p5.48xlarge", "p4de.24xlarge"], min_length=1)
    """EC2 instance types Karpenter may launch (NVIDIA GPU types). Default: p5.48xlarge, p4de.24xlarge."""
    capacity_types: list[str] = Field(default=["on-demand"], min_length=1)
    """Values of `karpenter.sh/capacity-type`: on-demand, and reserved with capacityReservationIds (spot is refused for training). Default: on-demand."""
    capacity_reservation_ids: list[str] = []
    """ODCRs or Capacity Blocks (cr- ids) the pool launches into first; needs `reserved` in capacityTypes. Default: none."""
    gpu_limit: int = Field(default=16, ge=1)
    """Most GPUs (`nvidia.com/gpu`) the pool's nodes may have in total; at least one node's. Default: 16 (two p5.48xlarge nodes)."""
    availability_zone: Optional[str] = Field(default=None, pattern=_AZ)
    """The pool's single AZ; required with a placement group. Default: none (all subnets' AZs)."""
    subnet_ids: Optional[list[str]] = None
    """Subnets of the pool, among `network.subnets`. Default: the network's subnets in the pool's AZ (all of them without one)."""
    placement_group: PlacementGroupConfig = PlacementGroupConfig()
    """Cluster placement group of the pool (Karpenter selects it, the stack creates it). Default: a group created for the pool."""
    efa: Literal["auto", "enabled", "disabled"] = "auto"
    """EFA network interfaces: auto turns them on when every instance type has EFA. Default: auto."""
    root_volume_size_gib: int = Field(default=500, ge=100, le=16384)
    """Encrypted gp3 root volume in GiB, sized for multi-GB CUDA/PyTorch images. Default: 500."""
    labels: dict[str, str] = {}
    """Node labels added to `role=gpu-training`. Default: none."""
    disruption: KarpenterDisruptionConfig = KarpenterDisruptionConfig()
    """Consolidation delay, disruption budgets and node expiry. Default: see its keys."""

    @field_validator("capacity_reservation_ids")
    @classmethod
    def _reservation_ids(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.match(r"^cr-[0-9a-f]{17}$", value):
                raise PydanticCustomError("reservation", f"'{value}' is not a capacity reservation id (cr- and 17 hex digits)")
        return values

    @property
    def efa_enabled(self) -> bool:
        """Whether the pool's EC2NodeClass lays out EFA interfaces (same rule as ``GpuNodeGroupConfig``)."""
        return efa_on(self.efa, self.instance_types)

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node (0 when EFA is off)."""
        return efa_interface_count(self.instance_types) if self.efa_enabled else 0

    @property
    def gpus_per_node(self) -> int:
        """GPUs of the largest node the pool may launch (0 when an instance type is not in the catalog)."""
        if not all(t in GPU_INSTANCE_TYPES for t in self.instance_types):
            return 0
        return max(GPU_INSTANCE_TYPES[t].gpus for t in self.instance_types)


class KarpenterConfig(_Model):
    """Karpenter: the controller, and the GPU pools it provisions."""

    enabled: bool = False
    """Install Karpenter (controller IAM, interruption queue, Helm release) and its GPU pools. Default: false."""
    chart_version: str = Field(default=KARPENTER_CHART_VERSION, pattern=r"^\d+\.\d+\.\d+$")
    """Version of the `karpenter` and `karpenter-crd` charts (oci://public.ecr.aws/karpenter). Default: 1.14.1."""
    gpu_node_pools: list[KarpenterGpuNodePoolConfig] = []
    """GPU pools Karpenter provisions (one EC2NodeClass and one NodePool each). Default: none."""
# --- scheduling policy and training workloads --------------------------------------------------

PRIORITY_VALUE_MAX = 1_000_000_000
"""Highest value a user-defined PriorityClass may have; larger values are reserved for the system
classes (kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption)."""

TRAINING_APP_NAME_MAX = 50
"""Longest training app name: the seed's ``app: <name>-multi`` label value and the Indexed Job's pod
hostnames ``<name>-<index>`` must stay within the 63-character DNS label limit."""

RESERVED_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes owns; a training quota there would throttle the control plane's own pods."""

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN)]
"""A Kubernetes resource quantity such as ``400``, ``500m``, ``4Ti``."""


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
    """`persistentvolumeclaims`. Default: 5."""


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


class TrainingJobConfig(_Model):
    """How the stack runs a training app: an Indexed Job with a headless Service for torchrun rendezvous."""

    image: str = Field(min_length=1)
    """Container image of the training code (required)."""
    command: list[str] = []
    """Container command. Default: the image's entrypoint."""
    args: list[str] = []
    """Container arguments. Default: none."""
    env: dict[str, str] = {}
    """Extra environment variables (the PET_* torchrun variables and FI_PROVIDER are set for you). Default: none."""
    suspend: bool = False
    """Create the Job suspended; `kubectl patch job <name> -p '{"spec":{"suspend":false}}'` starts it. Applies at creation only: `pulumi up` never changes a Job's suspension later. Default: false."""
    backoff_limit: int = Field(default=0, ge=0)
    """Pod failures tolerated before the Job fails (a failed rank breaks the whole group, so retries rarely help). Default: 0."""
    rendezvous_port: int = Field(default=TORCHRUN_PORT, ge=1, le=65535)
    """Port of the torchrun rendezvous on rank 0. Default: 29500."""


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
    """CPU request per pod. Default: the node's vCPUs less 10% (at least one) for the kubelet and daemons."""
    memory: Optional[Quantity] = None
    """Memory request per pod. Default: the node's memory less 10% (at least 4 GiB) for the kubelet and daemons."""
    shm_size_limit: Optional[Quantity] = None
    """Size limit of the /dev/shm memory volume (NCCL and data loaders use it). Default: no limit beyond the node's memory."""
    job: Optional[TrainingJobConfig] = None
    """Run the app from this stack as an Indexed Job. Default: none (the app is deployed by other means and only gets its PDB)."""


class SchedulingConfig(_Model):
    """Scheduling policy: priority classes, training namespaces with quotas, and training apps."""

    priority_classes: list[PriorityClassConfig] = list(DEFAULT_PRIORITY_CLASSES)
    """PriorityClasses; names and values unique. Default: training-critical 1000000, evaluation-normal 500000, data-prep-low 100000, none the global default."""
    namespaces: list[TrainingNamespaceConfig] = [TrainingNamespaceConfig(name="training")]
    """Training namespaces, each with a ResourceQuota. Default: `training`."""
    training_apps: list[TrainingAppConfig] = []
    """Training apps to protect with a PodDisruptionBudget (and to run, with `job`). Default: none."""


SMOKE_TEST_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
"""CUDA base image for the smoke test: nvidia-smi comes from the node's driver through the NVIDIA
container runtime, and CUDA 12.8 needs driver 570 or newer, which the AL2023 and Bottlerocket
NVIDIA AMIs ship."""


class SmokeTestConfig(_Model):
    """A Job per GPU pool that runs nvidia-smi on each of the pool's initial nodes, awaited by `pulumi up`."""

    enabled: bool = False
    """Run the smoke test. Default: false."""
    image: str = Field(default=SMOKE_TEST_IMAGE, min_length=1)
    """Image with nvidia-smi on its path. Default: nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04."""
    namespace: Optional[str] = None
    """Namespace among `scheduling.namespaces`. Default: the first one."""
    timeout_minutes: int = Field(default=30, ge=1, le=720)
    """How long `pulumi up` waits for every node's check (GPU nodes take minutes to join). Default: 30."""


class GpuTrainingPlatformArgs(_Model):
    """Everything one stack builds. Top-level keys live in the project's config namespace."""

    region: str
    """AWS region, read from the stack's `aws:region` (required)."""
    cluster: ClusterConfig
    """The EKS cluster (required)."""
    network: NetworkConfig
    """The VPC and private subnets (required)."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """The system node group. Default: two m7i.xlarge nodes."""
    gpu_node_groups: list[GpuNodeGroupConfig] = []
    """GPU training pools (managed node groups). Default: none."""
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    """The NVIDIA GPU Operator. Default: chart v26.7.0, no ServiceMonitor."""
    topology_labeler: TopologyLabelerConfig = TopologyLabelerConfig()
    """The topology labeler DaemonSet on GPU nodes. Default: enabled, image built and pushed to ECR."""
    karpenter: KarpenterConfig = KarpenterConfig()
    """Karpenter and its GPU pools. Default: off."""
    scheduling: SchedulingConfig = SchedulingConfig()
    """Priority classes, training namespaces with GPU quotas, training apps. Default: the seed's classes and a `training` namespace."""
    smoke_test: SmokeTestConfig = SmokeTestConfig()
    """The nvidia-smi smoke test. Default: off."""
    tags: dict[str, str] = {}
    """Tags added to every AWS resource. Default: none."""

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value not in aws_enums.aws_regions():
            raise _enum_error(value, aws_enums.aws_regions(), "an AWS region", "botocore endpoints")
        return value


# --- rules across keys -------------------------------------------------------------------------

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def pool_subnets(pool: GpuNodeGroupConfig | KarpenterGpuNodePoolConfig, network: NetworkConfig) -> list[SubnetConfig]:
    """The subnets a pool's nodes launch in (see ``GpuNodeGroupConfig.subnet_ids``)."""
    if pool.subnet_ids is not None:
        by_id = {s.id: s for s in network.subnets}
        return [by_id[i] for i in pool.subnet_ids if i in by_id]
    return [s for s in network.subnets if pool.availability_zone in (None, s.availability_zone)]


ProblemSink = Callable[[str, str], None]
"""Records one problem: the key under the pool's path, and the message."""


def _check_gpu_instance_types(instance_types: list[str], problem: ProblemSink) -> bool:
    """GPU types from the catalog, each once; True when every type is known to the catalog."""
    for i, instance_type in enumerate(instance_types):
        if instance_type not in GPU_INSTANCE_TYPES:
            problem(
                f"instanceTypes[{i}]",
                f"'{instance_type}' is not an x86_64 NVIDIA GPU instance type; allowed: {', '.join(GPU_INSTANCE_TYPES)}",
            )
    if len(set(instance_types)) != len(instance_types):
        problem("instanceTypes", "lists an instance type twice")
    return all(t in GPU_INSTANCE_TYPES for t in instance_types)


def _check_reservation_placement(has_reservation: bool, placement: PlacementGroupConfig, problem: ProblemSink) -> None:
    if has_reservation and placement.mode == "create":
        problem(
            "placementGroup.mode",
            "a capacity reservation cannot be forced into a placement group it was not created in "
            "(launches fail with InsufficientInstanceCapacity); use 'none', or 'existing' with the group "
            "the reservation was created in",
        )


def _check_placement(pool: GpuNodeGroupConfig | KarpenterGpuNodePoolConfig, network: NetworkConfig, problem: ProblemSink) -> None:
    """Placement group, availability zone and subnets: a cluster placement group lives in one AZ."""
    placement = pool.placement_group
    if placement.mode == "existing" and not placement.name:
        problem("placementGroup.name", "is required when placementGroup.mode is 'existing'")
    if placement.mode != "existing" and placement.name is not None:
        problem("placementGroup.name", f"is only used with mode 'existing' (mode is '{placement.mode}')")

    known_azs = sorted({s.availability_zone for s in network.subnets})
    if pool.availability_zone is not None and pool.availability_zone not in known_azs:
        problem("availabilityZone", f"'{pool.availability_zone}' has no subnet in network.subnets; allowed: {', '.join(known_azs)}")

    subnet_azs = {s.id: s.availability_zone for s in network.subnets}
    if pool.subnet_ids is not None:
        if not pool.subnet_ids:
            problem("subnetIds", "must list at least one subnet")
        for i, subnet_id in enumerate(pool.subnet_ids):
            if subnet_id not in subnet_azs:
                problem(f"subnetIds[{i}]", f"'{subnet_id}' is not in network.subnets; allowed: {', '.join(subnet_azs)}")
            elif pool.availability_zone not in (None, subnet_azs[subnet_id]):
                problem(
                    f"subnetIds[{i}]",
                    f"'{subnet_id}' is in {subnet_azs[subnet_id]}, not the pool's availabilityZone {pool.availability_zone}",
                )
    chosen_azs = sorted({s.availability_zone for s in pool_subnets(pool, network)})
    if placement.mode != "none":
        if pool.availability_zone is None and pool.subnet_ids is None:
            problem(
                "availabilityZone",
                "is required with a placement group: a cluster placement group lives in one AZ; "
                f"choose one of {', '.join(known_azs)} or set placementGroup.mode to 'none'",
            )
        elif len(chosen_azs) > 1:
            problem(
                "subnetIds",
                f"span {', '.join(chosen_azs)}; a placement group needs all of the pool's subnets in one AZ "
                "(multi-AZ subnets break node group updates)",
            )


def _check_efa(pool: GpuNodeGroupConfig | KarpenterGpuNodePoolConfig, known_types: bool, problem: ProblemSink) -> None:
    if pool.efa == "enabled" and known_types and not has_efa(pool.instance_types):
        lacking = [t for t in pool.instance_types if GPU_INSTANCE_TYPES[t].efa_interfaces == 0]
        problem("efa", f"is 'enabled' but {', '.join(lacking)} has no EFA; use 'auto' or 'disabled', or EFA instance types")


def _check_node_labels(labels: dict[str, str], problem: ProblemSink) -> None:
    for key, value in labels.items():
        if key in GPU_SHARING_NODE_LABELS and not (key == "nvidia.com/mig.config" and value == MIG_DISABLED_CONFIG):
            problem(f"labels.{key}", f"is refused: it {GPU_SHARING_NODE_LABELS[key]}; {GPU_SHARING_REFUSED}")
        elif key == GPU_NODE_ROLE_LABEL[0]:
            problem(f"labels.{key}", f"is reserved: every GPU node carries {GPU_NODE_ROLE_LABEL[0]}={GPU_NODE_ROLE_LABEL[1]}")
        elif not _LABEL_KEY.match(key) or len(key) > 317:
            problem(f"labels.{key}", "is not a valid Kubernetes label key")
        if not _LABEL_VALUE.match(value):
            problem(f"labels.{key}", f"'{value}' is not a valid Kubernetes label value (63 characters, alphanumerics, '-', '_', '.')")


def _collector(path: str) -> tuple[list[Problem], ProblemSink]:
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(f"{path}.{key}", message))

    return problems, problem


def validate_gpu_node_group(pool: GpuNodeGroupConfig, network: NetworkConfig, path: str) -> list[Problem]:
    """Rules of one GPU pool that involve more than one key. ``path`` prefixes every key path."""
    problems, problem = _collector(path)
    known_types = _check_gpu_instance_types(pool.instance_types, problem)

    if pool.ami_type not in NVIDIA_AMI_TYPES:
        problem("amiType", f"'{pool.ami_type}' has no NVIDIA driver; allowed: {', '.join(NVIDIA_AMI_TYPES)}")

    if pool.capacity_type == "CAPACITY_BLOCK":
        if pool.capacity_reservation_id is None:
            problem("capacityReservationId", "is required with capacityType CAPACITY_BLOCK (the block's cr- id)")
        if len(pool.instance_types) != 1:
            problem("instanceTypes", "a Capacity Block is for exactly one instance type; list only that type")
    _check_reservation_placement(pool.capacity_reservation_id is not None, pool.placement_group, problem)

    if not pool.min_size <= pool.initial_size <= pool.max_size:
        problem("desiredSize", f"must lie between minSize ({pool.min_size}) and maxSize ({pool.max_size})")
    if pool.min_size > pool.max_size:
        problem("minSize", f"must not exceed maxSize ({pool.max_size})")

    _check_placement(pool, network, problem)
    _check_efa(pool, known_types, problem)
    _check_node_labels(pool.labels, problem)
    return problems


_KARPENTER_RESTRICTED_LABEL = re.compile(r"^([^/]*\.)?(karpenter\.sh|karpenter\.k8s\.aws)/|^kubernetes\.io/hostname$")
"""Label keys a NodePool template may not set (the CEL rules of karpenter.sh_nodepools.yaml); the
few well-known Karpenter labels it may set are not node labels a pool needs to add."""


def validate_karpenter_gpu_node_pool(pool: KarpenterGpuNodePoolConfig, network: NetworkConfig, path: str) -> list[Problem]:
    """Rules of one Karpenter GPU pool that involve more than one key. ``path`` prefixes every key path."""
    problems, problem = _collector(path)
    known_types = _check_gpu_instance_types(pool.instance_types, problem)

    for i, capacity_type in enumerate(pool.capacity_types):
        if capacity_type == "spot":
            problem(
                f"capacityTypes[{i}]",
                f"spot is refused for training pools: {SPOT_REFUSAL}; use on-demand, and reserved with capacityReservationIds",
            )
        elif capacity_type not in KARPENTER_CAPACITY_TYPES:
            hint = aws_enums.suggestion(capacity_type, frozenset(KARPENTER_CAPACITY_TYPES))
            problem(
                f"capacityTypes[{i}]",
                f"'{capacity_type}' is not a karpenter.sh/capacity-type value; allowed: on-demand, reserved{hint}",
            )
    if len(set(pool.capacity_types)) != len(pool.capacity_types):
        problem("capacityTypes", "lists a capacity type twice")
    if "reserved" in pool.capacity_types and not pool.capacity_reservation_ids:
        problem("capacityTypes", "'reserved' needs the reservations to launch into: set capacityReservationIds")
    if pool.capacity_reservation_ids and "reserved" not in pool.capacity_types:
        problem(
            "capacityReservationIds",
            "Karpenter launches into a reservation only for a NodePool that allows 'reserved'; add it to capacityTypes",
        )
    if len(set(pool.capacity_reservation_ids)) != len(pool.capacity_reservation_ids):
        problem("capacityReservationIds", "lists a reservation twice")
    _check_reservation_placement(bool(pool.capacity_reservation_ids), pool.placement_group, problem)

    if known_types and pool.gpu_limit < pool.gpus_per_node:
        largest = max(pool.instance_types, key=lambda t: GPU_INSTANCE_TYPES[t].gpus)
        problem(
            "gpuLimit",
            f"{pool.gpu_limit} is less than one {largest} node's {pool.gpus_per_node} GPUs, so Karpenter could never "
            f"launch it; use at least {pool.gpus_per_node}",
        )

    _check_placement(pool, network, problem)
    _check_efa(pool, known_types, problem)
    _check_node_labels(pool.labels, problem)
    for key in pool.labels:
        if _KARPENTER_RESTRICTED_LABEL.match(key):
            problem(f"labels.{key}", "is restricted by Karpenter (karpenter.sh, karpenter.k8s.aws and kubernetes.io/hostname)")

    for i, budget in enumerate(pool.disruption.budgets):
        if (budget.schedule is None) != (budget.duration is None):
            problem(f"disruption.budgets[{i}]", "schedule and duration are set together or not at all")
    return problems


_KARPENTER_RESTRICTED_TAG = re.compile(r"^(kubernetes\.io/cluster|eks:eks-cluster-name$|karpenter\.sh/nodepool$|karpenter\.sh/nodeclaim$|karpenter\.k8s\.aws/ec2nodeclass$)")
"""AWS tag keys an EC2NodeClass may not carry (the CEL rules on ``spec.tags`` of its CRD)."""


def validate_karpenter(karpenter: KarpenterConfig, network: NetworkConfig, managed_names: frozenset[str] = frozenset()) -> list[Problem]:
    """Rules of the ``karpenter`` section; ``managed_names`` are the managed node groups' pool names."""
    problems: list[Problem] = []
    if karpenter.gpu_node_pools and not karpenter.enabled:
        problems.append(
            Problem(
                "karpenter.enabled",
                f"is false but gpuNodePools lists {len(karpenter.gpu_node_pools)} pool(s), which would be ignored; "
                "set enabled: true or remove them",
            )
        )
    names = [pool.name for pool in karpenter.gpu_node_pools]
    for i, pool in enumerate(karpenter.gpu_node_pools):
        path = f"karpenter.gpuNodePools[{i}]"
        if names.index(pool.name) != i:
            problems.append(Problem(f"{path}.name", f"'{pool.name}' is used by karpenter.gpuNodePools[{names.index(pool.name)}] too"))
        if f"karpenter-{pool.name}" in managed_names:
            problems.append(
                Problem(f"{path}.name", f"'{pool.name}' would give its placement group the name of gpuNodeGroups' 'karpenter-{pool.name}'")
            )
        problems.extend(validate_karpenter_gpu_node_pool(pool, network, path))
    return problems


def gpu_pool_ami_types(args: GpuTrainingPlatformArgs) -> dict[str, str]:
    """The AMI type of every GPU pool, by the key path that sets it. Every kind of GPU pool the
    platform runs belongs here, since the GPU Operator serves them all."""
    managed = {f"gpuNodeGroups[{i}].amiType": pool.ami_type for i, pool in enumerate(args.gpu_node_groups)}
    # A Karpenter pool's EC2NodeClass selects the AL2023 alias; for NVIDIA instance types Karpenter
    # resolves it to the AL2023 NVIDIA AMI, the same node OS as AL2023_x86_64_NVIDIA.
    karpenter = {
        f"karpenter.gpuNodePools[{i}]": "AL2023_x86_64_NVIDIA"
        for i, _ in enumerate(args.karpenter.gpu_node_pools if args.karpenter.enabled else [])
    }
    return {**managed, **karpenter}


def validate_gpu_node_os(ami_types: dict[str, str]) -> list[Problem]:
    """GPU pools must share one node OS family.

    The GPU Operator's driver/toolkit/device-plugin switches are cluster-wide, and the families
    need different ones: Bottlerocket runs its own device plugin, Amazon Linux 2023 needs the
    operator's. (Per-node ``nvidia.com/gpu.deploy.*`` labels could bridge them, but every pool kind
    would then have to carry them; one family per cluster is simpler and what the seed runs.)
    """
    known = {path: node_os_of(ami) for path, ami in ami_types.items() if ami in NVIDIA_AMI_TYPES}
    if not known:
        return []
    first_path, first = next(iter(known.items()))
    return [
        Problem(
            path,
            f"'{ami_types[path]}' is {node_os.name} but {first_path} is {first.name}: every GPU pool runs one OS "
            "family, because the GPU Operator's driver, toolkit and device-plugin settings are cluster-wide "
            "(Bottlerocket ships its own device plugin, Amazon Linux 2023 does not)",
        )
        for path, node_os in known.items()
        if node_os != first
    ]


def validate_gpu_operator(config: GpuOperatorConfig, path: str = "gpuOperator") -> list[Problem]:
    """Rules of the GPU Operator settings that involve more than one key."""
    problems: list[Problem] = []
    if config.service_monitor_labels and not config.prometheus_operator:
        problems.append(
            Problem(
                f"{path}.serviceMonitorLabels",
                "is only used with prometheusOperator: true (no ServiceMonitor is made without the Prometheus operator)",
            )
        )
    for key, value in config.service_monitor_labels.items():
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            problems.append(Problem(f"{path}.serviceMonitorLabels.{key}", "is not a valid Kubernetes label"))
    return problems


def validate_topology_labeler(config: TopologyLabelerConfig, path: str) -> list[Problem]:
    """Rules of the labeler's settings that involve more than one key."""
    problems: list[Problem] = []
    resources = config.resources
    if cpu_millicores(resources.cpu_request) > cpu_millicores(resources.cpu_limit):
        problems.append(Problem(f"{path}.resources.cpuRequest", f"'{resources.cpu_request}' exceeds cpuLimit '{resources.cpu_limit}'"))
    if memory_bytes(resources.memory_request) > memory_bytes(resources.memory_limit):
        problems.append(
            Problem(f"{path}.resources.memoryRequest", f"'{resources.memory_request}' exceeds memoryLimit '{resources.memory_limit}'")
        )
    return problems


def validate_platform(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Rules of the whole stack that involve more than one key."""
    problems: list[Problem] = []
    subnet_ids = [s.id for s in args.network.subnets]
    for i, subnet in enumerate(args.network.subnets):
        if subnet_ids.index(subnet.id) != i:
            problems.append(Problem(f"network.subnets[{i}].id", f"'{subnet.id}' is listed twice"))
        if not subnet.availability_zone.startswith(args.region):
            problems.append(
                Problem(f"network.subnets[{i}].availabilityZone", f"'{subnet.availability_zone}' is not in region {args.region}")
            )

    system = args.system_node_group
    if system.enabled:
        if not system.min_size <= system.desired_size <= system.max_size:
            problems.append(Problem("systemNodeGroup.desiredSize", f"must lie between minSize ({system.min_size}) and maxSize ({system.max_size})"))
        if system.ami_type in NVIDIA_AMI_TYPES or "NVIDIA" in system.ami_type or "NEURON" in system.ami_type:
            problems.append(Problem("systemNodeGroup.amiType", f"'{system.ami_type}' is an accelerator AMI; system nodes use a STANDARD or Bottlerocket AMI"))

    names = [pool.name for pool in args.gpu_node_groups]
    for i, pool in enumerate(args.gpu_node_groups):
        path = f"gpuNodeGroups[{i}]"
        if names.index(pool.name) != i:
            problems.append(Problem(f"{path}.name", f"'{pool.name}' is used by gpuNodeGroups[{names.index(pool.name)}] too"))
        problems.extend(validate_gpu_node_group(pool, args.network, path))
    problems.extend(validate_gpu_node_os(gpu_pool_ami_types(args)))
    problems.extend(validate_gpu_operator(args.gpu_operator))
    problems.extend(validate_topology_labeler(args.topology_labeler, "topologyLabeler"))
    problems.extend(validate_karpenter(args.karpenter, args.network, frozenset(names)))

    for key, value in args.tags.items():
        if not 1 <= len(key) <= 128 or key.lower().startswith("aws:"):
            problems.append(Problem(f"tags.{key}", "tag keys have 1-128 characters and must not start with 'aws:'"))
        if len(value) > 256:
            problems.append(Problem(f"tags.{key}", "tag values have at most 256 characters"))
        if args.karpenter.enabled and _KARPENTER_RESTRICTED_TAG.match(key):
            problems.append(
                Problem(f"tags.{key}", "is a tag Karpenter sets itself and its EC2NodeClass refuses (kubernetes.io/cluster/, eks:eks-cluster-name, karpenter.*)")
            )

    # Imported here because the scheduling rules build on this module's models; their quota
    # arithmetic lives with the scheduling policies.
    from .scheduling_policies import validate_scheduling

    problems.extend(validate_scheduling(args))
    return problems


# --- loading -----------------------------------------------------------------------------------

def _key_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the key at ``loc`` (for listing the keys it allows)."""
    model: Any = GpuTrainingPlatformArgs
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def problems_from_validation_error(error: pydantic.ValidationError) -> list[Problem]:
    """Pydantic's errors as problems, with camelCase key paths and what each key allows."""
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _key_path(loc) or "(stack configuration)"
        if item["type"] == "extra_forbidden":
            model = _model_at(loc)
            allowed = ", ".join(f.alias or n for n, f in model.model_fields.items()) if model else "see README"
            problems.append(Problem(path, f"unknown key; allowed: {allowed}"))
        elif item["type"] == "missing":
            problems.append(Problem(path, "is required"))
        elif item["type"] in ("string_pattern_mismatch",):
            problems.append(Problem(path, f"{item['input']!r} does not match {item['ctx']['pattern']}"))
        else:
            problems.append(Problem(path, item["msg"]))
    return problems


def parse_platform_args(raw: dict[str, Any]) -> GpuTrainingPlatformArgs:
    """Build and check the typed arguments from plain data (camelCase keys); raise ``ConfigError``."""
    try:
        args = GpuTrainingPlatformArgs.model_validate(raw)
    except pydantic.ValidationError as error:
        raise ConfigError(problems_from_validation_error(error)) from None
    problems = validate_platform(args)
    if problems:
        raise ConfigError(problems)
    return args


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def load_stack_config() -> GpuTrainingPlatformArgs:
    """Read the current stack's configuration (project keys plus ``aws:region``) and check it."""
    import pulumi.runtime.config as runtime_config

    settings = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{PROJECT}:"
    raw: dict[str, Any] = {
        key[len(prefix):]: _decode(value) if isinstance(value, str) else value
        for key, value in settings.items()
        if key.startswith(prefix)
    }
    if "region" in raw:
        raise ConfigError([Problem(f"{PROJECT}:region", "set the region with aws:region, not in the project namespace")])
    region = settings.get("aws:region")
    if region is None:
        raise ConfigError([Problem("aws:region", "is required (e.g. us-west-2)")])
    return parse_platform_args({**raw, "region": region})
