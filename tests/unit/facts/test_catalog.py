"""The GPU instance facts agree with upstream and with botocore."""

from __future__ import annotations


import pytest

from eks_gpu_training.facts import aws_enums
from eks_gpu_training.facts.catalog import (
    EC2_TOPOLOGY_INSTANCE_TYPES,
    FRACTIONAL_GPU_INSTANCE_TYPES,
    GPU_INSTANCE_TYPES,
    eks_labels_topology,
)
from eks_gpu_training.config import END_OF_LIFE_AMI_TYPES, NVIDIA_AMI_TYPES
from eks_gpu_training.facts.gpu_nodes import GPU_TAINT_EFFECT



def test_catalog_matches_karpenters_instance_type_reference(instance_type_docs):
    docs = instance_type_docs
    for name, facts in GPU_INSTANCE_TYPES.items():
        upstream = docs[name]
        assert int(upstream["nvidia.com/gpu"]) == facts.gpus, name
        assert int(upstream.get("vpc.amazonaws.com/efa", "0")) == facts.efa_interfaces, name
        assert int(upstream["karpenter.k8s.aws/instance-cpu"]) == facts.vcpus, name
        assert int(upstream["karpenter.k8s.aws/instance-memory"]) == facts.memory_mib, name
        assert upstream["karpenter.k8s.aws/instance-gpu-name"] == facts.gpu_model, name
        assert int(upstream["karpenter.k8s.aws/instance-gpu-memory"]) == facts.gpu_memory_mib, name
        assert upstream["kubernetes.io/arch"] == "amd64", name


def test_every_x86_64_nvidia_type_of_karpenters_reference_is_in_the_catalog(instance_type_docs):
    docs = instance_type_docs
    nvidia_x86 = {
        name
        for name, facts in docs.items()
        if facts.get("karpenter.k8s.aws/instance-gpu-manufacturer") == "nvidia" and facts["kubernetes.io/arch"] == "amd64"
    }
    assert nvidia_x86 - set(GPU_INSTANCE_TYPES) == set(FRACTIONAL_GPU_INSTANCE_TYPES)
    # The types left out are exactly those with no whole GPU to hand a pod.
    assert all("nvidia.com/gpu" not in docs[name] for name in FRACTIONAL_GPU_INSTANCE_TYPES)
    assert set(GPU_INSTANCE_TYPES) <= nvidia_x86


def test_the_catalog_covers_g4dn_with_its_special_cases():
    assert GPU_INSTANCE_TYPES["g4dn.xlarge"].gpus == 1
    assert GPU_INSTANCE_TYPES["g4dn.xlarge"].efa_interfaces == 0
    assert GPU_INSTANCE_TYPES["g4dn.metal"].gpus == 8
    assert GPU_INSTANCE_TYPES["g4dn.metal"].efa_interfaces == 1


def test_reference_readme_gpu_and_efa_counts_hold(reference_dir):
    # shared/reference/README.md: p4d/p4de 8/4, p5 8/32, p5e 8/32, p5en 8/16, p6-b200 8/8, g6e.48xlarge 8/4
    expected = {"p4d.24xlarge": (8, 4), "p4de.24xlarge": (8, 4), "p5.48xlarge": (8, 32), "p5e.48xlarge": (8, 32),
                "p5en.48xlarge": (8, 16), "p6-b200.48xlarge": (8, 8), "g6e.48xlarge": (8, 4)}
    assert {n: (GPU_INSTANCE_TYPES[n].gpus, GPU_INSTANCE_TYPES[n].efa_interfaces) for n in expected} == expected


def test_every_catalog_type_is_an_ec2_instance_type():
    assert set(GPU_INSTANCE_TYPES) <= aws_enums.ec2_instance_types()


def test_topology_types_are_catalog_gpu_types():
    assert EC2_TOPOLOGY_INSTANCE_TYPES <= set(GPU_INSTANCE_TYPES)
    assert eks_labels_topology(["p5.48xlarge", "p4de.24xlarge"])
    assert not eks_labels_topology(["p5.48xlarge", "g6.12xlarge"])


def test_ami_types_the_library_names_exist_in_the_eks_model():
    assert set(NVIDIA_AMI_TYPES) <= aws_enums.eks_ami_types()
    assert set(END_OF_LIFE_AMI_TYPES) <= aws_enums.eks_ami_types()


def test_gpu_taint_effect_is_an_eks_taint_effect():
    assert GPU_TAINT_EFFECT in aws_enums.eks_taint_effects()


@pytest.mark.parametrize(("region", "partition"), [("us-west-2", "aws"), ("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
def test_partition_comes_from_botocore(region, partition):
    assert region in aws_enums.aws_regions()
    assert aws_enums.partition_of(region) == partition
