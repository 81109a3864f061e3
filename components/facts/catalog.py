"""Facts about NVIDIA GPU instance types that the configuration and the components rely on.

Source: the "Instance Types" reference of Karpenter 1.14 (aws/karpenter-provider-aws,
website/content/en/v1.14/reference/instance-types.md), which lists for each type the allocatable
``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa`` resources, vCPUs and memory as EC2 reports them.
``tests/unit/facts/test_catalog.py`` re-reads that document (when ``../shared/reference`` is present) and
fails if any number here drifts from it.

Every x86_64 NVIDIA type of that reference is listed (the NVIDIA EKS AMIs ``AL2023_x86_64_NVIDIA``
and ``BOTTLEROCKET_x86_64_NVIDIA`` run on them), except the fractional-GPU types in
``FRACTIONAL_GPU_INSTANCE_TYPES``. Families differ where a pool notices: the small sizes of the g
families have no EFA (``efa_interfaces`` 0, so ``efa: auto`` leaves it off), and most g sizes carry
one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInstanceType:
    """What a GPU node of one instance type brings."""

    gpus: int
    """NVIDIA GPUs per node (``nvidia.com/gpu``)."""
    gpu_model: str
    """GPU model, as Karpenter's ``instance-gpu-name`` label spells it."""
    gpu_memory_mib: int
    """Memory per GPU in MiB."""
    efa_interfaces: int
    """EFA devices per node (``vpc.amazonaws.com/efa``); 0 where the type has no EFA. Each sits
    on its own network card, so this is also the number of network interfaces an EFA launch
    template lays out."""
    vcpus: int
    """vCPUs per node."""
    memory_mib: int
    """Memory per node in MiB."""


def _family(gpu_model: str, gpu_memory_mib: int, sizes: dict[str, tuple[int, int, int, int]]):
    return {
        name: GpuInstanceType(gpus, gpu_model, gpu_memory_mib, efa, vcpus, memory)
        for name, (gpus, efa, vcpus, memory) in sizes.items()
    }


