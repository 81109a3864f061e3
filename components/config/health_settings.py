"""GPU node health's configuration: the EKS node monitoring agent, the health gate and the
pre-flight checks.

Repair itself is configured where the pools are (managed node groups' ``nodeRepair``, Karpenter's
``nodeRepair`` feature gate); this section says how failures are detected, how a node that joins
proves itself before it gets work, and how a pool is proven fit before training starts.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from .image_references import _check_image_reference
from .base import _Model
from .problems import Problem

NODE_MONITORING_AGENT_ADDON = "eks-node-monitoring-agent"
"""EKS add-on name of the node monitoring agent (docs.aws.amazon.com/eks/latest/userguide/node-health.html)."""

DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
"""NVIDIA's DCGM image (``nv-hostengine`` and ``dcgmi``), the tag the GPU Operator v26.7.0 chart
pins for its standalone DCGM (values.yaml ``dcgm.repository``/``image``/``version``)."""

DCGM_DIAG_LEVELS = (1, 2, 3, 4)
"""``dcgmi diag -r`` run levels: 1 quick (seconds), 2 medium (about two minutes), 3 long (about 15
minutes), 4 extended (longer; NVIDIA publishes no figure) (NVIDIA DCGM, ``dcgmi diag`` reference,
``--run``)."""

HEALTH_GATE_MIN_MINUTES = {1: 5, 2: 10, 3: 30, 4: 120}
"""The shortest ``healthGate.timeoutMinutes`` each DCGM level may run under: its own length (see
``DCGM_DIAG_LEVELS``; level 4's is unpublished, so two hours) plus pulling the DCGM image (about
3 GB) and the EFA checks, with room for a loaded node."""

NCCL_MAX_BYTES = 2 * 1024**3
"""Largest all-reduce message of the pre-flight NCCL test: 2 GiB, the size the published baselines
(``facts.nccl_baselines``) are measured at."""


class NodeMonitoringConfig(_Model):
    """The EKS node monitoring agent (EKS add-on): sets node conditions such as AcceleratedHardwareReady that node auto repair acts on."""

    enabled: bool = True
    """Install the `eks-node-monitoring-agent` add-on, its DCGM pods tolerating the GPU taint. Default: true."""
    addon_version: Optional[str] = Field(default=None, pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
    """Add-on version to pin, e.g. `v1.7.0-eksbuild.1`, so an upgrade is a reviewed change. Default: EKS's default build for the cluster's Kubernetes version, read at every `pulumi up` (it moves with the version, not with each new build)."""


class HealthGateConfig(_Model):
    """The health gate: every GPU node joins with the startup taint `eks-gpu-training/unverified:NoSchedule`, and gets work only once its checks pass (DCGM diagnostics, its EFA devices, an EFA loopback test); a node whose GPUs fail later is taken out of its jobs."""

    enabled: bool = False
    """Run the gate, and give every GPU pool's nodes the startup taint (managed node groups' taints, Karpenter NodePools' `startupTaints`). Default: false."""
    image: Optional[Annotated[str, AfterValidator(_check_image_reference)]] = None
    """Prebuilt gate image, pinned by digest or a release tag; skips the ECR repository and the image build. Default: none (the stack builds `components/healthgate` and pushes it to a private ECR repository it creates; needs Docker where `pulumi up` runs)."""
    dcgm_level: int = Field(default=2, ge=min(DCGM_DIAG_LEVELS), le=max(DCGM_DIAG_LEVELS))
    """`dcgmi diag -r` level each joining node runs: 1 quick (seconds), 2 medium (about two minutes), 3 long (about 15 minutes), 4 extended. Default: 2."""
    dcgm_image: Annotated[str, AfterValidator(_check_image_reference)] = DCGM_IMAGE
    """Image with `nv-hostengine` and `dcgmi`. Default: nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04."""
    efa_loopback_image: Optional[Annotated[str, AfterValidator(_check_image_reference)]] = None
    """Image with libfabric's `fi_pingpong` under /opt/amazon/efa/bin (AWS's EFA installer puts it there; AWS's nccl-tests image has it), for a ping-pong over the node's first EFA device; without it only the EFA device count is checked. Default: none."""
    timeout_minutes: int = Field(default=20, ge=5, le=600)
    """How long a node's checks may take, from their Job's creation (image pulls included), before the node counts as failed. Default: 20."""
    quarantine: bool = True
    """Taint a node whose node monitoring agent reports `AcceleratedHardwareReady` False (any reason but `DCGMError`) with `eks-gpu-training/unhealthy:NoExecute`, evicting its training pods, never more than half of a pool; a node that recovers is checked again. Default: true."""
    max_node_replacements_per_hour: int = Field(default=2, ge=0, le=100)
    """NodeClaims of failing nodes the gate deletes per Karpenter pool in any hour, each after a doubling wait from 5 minutes; 0 keeps every failing node for a person. Default: 2."""


