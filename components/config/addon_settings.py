"""In-cluster add-ons' configuration: the NVIDIA GPU Operator and the topology labeler."""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

import pulumi
from pydantic import Field, PlainValidator, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from ..labeler.settings import DEFAULT_INTERVAL_SECONDS
from ..facts.node_os import node_os_of
from ..facts.quantity import parse_quantity
from .base import _LABEL_KEY, _LABEL_VALUE, NVIDIA_AMI_TYPES, Quantity, _Model, supported_version
from .problems import Problem
from .gpu_sharing import GPU_SHARING_REFUSED
from .image_references import _check_image_reference, _image_input

GPU_OPERATOR_CHART_VERSIONS = ("v26.7.0", "v24.9.2")
"""GPU Operator chart versions this library derives values for; ``tests/unit/addons/test_chart_source_values.py``
checks every values key against each one's ``values.yaml``. The first is the default: the current
release; v24.9.2 is the version the seed names."""

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
    """CPU limit. Default: 250m (headroom for the start-up imports)."""
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
