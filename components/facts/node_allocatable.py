"""What a node offers pods: the kubelet's allocatable CPU, memory and pods, computed as the EKS
AL2023 AMI configures the kubelet, for the system node group's types and every GPU type of the catalog.

The instance facts (vCPUs, memory, maximum pods) are those of Karpenter 1.14's "Instance Types"
reference (aws/karpenter-provider-aws, website/content/en/v1.14/reference/instance-types.md), which
EC2's DescribeInstanceTypes fills; the pod count is the ENI limit the AMI's ``eni-max-pods.txt``
gives (ENIs x (IPv4 addresses per ENI - 1) + 2). ``tests/unit/facts/test_node_allocatable.py`` re-reads that
reference (when ``../shared/reference`` is present) and checks both the facts and that
``allocatable`` below reproduces the allocatable CPU and memory it lists for every type.

Reservations (awslabs/amazon-eks-ami, nodeadm ``internal/kubelet/config.go``): kube-reserved CPU is
6% of the first core, 1% of the second, 0.5% of the third and fourth and 0.25% of every further core;
kube-reserved memory is 11 MiB per pod plus 255 MiB; the kubelet evicts below 100 MiB free
(``evictionHard memory.available``). Hugepages a node pre-allocates come out of allocatable memory
too (kubernetes ``pkg/kubelet/nodestatus/setters.go``, ``MachineInfo``: each ``hugepages-*``
capacity is subtracted from allocatable memory). The memory the kubelet sees is less than EC2's figure by what the
hypervisor and kernel keep; Karpenter's default ``VM_MEMORY_OVERHEAD_PERCENT`` of 7.5% is the
estimate used here, the figure the reference's allocatable memory is computed with.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import GPU_INSTANCE_TYPES


@dataclass(frozen=True)
class NodeShape:
    """An instance type as the kubelet sees it."""

    vcpus: int
    """vCPUs per node."""
    memory_mib: int
    """Memory per node in MiB, as EC2 lists it."""
    max_pods: int
    """Pods the kubelet admits (the AMI's ENI-based maxPods)."""


@dataclass(frozen=True)
class Allocatable:
    """What the scheduler may place on one node."""

    cpu_millicores: int
    memory_mib: int
    pods: int


VM_MEMORY_OVERHEAD_PERCENT = 7.5
"""Memory EC2 lists but the kubelet never sees (Karpenter's default estimate, chart value
``settings.vmMemoryOverheadPercent: 0.075``)."""

EVICTION_HARD_MEMORY_MIB = 100
"""The kubelet's ``evictionHard memory.available`` on EKS AMIs."""


# name: (vcpus, memory MiB, max pods); general-purpose, compute and memory types fit for controllers.
SYSTEM_INSTANCE_TYPES: dict[str, NodeShape] = {
    name: NodeShape(*facts)
    for name, facts in {
        "m5.large": (2, 8192, 29), "m5.xlarge": (4, 16384, 58),
        "m5.2xlarge": (8, 32768, 58), "m5.4xlarge": (16, 65536, 234),
        "m6i.large": (2, 8192, 29), "m6i.xlarge": (4, 16384, 58),
        "m6i.2xlarge": (8, 32768, 58), "m6i.4xlarge": (16, 65536, 234),
        "m6a.large": (2, 8192, 29), "m6a.xlarge": (4, 16384, 58),
        "m6a.2xlarge": (8, 32768, 58), "m6a.4xlarge": (16, 65536, 234),
        "m7i.large": (2, 8192, 29), "m7i.xlarge": (4, 16384, 58),
        "m7i.2xlarge": (8, 32768, 58), "m7i.4xlarge": (16, 65536, 234),
        "m7a.large": (2, 8192, 29), "m7a.xlarge": (4, 16384, 58),
        "m7a.2xlarge": (8, 32768, 58), "m7a.4xlarge": (16, 65536, 234),
        "c6i.large": (2, 4096, 29), "c6i.xlarge": (4, 8192, 58),
        "c6i.2xlarge": (8, 16384, 58), "c6i.4xlarge": (16, 32768, 234),
        "c7i.large": (2, 4096, 29), "c7i.xlarge": (4, 8192, 58),
        "c7i.2xlarge": (8, 16384, 58), "c7i.4xlarge": (16, 32768, 234),
        "r6i.large": (2, 16384, 29), "r6i.xlarge": (4, 32768, 58),
        "r6i.2xlarge": (8, 65536, 58), "r6i.4xlarge": (16, 131072, 234),
        "r7i.large": (2, 16384, 29), "r7i.xlarge": (4, 32768, 58),
        "r7i.2xlarge": (8, 65536, 58), "r7i.4xlarge": (16, 131072, 234),
    }.items()
}
"""Instance types the system node group may use, with the facts its allocatable is computed from."""


GPU_INSTANCE_MAX_PODS: dict[str, int] = {
    "g4dn.xlarge": 29, "g4dn.2xlarge": 29, "g4dn.4xlarge": 29, "g4dn.8xlarge": 58, "g4dn.12xlarge": 234,
    "g4dn.16xlarge": 58, "g4dn.metal": 737, "g5.xlarge": 58, "g5.2xlarge": 58, "g5.4xlarge": 234,
    "g5.8xlarge": 234, "g5.12xlarge": 737, "g5.16xlarge": 234, "g5.24xlarge": 737, "g5.48xlarge": 345,
    "g6.xlarge": 58, "g6.2xlarge": 58, "g6.4xlarge": 234, "g6.8xlarge": 234, "g6.12xlarge": 234,
    "g6.16xlarge": 737, "g6.24xlarge": 737, "g6.48xlarge": 737, "g6e.xlarge": 58, "g6e.2xlarge": 58,
    "g6e.4xlarge": 234, "g6e.8xlarge": 234, "g6e.12xlarge": 292, "g6e.16xlarge": 737, "g6e.24xlarge": 492,
    "g6e.48xlarge": 492, "gr6.4xlarge": 234, "gr6.8xlarge": 234, "g7.2xlarge": 254, "g7.4xlarge": 506,
    "g7.8xlarge": 632, "g7.12xlarge": 758, "g7.24xlarge": 1514, "g7.48xlarge": 758, "g7e.2xlarge": 254,
    "g7e.4xlarge": 506, "g7e.8xlarge": 506, "g7e.12xlarge": 632, "g7e.24xlarge": 632, "g7e.48xlarge": 632,
    "p3dn.24xlarge": 737, "p4d.24xlarge": 737, "p4de.24xlarge": 737, "p5.4xlarge": 118, "p5.48xlarge": 100,
    "p5e.48xlarge": 100, "p5en.48xlarge": 198, "p6-b200.48xlarge": 198, "p6-b300.48xlarge": 198,
}
"""Pods the kubelet admits on each GPU type of the catalog (the same reference's ``pods``, the ENI
limit); with the catalog's vCPUs and memory, the facts a GPU node's allocatable is computed from."""


def node_shape(instance_type: str) -> NodeShape:
    """A system or GPU type as the kubelet sees it; KeyError for a type not listed."""
    if instance_type in SYSTEM_INSTANCE_TYPES:
        return SYSTEM_INSTANCE_TYPES[instance_type]
    gpu = GPU_INSTANCE_TYPES[instance_type]
    return NodeShape(gpu.vcpus, gpu.memory_mib, GPU_INSTANCE_MAX_PODS[instance_type])


def kube_reserved_cpu_millicores(vcpus: int) -> float:
    """CPU the EKS AMI reserves for the kubelet and container runtime."""
    cores = [(1, 60.0), (1, 10.0), (2, 5.0)]
    reserved, left = 0.0, vcpus
    for count, per_core in cores:
        taken = min(count, left)
        reserved += taken * per_core
        left -= taken
    return reserved + left * 2.5


def kube_reserved_memory_mib(max_pods: int) -> int:
    """Memory the EKS AMI reserves for the kubelet and container runtime."""
    return 11 * max_pods + 255


def allocatable(instance_type: str, *, hugepages_mib: int = 0) -> Allocatable:
    """The kubelet's allocatable on one node of ``instance_type`` that pre-allocates
    ``hugepages_mib`` of hugepages; KeyError for a type not listed."""
    shape = node_shape(instance_type)
    visible_memory = int(shape.memory_mib * (100 - VM_MEMORY_OVERHEAD_PERCENT) / 100)
    return Allocatable(
        cpu_millicores=int(shape.vcpus * 1000 - kube_reserved_cpu_millicores(shape.vcpus)),
        memory_mib=visible_memory - kube_reserved_memory_mib(shape.max_pods) - EVICTION_HARD_MEMORY_MIB - hugepages_mib,
        pods=shape.max_pods,
    )
