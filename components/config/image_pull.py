"""How GPU nodes pull their images: the root volume's throughput, and the rules of nodeadm's
``FastImagePull`` feature gate (the SOCI snapshotter in parallel pull and unpack mode).

With the gate on, nodeadm configures containerd to use the SOCI snapshotter, which downloads the
layers of one image concurrently and unpacks them concurrently (awslabs/amazon-eks-ami,
``nodeadm/doc/examples.md`` "Enabling fast image pull (experimental)";
``nodeadm/internal/containerd/config.go`` ``UseSOCISnapshotter``, which ignores the gate below 4
vCPUs or 7 GiB of memory, far under every GPU type of the catalog). aws-samples/karpenter-blueprints'
``soci-snapshotter`` blueprint measured a 10.76 GB deep-learning image in 1m07s instead of 2m18s,
on a volume provisioned at 1,000 MiB/s. AWS calls the gate experimental, and says pulls get slower
with it below 600 MiB/s of root-volume throughput.

Where a node has an instance-store RAID0 array, nodeadm's ``setup-local-disks`` bind-mounts
``/var/lib/containerd`` (the content store) and ``/var/lib/soci-snapshotter-grpc`` (the
snapshotter's unpacked layers) onto the array, unless ``localStorage.disabledMounts`` lists
``Containerd`` or ``SOCI`` (``templates/al2023/runtime/bin/setup-local-disks``;
``nodeadm/api/v1alpha1/nodeconfig_types.go`` ``DisabledMount``). The pull then writes to NVMe, and
the root volume's throughput no longer bounds it.
"""

from __future__ import annotations

from typing import Sequence

from ..facts.instance_store import LOCAL_NVME_GB
from .problems import ProblemSink

GP3_THROUGHPUT_MIBPS = 250
"""gp3 throughput of every node's root volume (managed node groups' launch templates, Karpenter's
EC2NodeClasses): twice the 125 MiB/s baseline, so pulling and unpacking multi-GB CUDA images does
not stall node start-up. Fixed: no stack key sets it."""

FAST_IMAGE_PULL_MIN_THROUGHPUT_MIBPS = 600
"""Root-volume throughput below which AWS finds pulls slower with ``FastImagePull`` than without
(nodeadm ``doc/examples.md``: "We recommend at least 600MiB/s throughput. Below that value, you may
see longer image pull times with this flag")."""

FAST_IMAGE_PULL_GATE = "FastImagePull"
"""The nodeadm feature gate (``NodeConfig.spec.featureGates``; nodeadm API ``Feature``, enum
``InstanceIdNodeName | FastImagePull``)."""


def has_instance_store_array(instance_types: Sequence[str], instance_store_raid0: bool) -> bool:
    """Whether every node of a pool gets an instance-store RAID0 array: RAID0 is on and each of its
    instance types has instance-store NVMe."""
    return instance_store_raid0 and all(t in LOCAL_NVME_GB for t in instance_types)


def check_fast_image_pull(
    fast_image_pull: bool,
    ami_type: str,
    instance_types: Sequence[str],
    instance_store_raid0: bool,
    problem: ProblemSink,
) -> None:
    """``fastImagePull`` only where it speeds pulls up: an Amazon Linux 2023 node (the gate is
    nodeadm's; Bottlerocket has no nodeadm), whose images land on the instance-store array or on a
    root volume of at least 600 MiB/s."""
    if not fast_image_pull:
        return
    if not ami_type.startswith("AL2023"):
        problem(
            "fastImagePull",
            f"needs an Amazon Linux 2023 AMI: it is nodeadm's {FAST_IMAGE_PULL_GATE} feature gate, and '{ami_type}' "
            "has no nodeadm (Bottlerocket configures its snapshotter through its own settings); use amiType "
            "AL2023_x86_64_NVIDIA, or fastImagePull: false",
        )
        return
    if GP3_THROUGHPUT_MIBPS >= FAST_IMAGE_PULL_MIN_THROUGHPUT_MIBPS or has_instance_store_array(instance_types, instance_store_raid0):
        return
    if not instance_store_raid0:
        why = "the instance-store RAID0 array is off (storage.instanceStore: none)"
    else:
        lacking = [t for t in instance_types if t not in LOCAL_NVME_GB]
        why = f"{', '.join(lacking)} has no instance-store NVMe"
    problem(
        "fastImagePull",
        f"would slow image pulls: AWS finds them slower with it below {FAST_IMAGE_PULL_MIN_THROUGHPUT_MIBPS} MiB/s of "
        f"root-volume throughput, the root volume has {GP3_THROUGHPUT_MIBPS} MiB/s, and {why}; allowed with "
        "storage.instanceStore: raid0 on instance types that have instance-store NVMe, else set fastImagePull: false",
    )
