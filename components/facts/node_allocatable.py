"""What a system node offers pods: the kubelet's allocatable CPU, memory and pods, computed as the EKS
AL2023 AMI configures the kubelet.

The instance facts (vCPUs, memory, maximum pods) are those of Karpenter 1.14's "Instance Types"
reference (aws/karpenter-provider-aws, website/content/en/v1.14/reference/instance-types.md), which
EC2's DescribeInstanceTypes fills; the pod count is the ENI limit the AMI's ``eni-max-pods.txt``
gives (ENIs x (IPv4 addresses per ENI - 1) + 2). ``tests/test_node_allocatable.py`` re-reads that
reference (when ``../shared/reference`` is present) and checks both the facts and that
``allocatable`` below reproduces the allocatable CPU and memory it lists for every type.

Reservations (awslabs/amazon-eks-ami, nodeadm ``internal/kubelet/config.go``): kube-reserved CPU is
6% of the first core, 1% of the second, 0.5% of the third and fourth and 0.25% of every further core;
kube-reserved memory is 11 MiB per pod plus 255 MiB; the kubelet evicts below 100 MiB free
(``evictionHard memory.available``). The memory the kubelet sees is less than EC2's figure by what the
hypervisor and kernel keep; Karpenter's default ``VM_MEMORY_OVERHEAD_PERCENT`` of 7.5% is the
estimate used here, the figure the reference's allocatable memory is computed with.
"""

from __future__ import annotations

from dataclasses import dataclass


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


def allocatable(instance_type: str) -> Allocatable:
    """The kubelet's allocatable on one node of ``instance_type``; KeyError for a type not listed."""
    shape = SYSTEM_INSTANCE_TYPES[instance_type]
    visible_memory = int(shape.memory_mib * (100 - VM_MEMORY_OVERHEAD_PERCENT) / 100)
    return Allocatable(
        cpu_millicores=int(shape.vcpus * 1000 - kube_reserved_cpu_millicores(shape.vcpus)),
        memory_mib=visible_memory - kube_reserved_memory_mib(shape.max_pods) - EVICTION_HARD_MEMORY_MIB,
        pods=shape.max_pods,
    )
