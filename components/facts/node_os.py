"""What the operating system of a GPU node already ships of the NVIDIA stack.

The GPU Operator's values are derived from these facts (``components/addons/gpu_operator.py``): the
operator installs only what the node OS lacks. Sources: the EKS user guide "Amazon EKS optimized
accelerated AMIs" (docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html) and the
Bottlerocket NVIDIA variants' documentation (bottlerocket.dev, "NVIDIA GPUs").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuNodeOs:
    """One GPU node OS family and the NVIDIA components it ships in the image."""

    name: str
    """Human-readable family name, used in messages."""
    ships_driver: bool
    """The kernel driver (and fabric manager) are in the image: the operator must not install one."""
    ships_container_toolkit: bool
    """The NVIDIA container toolkit is installed and containerd is configured with the ``nvidia``
    runtime: the operator's toolkit daemonset would only fight over containerd's configuration."""
    ships_device_plugin: bool
    """The OS runs its own NVIDIA Kubernetes device plugin (advertising ``nvidia.com/gpu``): a
    second one from the operator would register the same resource twice."""


AL2023_NVIDIA = GpuNodeOs(
    name="Amazon Linux 2023 NVIDIA",
    ships_driver=True,
    ships_container_toolkit=True,
    # The AL2023 NVIDIA AMI ships driver, CUDA user-mode driver, container toolkit, fabric manager
    # and EFA minimal, but no device plugin: the operator provides it.
    ships_device_plugin=False,
)
BOTTLEROCKET_NVIDIA = GpuNodeOs(
    name="Bottlerocket NVIDIA",
    ships_driver=True,
    ships_container_toolkit=True,
    # Bottlerocket's aws-k8s-*-nvidia variants run the NVIDIA device plugin as a host service.
    ships_device_plugin=True,
)

NODE_OS_BY_AMI_TYPE: dict[str, GpuNodeOs] = {
    "AL2023_x86_64_NVIDIA": AL2023_NVIDIA,
    "BOTTLEROCKET_x86_64_NVIDIA": BOTTLEROCKET_NVIDIA,
    "BOTTLEROCKET_x86_64_NVIDIA_FIPS": BOTTLEROCKET_NVIDIA,
}
"""The node OS of every GPU AMI type the configuration accepts (``config.NVIDIA_AMI_TYPES``)."""


def node_os_of(ami_type: str) -> GpuNodeOs:
    """The node OS of an EKS AMI type; ``KeyError`` for a type that is not an NVIDIA GPU AMI."""
    return NODE_OS_BY_AMI_TYPE[ami_type]
