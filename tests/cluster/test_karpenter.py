"""Karpenter's GPU pool as dev's stack makes it: a node launched for a job that needs one, with the
pool's labels and GPU taint, removed once empty, and never more GPUs than the pool's limit.

On a dev cluster of its own (module-scoped, an xdist group of its own, ``conftest._group_of``):
Karpenter's launches and consolidations are most of the time the dev group took, and on their own
cluster they run beside dev's other tests, with a pool no earlier test has left nodes in.
"""

from __future__ import annotations

import pytest

from eks_gpu_training.facts.gpu_nodes import GPU_RESOURCE, gpu_toleration

from tests.support.clusters import start
from tests.support.environment import holds_for, wait_for
from tests.support.manifests import pod_manifest, unique


@pytest.fixture(scope="module")
def karpenter_cluster(tmp_path_factory):
    yield from start("dev", tmp_path_factory.mktemp("local-dev-karpenter"))


@pytest.fixture
def karpenter_pool(karpenter_cluster):
    """Dev's Karpenter NodePool with consolidateAfter shortened to seconds (dev's own 10m would
    make the test wait ten minutes); restored afterwards."""
    env = karpenter_cluster.env
    nodepool = env.get("karpenter.sh/v1", "NodePool", "gpu-training")
    original = nodepool["spec"]["disruption"]["consolidateAfter"]
    env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                           {"spec": {"disruption": {"consolidateAfter": "10s"}}})
    # Nodes an earlier test left (its own wait for their removal failed) go first.
    wait_for(lambda: not _karpenter_nodes(env), what="the Karpenter pool empty before the test", timeout=120)
    yield nodepool
    env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                           {"spec": {"disruption": {"consolidateAfter": original}}})


def _karpenter_nodes(env):
    return env.nodes("karpenter.sh/nodepool=gpu-training")


def test_karpenter_launches_a_node_for_devs_job_and_removes_it_after_consolidate_after(karpenter_cluster, karpenter_pool):
    env = karpenter_cluster.env
    assert not _karpenter_nodes(env), "the Karpenter pool starts empty"
    namespace, name = karpenter_cluster.submit_run("rl-training")
    try:
        pods = env.expect_job_running(namespace, name, 1)
        node = env.core.read_node(pods[0].spec.node_name)
        labels = node.metadata.labels
        assert labels["karpenter.sh/nodepool"] == "gpu-training"
        assert labels["node.kubernetes.io/instance-type"] == "g6e.xlarge"
        assert labels["role"] == "gpu-training"
        assert ("nvidia.com/gpu", "true", "NoSchedule") in [(t.key, t.value, t.effect) for t in node.spec.taints]
    finally:
        env.delete_job(namespace, name)
    wait_for(lambda: not _karpenter_nodes(env), what="Karpenter removing the empty node", timeout=120)


def test_karpenter_never_launches_past_the_pools_gpu_limit_and_a_raised_limit_lets_the_waiting_pod_through(
        karpenter_cluster, karpenter_pool):
    """One pod more than the pool's GPU limit allows waits while Karpenter holds at the limit. Its
    broken variant follows on the same nodes: the limit raised by one, the pod that waited gets its
    node, so the limit is what held Karpenter back (one launch and one consolidation for both)."""
    env = karpenter_cluster.env
    limit = int(karpenter_pool["spec"]["limits"][GPU_RESOURCE])
    env.ensure_namespace("karpenter-probe")
    names = [unique("gpu-demand") for _ in range(limit + 1)]

    def placed() -> int:
        return len([p for p in env.pods("karpenter-probe") if p.spec.node_name])

    for pod in names:
        env.apply(pod_manifest(pod, "karpenter-probe", requests={GPU_RESOURCE: "1"}, tolerations=[gpu_toleration()],
                               node_selector={"karpenter.sh/nodepool": "gpu-training"}))
    try:
        wait_for(lambda: placed() == limit, what=f"{limit} pods placed on Karpenter nodes", timeout=120)
        holds_for(lambda: len(_karpenter_nodes(env)) == limit and placed() == limit,
                  seconds=15, what=f"Karpenter holding at {limit} GPUs with one pod waiting")
        env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                               {"spec": {"limits": {GPU_RESOURCE: str(limit + 1)}}})
        wait_for(lambda: placed() == limit + 1, what=f"with the limit raised to {limit + 1}, all {limit + 1} pods placed",
                 timeout=120)
    finally:
        for pod in names:
            env.delete_pod("karpenter-probe", pod)
        env.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                               {"spec": {"limits": {GPU_RESOURCE: str(limit)}}})
    wait_for(lambda: not _karpenter_nodes(env), what="Karpenter removing the empty nodes", timeout=120)