def validate_health_gate(config: HealthGateConfig, path: str = "healthGate") -> list[Problem]:
    """A check deadline the chosen DCGM level cannot meet is refused."""
    shortest = HEALTH_GATE_MIN_MINUTES[config.dcgm_level]
    if config.enabled and config.timeout_minutes < shortest:
        return [Problem(f"{path}.timeoutMinutes", f"{config.timeout_minutes} is shorter than DCGM level {config.dcgm_level} and the "
                        f"image pull take; allow at least {shortest} minutes, or choose a lower dcgmLevel")]
    return []


class DcgmDiagConfig(_Model):
    """DCGM diagnostics: one pod per GPU node running ``dcgmi diag -r <level>`` on all its GPUs."""

    enabled: bool = True
    """Run DCGM diagnostics on each node of every GPU pool that starts with nodes. Default: true."""
    level: int = Field(default=2, ge=min(DCGM_DIAG_LEVELS), le=max(DCGM_DIAG_LEVELS))
    """`dcgmi diag -r` level: 1 quick, 2 medium (about two minutes), 3 long (about 15 minutes), 4 extended. Default: 2."""
    image: Annotated[str, AfterValidator(_check_image_reference)] = DCGM_IMAGE
    """Image with `nv-hostengine` and `dcgmi`, pinned by tag or digest. Default: nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04."""


class NcclTestConfig(_Model):
    """The NCCL all-reduce test (nccl-tests ``all_reduce_perf`` under MPI) across each multi-node EFA pool."""

    enabled: bool = True
    """Run the test on every EFA pool that starts with two or more nodes. Default: true."""
    image: Optional[Annotated[str, AfterValidator(_check_image_reference)]] = None
    """Image with Open MPI, sshd and nccl-tests built with MPI=1 at /opt/nccl-tests/build (AWS's nccl-tests.Dockerfile, or public.ecr.aws/hpc-cloud/nccl-tests:<tag>); required when the test runs. Default: none."""
    min_bus_bandwidth_fraction: float = Field(default=0.9, gt=0, le=1)
    """Fail when the bus bandwidth at 2 GiB is below this fraction of the published baseline for the instance type and node count. Default: 0.9."""


class PreflightConfig(_Model):
    """Checks that prove a GPU pool fit for a multi-node job, run as Jobs that `pulumi up` waits for."""

    enabled: bool = False
    """Run the pre-flight checks at `pulumi up` on the GPU pools that start with nodes. Default: false."""
    namespace: Optional[str] = None
    """Namespace among `scheduling.namespaces`. Default: the first one."""
    timeout_minutes: int = Field(default=60, ge=5, le=720)
    """How long `pulumi up` waits for each check's Job. Default: 60."""
    dcgm_diag: DcgmDiagConfig = DcgmDiagConfig()
    """DCGM diagnostics per node. Default: on, level 2."""
    nccl: NcclTestConfig = NcclTestConfig()
    """NCCL all-reduce test per multi-node EFA pool. Default: on (needs `image`), fail below 90% of the baseline."""
