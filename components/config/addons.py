"""In-cluster add-ons' configuration: the NVIDIA GPU Operator and the topology labeler."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Optional, Union

import pulumi
from pydantic import Field, PlainValidator, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from ..labeler.settings import DEFAULT_INTERVAL_SECONDS
from ..facts.node_os import node_os_of
from ..facts.quantity import parse_quantity
from .base import _LABEL_KEY, _LABEL_VALUE, NVIDIA_AMI_TYPES, Problem, Quantity, _Model, supported_version
from .inputs import is_unknown

if TYPE_CHECKING:
    from .stack import GpuTrainingPlatformArgs

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


class GpuOperatorConfig(_Model):
    """The NVIDIA GPU Operator (a Helm release); its values are derived from the GPU pools' node OS."""

    chart_version: Annotated[str, supported_version(GPU_OPERATOR_CHART_VERSIONS)] = GPU_OPERATOR_CHART_VERSIONS[0]
    """Chart version of `gpu-operator` from helm.ngc.nvidia.com/nvidia. Default: v26.7.0 (v24.9.2 also accepted)."""
    prometheus_operator: bool = False
    """Whether the cluster runs the Prometheus operator: only then is a ServiceMonitor made for the DCGM exporter. Default: false."""
    service_monitor_labels: dict[str, str] = {}
    """Labels on that ServiceMonitor, matching Prometheus' `serviceMonitorSelector` (e.g. `release: kube-prometheus-stack`). Default: none."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """MIG strategy of the device plugin. Only `none`: MIG slices a training GPU (latency, less VRAM per process). Default: none."""
    time_slicing_replicas: int = Field(default=1, ge=1)
    """Pods that share each GPU by time-slicing. Only 1: sharing adds latency and splits VRAM. Default: 1."""

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


def image_reference_problem(value: Any) -> Optional[str]:
    """Why ``value`` is not an image reference the kubelet can pull, or None (also for an Output: an
    image built in the same program is known only once pushed)."""
    if is_unknown(value):
        return None
    match = _IMAGE_REFERENCE.match(value)
    if match is None or len(match.group("name")) > 255:
        return (
            f"'{value}' is not an image reference; use <registry>/<repository>:<tag> or "
            "<registry>/<repository>@sha256:<64 hex digits> (repository paths are lower case)"
        )
    return None


def _image_reference(value: str) -> re.Match[str]:
    reason = image_reference_problem(value)
    if reason is not None:
        raise PydanticCustomError("image", reason)
    return _IMAGE_REFERENCE.match(value)  # type: ignore[return-value]


def check_image_grammar(value: str) -> str:
    """An image reference the kubelet can pull: the distribution grammar above."""
    _image_reference(value)
    return value


def _image_input(check: Callable[[str], str]) -> Callable[[Any], Any]:
    """A validator that applies ``check`` to a string and lets an Output through unchecked."""

    def validate(value: Any) -> Any:
        if is_unknown(value):
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("input_type", f"an image must be a string or a pulumi.Output, not {type(value).__name__}")
        return check(value)

    return validate


ImageReference = Annotated[
    Union[str, pulumi.Output[str]], PlainValidator(_image_input(check_image_grammar)), WithJsonSchema({"type": "string"})
]
"""A container image reference (registry, lower-case repository path, tag and/or sha256 digest), or
the Output of an image built in the same program."""


def _check_image_reference(value: str) -> str:
    match = _image_reference(value)
    if match.group("digest") is None and match.group("tag") in (None, "latest"):
        raise PydanticCustomError(
            "image",
            f"'{value}' names no fixed image (no digest, and its tag is '{match.group('tag') or 'latest'}'); "
            "pin it by digest (@sha256:...) or by a release tag",
        )
    return value


LabelerImage = Annotated[
    Union[str, pulumi.Output[str]], PlainValidator(_image_input(_check_image_reference)), WithJsonSchema({"type": "string"})
]
"""An image reference, checked; or the Output of an image built in the same program (e.g. a docker-build ``Image``'s ``ref``)."""


class LabelerResourcesConfig(_Model):
    """CPU and memory of the labeler container. The process idles almost all the time; memory is
    mostly the EC2 service model that botocore loads (about 85 MiB resident, measured)."""

    cpu_request: Quantity = "10m"
    """CPU request. Default: 10m."""
    memory_request: Quantity = "128Mi"
    """Memory request. Default: 128Mi."""
    cpu_limit: Quantity = "250m"
    """CPU limit. Default: 250m (start-up imports take about half a CPU-second)."""
    memory_limit: Quantity = "256Mi"
    """Memory limit. Default: 256Mi (headroom for the liveness probe's own interpreter)."""


class TopologyLabelerConfig(_Model):
    """The topology labeler: a DaemonSet on GPU nodes that fills in missing
    ``topology.k8s.aws/network-node-layer-N`` labels from EC2 and never overwrites one."""

    enabled: bool = True
    """Run the labeler on GPU nodes. Default: true."""
    image: Optional[LabelerImage] = None
    """Prebuilt labeler image, pinned by digest (`<registry>/<repository>@sha256:...`) or a release tag; skips the ECR repository and the image build. Default: none (the stack builds `components/labeler` and pushes it to a private ECR repository it creates; needs Docker where `pulumi up` runs)."""
    interval_seconds: int = Field(default=DEFAULT_INTERVAL_SECONDS, ge=60, le=86400)
    """Seconds between re-checks of a node. Default: 600."""
    resources: LabelerResourcesConfig = LabelerResourcesConfig()
    """Requests and limits of the labeler container. Default: 10m/128Mi requested, 250m/256Mi limit."""


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
    if parse_quantity(resources.cpu_request) > parse_quantity(resources.cpu_limit):
        problems.append(Problem(f"{path}.resources.cpuRequest", f"'{resources.cpu_request}' exceeds cpuLimit '{resources.cpu_limit}'"))
    if parse_quantity(resources.memory_request) > parse_quantity(resources.memory_limit):
        problems.append(
            Problem(f"{path}.resources.memoryRequest", f"'{resources.memory_request}' exceeds memoryLimit '{resources.memory_limit}'")
        )
    return problems