# name: (gpus, efa interfaces, vcpus, memory MiB)
GPU_INSTANCE_TYPES: dict[str, GpuInstanceType] = {
    # Turing T4. g4dn.metal is the only size with eight GPUs; the sizes below 8xlarge have no EFA.
    # T4 and V100 (p3dn) need NVIDIA's proprietary kernel module; the EKS and Bottlerocket NVIDIA AMIs
    # ship both modules and pick one per GPU at boot, so they run on the same AMI types as the rest
    # (aws/amazon-ecs-ami#370 review, EKS maintainers).
    **_family("t4", 16384, {
        "g4dn.xlarge": (1, 0, 4, 16384),
        "g4dn.2xlarge": (1, 0, 8, 32768),
        "g4dn.4xlarge": (1, 0, 16, 65536),
        "g4dn.8xlarge": (1, 1, 32, 131072),
        "g4dn.12xlarge": (4, 1, 48, 196608),
        "g4dn.16xlarge": (1, 1, 64, 262144),
        "g4dn.metal": (8, 1, 96, 393216),
    }),
    **_family("a10g", 22888, {
        "g5.xlarge": (1, 0, 4, 16384),
        "g5.2xlarge": (1, 0, 8, 32768),
        "g5.4xlarge": (1, 0, 16, 65536),
        "g5.8xlarge": (1, 1, 32, 131072),
        "g5.12xlarge": (4, 1, 48, 196608),
        "g5.16xlarge": (1, 1, 64, 262144),
        "g5.24xlarge": (4, 1, 96, 393216),
        "g5.48xlarge": (8, 1, 192, 786432),
    }),
    **_family("l4", 22888, {
        "g6.xlarge": (1, 0, 4, 16384),
        "g6.2xlarge": (1, 0, 8, 32768),
        "g6.4xlarge": (1, 0, 16, 65536),
        "g6.8xlarge": (1, 1, 32, 131072),
        "g6.12xlarge": (4, 1, 48, 196608),
        "g6.16xlarge": (1, 1, 64, 262144),
        "g6.24xlarge": (4, 1, 96, 393216),
        "g6.48xlarge": (8, 1, 192, 786432),
    }),
    **_family("l40s", 45776, {
        "g6e.xlarge": (1, 0, 4, 32768),
        "g6e.2xlarge": (1, 0, 8, 65536),
        "g6e.4xlarge": (1, 0, 16, 131072),
        "g6e.8xlarge": (1, 1, 32, 262144),
        "g6e.12xlarge": (4, 1, 48, 393216),
        "g6e.16xlarge": (1, 1, 64, 524288),
        "g6e.24xlarge": (4, 2, 96, 786432),
        "g6e.48xlarge": (8, 4, 192, 1572864),
    }),
    # gr6: the g6's L4 with twice the memory per vCPU; one GPU, EFA from 8xlarge only.
    **_family("l4", 22888, {
        "gr6.4xlarge": (1, 0, 16, 131072),
        "gr6.8xlarge": (1, 1, 32, 262144),
    }),
    # g7 (RTX PRO 4500 Blackwell) needs NVIDIA driver 595 or newer: EKS AL2023 NVIDIA AMIs from
    # release v20260917 carry it and select it at first boot (awslabs/amazon-eks-ami#2768); on older
    # AMIs the GPU is unusable.
    **_family("rtx-pro-4500", 32768, {
        "g7.2xlarge": (1, 0, 8, 32768),
        "g7.4xlarge": (1, 0, 16, 65536),
        "g7.8xlarge": (1, 1, 32, 131072),
        "g7.12xlarge": (2, 1, 48, 196608),
        "g7.24xlarge": (4, 1, 96, 393216),
        "g7.48xlarge": (8, 2, 192, 786432),
    }),
    **_family("rtx-pro-server-6000", 98304, {
        "g7e.2xlarge": (1, 0, 8, 65536),
        "g7e.4xlarge": (1, 0, 16, 131072),
        "g7e.8xlarge": (1, 1, 32, 262144),
        "g7e.12xlarge": (2, 1, 48, 524288),
        "g7e.24xlarge": (4, 2, 96, 1048576),
        "g7e.48xlarge": (8, 4, 192, 2097152),
    }),
    # Volta V100: no bfloat16, so recipes that train in bf16 do not run on it; one EFA device.
    **_family("v100", 32768, {"p3dn.24xlarge": (8, 1, 96, 786432)}),
    **_family("a100", 40960, {"p4d.24xlarge": (8, 4, 96, 1179648)}),
    **_family("a100", 81920, {"p4de.24xlarge": (8, 4, 96, 1179648)}),
    **_family("h100", 81920, {
        "p5.4xlarge": (1, 1, 16, 262144),
        "p5.48xlarge": (8, 32, 192, 2097152),
    }),
    **_family("h200", 144384, {
        "p5e.48xlarge": (8, 32, 192, 2097152),
        "p5en.48xlarge": (8, 16, 192, 2097152),
    }),
    **_family("b200", 183359, {"p6-b200.48xlarge": (8, 8, 192, 2097152)}),
    **_family("b300", 275040, {"p6-b300.48xlarge": (8, 16, 192, 4194304)}),
}


FRACTIONAL_GPU_INSTANCE_TYPES: dict[str, str] = {
    name: "has a fraction of one L4 GPU (Karpenter's reference lists no whole nvidia.com/gpu for it)"
    for name in ("g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge", "gr6f.4xlarge")
}
"""x86_64 NVIDIA types deliberately left out of ``GPU_INSTANCE_TYPES``, with the reason: a
fractional GPU is GPU sharing, which training pools refuse (whole GPUs per pod)."""


def has_efa(instance_types: list[str]) -> bool:
    """True when every one of the types has at least one EFA device."""
    return all(GPU_INSTANCE_TYPES[t].efa_interfaces > 0 for t in instance_types)


def efa_interface_count(instance_types: list[str]) -> int:
    """EFA interfaces a launch template can lay out for all of the types: the smallest count,
    since one template serves every type of a pool and a network card index the type lacks
    fails the launch."""
    return min(GPU_INSTANCE_TYPES[t].efa_interfaces for t in instance_types)


EC2_TOPOLOGY_INSTANCE_TYPES: frozenset[str] = frozenset({
    "g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge", "g6e.8xlarge",
    "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
    "p4d.24xlarge", "p4de.24xlarge",
    "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6-b200.48xlarge", "p6-b300.48xlarge",
})
"""GPU types for which EC2's ``DescribeInstanceTopology`` returns network nodes, so EKS labels their
nodes ``topology.k8s.aws/network-node-layer-N`` itself (EC2 User Guide,
docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html)."""


def eks_labels_topology(instance_types: list[str]) -> bool:
    """True when EKS labels nodes of every one of the types with their network topology."""
    return all(t in EC2_TOPOLOGY_INSTANCE_TYPES for t in instance_types)
