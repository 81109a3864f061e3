"""A system node's allocatable, computed as the EKS AMI reserves it, agrees with Karpenter's reference."""

from __future__ import annotations


from eks_gpu_training.facts import aws_enums
from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
from eks_gpu_training.facts.node_allocatable import (
    GPU_INSTANCE_MAX_PODS,
    SYSTEM_INSTANCE_TYPES,
    allocatable,
    kube_reserved_cpu_millicores,
)
from eks_gpu_training.facts.quantity import MIB, parse_quantity


def test_an_m7i_large_offers_1930m_cpu_29_pods_and_6903mi():
    node = allocatable("m7i.large")
    assert (node.cpu_millicores, node.memory_mib, node.pods) == (1930, 6903, 29)


def test_kube_reserved_cpu_follows_the_eks_ami_steps():
    # 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest.
    assert [kube_reserved_cpu_millicores(v) for v in (1, 2, 4, 8, 16)] == [60, 70, 80, 90, 110]


def test_every_system_type_is_an_ec2_type():
    assert set(SYSTEM_INSTANCE_TYPES) <= aws_enums.ec2_instance_types()


def test_the_table_and_the_computed_allocatable_match_karpenters_reference(instance_type_docs):
    docs = instance_type_docs
    for name, shape in SYSTEM_INSTANCE_TYPES.items():
        upstream = docs[name]
        assert int(upstream["karpenter.k8s.aws/instance-cpu"]) == shape.vcpus, name
        assert int(upstream["karpenter.k8s.aws/instance-memory"]) == shape.memory_mib, name
        assert int(upstream["pods"]) == shape.max_pods, name
        node = allocatable(name)
        assert parse_quantity(upstream["cpu"]) * 1000 == node.cpu_millicores, name
        assert parse_quantity(upstream["memory"]) / MIB == node.memory_mib, name


def test_every_gpu_types_computed_allocatable_matches_karpenters_reference(instance_type_docs):
    docs = instance_type_docs
    for name in GPU_INSTANCE_TYPES:
        upstream = docs[name]
        assert int(upstream["pods"]) == GPU_INSTANCE_MAX_PODS[name], name
        node = allocatable(name)
        assert parse_quantity(upstream["cpu"]) * 1000 == node.cpu_millicores, name
        assert parse_quantity(upstream["memory"]) / MIB == node.memory_mib, name
    assert set(GPU_INSTANCE_MAX_PODS) == set(GPU_INSTANCE_TYPES)


def test_hugepages_come_out_of_allocatable_memory_as_the_kubelet_takes_them():
    assert allocatable("p5.48xlarge").memory_mib - allocatable("p5.48xlarge", hugepages_mib=10256).memory_mib == 10256
