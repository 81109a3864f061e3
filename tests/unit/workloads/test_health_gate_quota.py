"""The health gate namespace's ResourceQuota: a check pod for every GPU node the pools may have at
once (rolls and replacements included) and the gate's pod, and never less, at a fleet's scale too.
What the quota admits is the API server's verdict: the cluster tier's gate tests create the check
pods under it."""

from __future__ import annotations

import pytest

from eks_gpu_training.config import GpuNodeGroupConfig, HealthGateConfig, KarpenterGpuNodePoolConfig
from eks_gpu_training.local.scale import scale_settings
from eks_gpu_training.workloads.health_gate import resource_quota_manifest
from eks_gpu_training.workloads.health_gate_quota import MAX_REGION_ZONES, pod_requests, pool_nodes_at_once
from tests.support.harness import run_main, stack_config

COMPONENT = "eks-gpu-training:index:HealthGate"
PROJECT = "eks-gpu-training"


def _quota(graph):
    (quota,) = graph.subtree(graph.one(COMPONENT)).of_type("kubernetes:core/v1:ResourceQuota")
    return quota.inputs


def test_prods_quota_holds_a_check_of_every_node_its_pools_may_have_and_the_gate(prod_graph):
    """p5-training: maxSize 2 (MINIMAL rolls launch nothing extra); gpu-training: gpuLimit 16 over
    8 GPUs, plus one replacement: 5 nodes of 8 GPUs and 32 EFA devices, a 1 CPU / 2 GiB check each,
    and the gate's 50m / 128 MiB."""
    quota = _quota(prod_graph)
    assert quota["metadata"]["namespace"] == "health-gate"
    assert quota["spec"]["hard"] == {
        "pods": "6",
        "requests.cpu": "5050m",
        "requests.memory": "10368Mi",
        "requests.nvidia.com/gpu": "40",
        "requests.vpc.amazonaws.com/efa": "160",
    }


def test_devs_quota_asks_for_no_efa_device(dev_graph):
    hard = _quota(dev_graph)["spec"]["hard"]
    # dev-gpu: maxSize 1; gpu-training: gpuLimit 2 over one GPU, plus one replacement.
    assert (hard["pods"], hard["requests.nvidia.com/gpu"], hard["requests.vpc.amazonaws.com/efa"]) == ("5", "4", "0")


def test_a_thousand_node_prod_fleet_can_check_every_node_at_once():
    config = scale_settings(stack_config("prod"), PROJECT, 1000)
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    hard = _quota(graph)["spec"]["hard"]
    nodes = sum(pool["maxSize"] for pool in config[f"{PROJECT}:gpuNodeGroups"])
    assert nodes == 1000
    # Every node's check (8 GPUs, 32 EFA devices, 1 CPU, 2 GiB) at once, with the gate's pod beside them.
    assert int(hard["pods"]) >= nodes + 1
    assert int(hard["requests.nvidia.com/gpu"]) >= nodes * 8
    assert int(hard["requests.vpc.amazonaws.com/efa"]) >= nodes * 32
    assert int(hard["requests.cpu"].removesuffix("m")) >= nodes * 1000 + 50


def test_a_default_roll_launches_nodes_before_it_ends_old_ones_so_the_quota_counts_them():
    """EKS's DEFAULT strategy surges by the larger of twice the group's zones and maxUnavailable."""
    pool = {"name": "p", "instanceTypes": ["p5.48xlarge"], "maxSize": 4, "updateStrategy": "DEFAULT"}
    assert pool_nodes_at_once(GpuNodeGroupConfig(**pool, availabilityZone="us-west-2b"), "gpuNodeGroups[0]") == 4 + 2
    assert pool_nodes_at_once(GpuNodeGroupConfig(**pool, availabilityZone="us-west-2b", updateMaxUnavailable=3),
                              "gpuNodeGroups[0]") == 4 + 3
    assert pool_nodes_at_once(GpuNodeGroupConfig(**pool), "gpuNodeGroups[0]") == 4 + 2 * MAX_REGION_ZONES
    assert pool_nodes_at_once(GpuNodeGroupConfig(**{**pool, "updateStrategy": "MINIMAL"}), "gpuNodeGroups[0]") == 4


def test_a_karpenter_pool_counts_the_nodes_its_gpu_limit_allows_with_its_smallest_type_and_a_replacement():
    pool = KarpenterGpuNodePoolConfig(name="k", instanceTypes=["p4d.24xlarge", "g6e.xlarge"], gpuLimit=16)
    assert pool_nodes_at_once(pool, "karpenter.gpuNodePools[0]") == 16 + 1


def test_a_check_pod_is_counted_by_its_largest_init_container_or_its_containers_together():
    pod = {"spec": {"initContainers": [{"resources": {"requests": {"cpu": "3", "memory": "64Mi"}}}],
                    "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                   {"resources": {"requests": {"cpu": "500m"}}}]}}
    requests = pod_requests(pod)
    assert (requests["cpu"], requests["memory"]) == (3, 2**30)


@pytest.mark.parametrize("efa_loopback", [None, "r.example/nccl:1"])
def test_the_quota_follows_the_check_pods_own_requests(efa_loopback):
    pool = GpuNodeGroupConfig(name="p", instanceTypes=["p5.48xlarge"], maxSize=3, efa="enabled", availabilityZone="us-west-2b")
    hard = resource_quota_manifest(HealthGateConfig(enabled=True, efa_loopback_image=efa_loopback), [pool], [])["spec"]["hard"]
    assert hard == {"pods": "4", "requests.cpu": "3050m", "requests.memory": "6272Mi",
                    "requests.nvidia.com/gpu": "24", "requests.vpc.amazonaws.com/efa": "96"}
