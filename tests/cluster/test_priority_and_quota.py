"""Priority classes preempt as the stack orders them, and namespace quotas refuse what exceeds
them: the scheduler's and the API server's quota admission's verdicts."""

from __future__ import annotations

import uuid

import pytest

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME

from tests.support.environment import expect_refused, holds_for, wait_for
from tests.support.manifests import pod_manifest, unique

PRIORITY_NAMESPACE = "priority-probe"
"""A namespace of the tests' own, without quota or Kueue, so only priorities decide."""


def _pool(cluster):
    pool = cluster.args.gpu_node_groups[0]
    nodes = cluster.env.nodes(f"{GPU_POOL_KEY}={pool.name}")
    gpus = int(nodes[0].status.allocatable[GPU_RESOURCE])
    return pool.name, [n.metadata.name for n in nodes], gpus


def _gpu_pod(name: str, pool: str, gpus: int, priority_class: str) -> dict:
    return pod_manifest(name, PRIORITY_NAMESPACE, requests={GPU_RESOURCE: str(gpus)}, tolerations=[gpu_toleration()],
                        node_selector={GPU_POOL_KEY: pool}, priority_class=priority_class,
                        terminationGracePeriodSeconds=0)


@pytest.fixture
def probe_namespace(any_cluster):
    env = any_cluster.env
    env.ensure_namespace(PRIORITY_NAMESPACE)
    yield env
    for pod in env.pods(PRIORITY_NAMESPACE):
        env.delete_pod(PRIORITY_NAMESPACE, pod.metadata.name)
    wait_for(lambda: not env.pods(PRIORITY_NAMESPACE), what="the probe pods gone", timeout=60)


def _fill(env, pool: str, nodes: list[str], gpus: int, priority_class: str) -> list[str]:
    names = [unique(priority_class) for _ in nodes]
    for name in names:
        env.apply(_gpu_pod(name, pool, gpus, priority_class))
    for name in names:
        env.expect_running(PRIORITY_NAMESPACE, name)
    return names


def test_a_training_critical_pod_preempts_data_prep_low_pods_holding_the_pools_gpus(any_cluster, probe_namespace):
    env = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    low = _fill(env, pool, nodes, gpus, "data-prep-low")
    critical = unique("training-critical")
    env.apply(_gpu_pod(critical, pool, gpus, "training-critical"))
    node = env.expect_bound(PRIORITY_NAMESPACE, critical, timeout=90)
    assert node in nodes
    remaining = {p.metadata.name for p in env.pods(PRIORITY_NAMESPACE) if p.metadata.deletion_timestamp is None}
    assert len(set(low) - remaining) == 1, "exactly one low-priority pod made room"


@pytest.mark.parametrize("lower", ["evaluation-normal", "data-prep-low"])
def test_lower_priority_pods_never_preempt_a_training_critical_one(any_cluster, probe_namespace, lower):
    env = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    critical = _fill(env, pool, nodes, gpus, "training-critical")
    waiting = unique(lower)
    env.apply(_gpu_pod(waiting, pool, gpus, lower))
    message = env.expect_unschedulable(PRIORITY_NAMESPACE, waiting)
    assert "Insufficient nvidia.com/gpu" in message, message
    holds_for(lambda: all(env.pod(PRIORITY_NAMESPACE, n).metadata.deletion_timestamp is None for n in critical)
              and env.node_of(PRIORITY_NAMESPACE, waiting) is None,
              seconds=5, what="the training-critical pods running and the lower pod waiting")


def test_broken_variant_equal_priorities_preempt_nothing(any_cluster, probe_namespace):
    """The preemption test's claim depends on the classes' values: a pod of the same class as the
    holders preempts nothing, so that test cannot pass without the priorities doing the work."""
    env = probe_namespace
    pool, nodes, gpus = _pool(any_cluster)
    _fill(env, pool, nodes, gpus, "data-prep-low")
    waiting = unique("same-priority")
    env.apply(_gpu_pod(waiting, pool, gpus, "data-prep-low"))
    env.expect_unschedulable(PRIORITY_NAMESPACE, waiting)
    holds_for(lambda: env.node_of(PRIORITY_NAMESPACE, waiting) is None, seconds=5, what="the pod waiting")


def _gpu_request_refused(env, namespace: str, gpus: int) -> str:
    # CPU and memory too: the quota also limits them, and then refuses pods that leave them out. The
    # pod names a Job as its controller, as a Job's pods do: a team namespace refuses a GPU pod outside
    # a Job before its quota is asked (team_admission).
    name = unique("over-quota")
    pod = pod_manifest(name, namespace, requests={"cpu": "1", "memory": "1Gi", GPU_RESOURCE: str(gpus)}, tolerations=[gpu_toleration()])
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": str(uuid.uuid4()), "controller": True}]
    return expect_refused(lambda: env.apply(pod), on_admitted=lambda _: env.delete_pod(namespace, name))


def test_a_pod_asking_one_gpu_beyond_the_namespace_quota_is_refused(any_cluster):
    quota = any_cluster.gpu_quota("training")
    message = _gpu_request_refused(any_cluster.env, "training", quota + 1)
    assert f"exceeded quota: {QUOTA_NAME}" in message, message
    assert f"requests.{GPU_RESOURCE}" in message, message


def test_broken_variant_a_quota_raised_past_the_request_admits_it(any_cluster):
    env = any_cluster.env
    quota = any_cluster.gpu_quota("training")
    env.core.patch_namespaced_resource_quota(QUOTA_NAME, "training", {"spec": {"hard": {
        f"requests.{GPU_RESOURCE}": str(quota + 1)}}})
    try:
        wait_for(lambda: env.core.read_namespaced_resource_quota(QUOTA_NAME, "training").status.hard.get(
            f"requests.{GPU_RESOURCE}") == str(quota + 1), what="the quota controller seeing the new limit")
        with pytest.raises(AssertionError, match="the API server allowed it"):
            _gpu_request_refused(env, "training", quota + 1)
    finally:
        env.core.patch_namespaced_resource_quota(QUOTA_NAME, "training", {"spec": {"hard": {
            f"requests.{GPU_RESOURCE}": str(quota)}}})
