"""Instance-store NVMe of the GPU catalog's instance types.

Source: Karpenter 1.14's "Instance Types" reference (the ``karpenter.k8s.aws/instance-local-nvme``
label, total NVMe instance-store size in GB); ``tests/unit/facts/test_instance_store.py`` re-reads it when
``../shared/reference`` is present.
"""

from __future__ import annotations

from typing import Iterable, Optional

LOCAL_NVME_GB: dict[str, int] = {
    "g4dn.xlarge": 125, "g4dn.2xlarge": 225, "g4dn.4xlarge": 225, "g4dn.8xlarge": 900,
    "g4dn.12xlarge": 900, "g4dn.16xlarge": 900, "g4dn.metal": 1800,
    "gr6.4xlarge": 600, "gr6.8xlarge": 900,
    "g7.2xlarge": 440, "g7.4xlarge": 875, "g7.8xlarge": 930, "g7.12xlarge": 1900,
    "g7.24xlarge": 3800, "g7.48xlarge": 7600,
    "g7e.2xlarge": 1900, "g7e.4xlarge": 1900, "g7e.8xlarge": 1900, "g7e.12xlarge": 3800,
    "g7e.24xlarge": 7600, "g7e.48xlarge": 15200,
    "p3dn.24xlarge": 1800,
    "g5.xlarge": 250, "g5.2xlarge": 450, "g5.4xlarge": 600, "g5.8xlarge": 900,
    "g5.12xlarge": 3800, "g5.16xlarge": 1900, "g5.24xlarge": 3800, "g5.48xlarge": 7600,
    "g6.xlarge": 250, "g6.2xlarge": 450, "g6.4xlarge": 600, "g6.8xlarge": 900,
    "g6.12xlarge": 3760, "g6.16xlarge": 1880, "g6.24xlarge": 3760, "g6.48xlarge": 7520,
    "g6e.xlarge": 250, "g6e.2xlarge": 450, "g6e.4xlarge": 600, "g6e.8xlarge": 900,
    "g6e.12xlarge": 3800, "g6e.16xlarge": 1900, "g6e.24xlarge": 3800, "g6e.48xlarge": 7600,
    "p4d.24xlarge": 8000, "p4de.24xlarge": 8000,
    "p5.4xlarge": 3800, "p5.48xlarge": 30400,
    "p5e.48xlarge": 30400, "p5en.48xlarge": 30400,
    "p6-b200.48xlarge": 30400, "p6-b300.48xlarge": 30400,
}
"""Total instance-store NVMe per node in GB (10^9 bytes); p5.48xlarge is 8 x 3.8 TB."""

EPHEMERAL_STORAGE_SHARE = 2
"""A training pod requests 1/2 of the smallest allowed node's instance store as ephemeral storage:
the same RAID0 array also holds the image cache (multi-GB CUDA images), logs and the kubelet's
10% eviction reserve (nodefs.available), so half of it is what a pod can count on."""


def smallest_local_nvme_gb(instance_types: Iterable[str]) -> Optional[int]:
    """The smallest instance store among the types; None when one of them has none or is unknown."""
    sizes = [LOCAL_NVME_GB.get(t) for t in instance_types]
    known = [size for size in sizes if size is not None]
    if not sizes or len(known) < len(sizes):
        return None
    return min(known)


def ephemeral_storage_request(instance_types: Iterable[str]) -> Optional[str]:
    """The ephemeral-storage request of a training pod on RAID0 nodes of these types, in Gi; None
    when a type has no instance store (its pods then get no request)."""
    size_gb = smallest_local_nvme_gb(instance_types)
    if size_gb is None:
        return None
    return f"{size_gb * 10**9 // EPHEMERAL_STORAGE_SHARE // 2**30}Gi"
