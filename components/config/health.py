"""GPU node health's configuration: the EKS node monitoring agent and the pre-flight checks.

Repair itself is configured where the pools are (managed node groups' ``nodeRepair``, Karpenter's
``nodeRepair`` feature gate); this section says how failures are detected and how a pool is proven
fit before training starts.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from .images import _check_image_reference
from .base import _Model

NODE_MONITORING_AGENT_ADDON = "eks-node-monitoring-agent"
"""EKS add-on name of the node monitoring agent (docs.aws.amazon.com/eks/latest/userguide/node-health.html)."""

DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
"""NVIDIA's DCGM image (``nv-hostengine`` and ``dcgmi``), the tag the GPU Operator v26.7.0 chart
pins for its standalone DCGM (values.yaml ``dcgm.repository``/``image``/``version``)."""

DCGM_DIAG_LEVELS = (1, 2, 3, 4)
"""``dcgmi diag -r`` run levels: 1 quick (seconds), 2 medium (about two minutes), 3 long (up to
half an hour), 4 extended (an hour or more) (NVIDIA DCGM user guide, "Run Levels")."""

NCCL_MAX_BYTES = 2 * 1024**3
"""Largest all-reduce message of the pre-flight NCCL test: 2 GiB, the size the published baselines
(``facts.nccl_baselines``) are measured at."""


class NodeMonitoringConfig(_Model):
    """The EKS node monitoring agent (EKS add-on): sets node conditions such as AcceleratedHardwareReady that node auto repair acts on."""

    enabled: bool = True
    """Install the `eks-node-monitoring-agent` add-on, its DCGM pods tolerating the GPU taint. Default: true."""
    addon_version: Optional[str] = Field(default=None, pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
    """Add-on version to pin, e.g. `v1.7.0-eksbuild.1`, so an upgrade is a reviewed change. Default: EKS's default build for the cluster's Kubernetes version, read at every `pulumi up` (it moves with the version, not with each new build)."""


class DcgmDiagConfig(_Model):
    """DCGM diagnostics: one pod per GPU node running ``dcgmi diag -r <level>`` on all its GPUs."""

    enabled: bool = True
    """Run DCGM diagnostics on each node of every GPU pool that starts with nodes. Default: true."""
    level: int = Field(default=2, ge=min(DCGM_DIAG_LEVELS), le=max(DCGM_DIAG_LEVELS))
    """`dcgmi diag -r` level: 1 quick, 2 medium (about two minutes), 3 long, 4 extended. Default: 2."""
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
