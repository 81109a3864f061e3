"""Priority classes preempt as the stack orders them, and namespace quotas refuse what exceeds
them: the scheduler's and the API server's quota admission's verdicts."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration

from kube import holds_for, pod_manifest, unique, wait_for

PRIORITY_NAMESPACE = "priority-probe"
"""A namespace of the tests' own, without quota or Kueue, so only priorities decide."""


def _pool(cluster):
    pool = cluster.args.gpu_node_groups[0]
    nodes = cluster.kube.nodes(f"{GPU_POOL_KEY}={pool.name}")
    gpus = int(nodes[0].status.allocatable[GPU_RESOURCE])
    return pool.name, [n.metadata.name for n in nodes], gpus


def _gpu_pod(name: str, pool: str, gpus: int, priority_class: str) -> dict:
    return pod_manifest(name, PRIORITY_NAMESPACE, requests={GPU_RESOURCE: str(gpus)}, tolerations=[gpu_toleration()],
                        node_selector={GPU_POOL_KEY: pool}, priority_class=priority_class,
                        terminationGracePeriodSeconds=0)


@pytest.fixture
def probe_namespace(any_cluster):
    kube = any_cluster.kube
    kube.ensure_namespace(PRIORITY_NAMESPACE)
    yield kube
    for pod in kube.pods(PRIORITY_NAMESPACE):
        kube.delete_pod(PRIORITY_NAMESPACE, pod.metadata.name)
    wait_for(lambda: not kube.pods(PRIORITY_NAMESPACE), what="the probe pods gone", timeout=60)


def _fill(kube, pool: str, nodes: list[str], gpus: int, priority_class: str) -> list[str]:
    names = [unique(priority_class) for _ in nodes]
    for name in names:
        kube.apply(_gpu_pod(name, pool, gpus, priority_class))
    for name in names:
        kube.wait_running(PRIORITY_NAMESPACE, name)
    return names


def test_a_training_critical_pod_preempts_data_prep_low_pods_holding_the_pools_gpus(any_cluster, probe_namespace):
    kube = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    low = _fill(kube, pool, nodes, gpus, "data-prep-low")
    critical = unique("training-critical")
    kube.apply(_gpu_pod(critical, pool, gpus, "training-critical"))
    node = kube.wait_bound(PRIORITY_NAMESPACE, critical, timeout=90)
    assert node in nodes
    remaining = {p.metadata.name for p in kube.pods(PRIORITY_NAMESPACE) if p.metadata.deletion_timestamp is None}
    assert len(set(low) - remaining) == 1, "exactly one low-priority pod made room"


@pytest.mark.parametrize("lower", ["evaluation-normal", "data-prep-low"])
def test_lower_priority_pods_never_preempt_a_training_critical_one(any_cluster, probe_namespace, lower):
    kube = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    critical = _fill(kube, pool, nodes, gpus, "training-critical")
    waiting = unique(lower)
    kube.apply(_gpu_pod(waiting, pool, gpus, lower))
    message = kube.wait_unschedulable(PRIORITY_NAMESPACE, waiting)
    assert "Insufficient nvidia.com/gpu" in message, message
    holds_for(lambda: all(kube.pod(PRIORITY_NAMESPACE, n).metadata.deletion_timestamp is None for n in critical)
              and kube.node_of(PRIORITY_NAMESPACE, waiting) is None,
              seconds=5, what="the training-critical pods running and the lower pod waiting")


def test_broken_variant_equal_priorities_preempt_nothing(any_cluster, probe_namespace):
    """The preemption test's claim depends on the classes' values: a pod of the same class as the
    holders preempts nothing, so that test cannot pass without the priorities doing the work."""
    kube = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    _fill(kube, pool, nodes, gpus, "data-prep-low")
    waiting = unique("same-priority")
    kube.apply(_gpu_pod(waiting, pool, gpus, "data-prep-low"))
    kube.wait_unschedulable(PRIORITY_NAMESPACE, waiting)
    holds_for(lambda: kube.node_of(PRIORITY_NAMESPACE, waiting) is None, seconds=5, what="the pod waiting")


def _quota_gpus(kube, namespace: str) -> int:
    quota = kube.core.read_namespaced_resource_quota("gpu-quota", namespace)
    return int(quota.spec.hard[f"requests.{GPU_RESOURCE}"])


def _gpu_request_refused(kube, namespace: str, gpus: int) -> str:
    name = unique("over-quota")
    try:
        # CPU and memory too: the quota also limits them, and then refuses pods that leave them out.
        kube.apply(pod_manifest(name, namespace, requests={"cpu": "1", "memory": "1Gi", GPU_RESOURCE: str(gpus)},
                                tolerations=[gpu_toleration()]))
    except ApiException as error:
        return error.body
    kube.delete_pod(namespace, name)
    raise AssertionError(f"a pod asking {gpus} GPUs in {namespace} was admitted")


def test_a_pod_asking_one_gpu_beyond_the_namespace_quota_is_refused(any_cluster):
    kube = any_cluster.kube
    quota = _quota_gpus(kube, "training")
    message = _gpu_request_refused(kube, "training", quota + 1)
    assert "exceeded quota: gpu-quota" in message, message
    assert f"requests.{GPU_RESOURCE}" in message, message


def test_broken_variant_a_quota_raised_past_the_request_admits_it(any_cluster):
    kube = any_cluster.kube
    quota = _quota_gpus(kube, "training")
    kube.core.patch_namespaced_resource_quota("gpu-quota", "training", {"spec": {"hard": {
        f"requests.{GPU_RESOURCE}": str(quota + 1)}}})
    try:
        wait_for(lambda: kube.core.read_namespaced_resource_quota("gpu-quota", "training").status.hard.get(
            f"requests.{GPU_RESOURCE}") == str(quota + 1), what="the quota controller seeing the new limit")
        with pytest.raises(AssertionError, match="was admitted"):
            _gpu_request_refused(kube, "training", quota + 1)
    finally:
        kube.core.patch_namespaced_resource_quota("gpu-quota", "training", {"spec": {"hard": {
            f"requests.{GPU_RESOURCE}": str(quota)}}})
