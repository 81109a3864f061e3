"""GPU taints keep other work off GPU nodes: the scheduler's verdict on the stack's own nodes."""

from __future__ import annotations

import pytest

from eks_gpu_training.facts.gpu_nodes import GPU_TAINT_KEY, gpu_node_selector, gpu_toleration

from tests.support.manifests import pod_manifest, unique

PROBE_NAMESPACE = "default"


def _gpu_nodes(env):
    return env.nodes("role=gpu-training")


def test_every_gpu_node_of_the_fleet_carries_the_gpu_taint(any_cluster):
    nodes = _gpu_nodes(any_cluster.env)
    assert nodes, "the fleet has GPU nodes"
    for node in nodes:
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
        assert (GPU_TAINT_KEY, "true", "NoSchedule") in taints, node.metadata.name


def _untolerating_pod_is_kept_off_gpu_nodes(env) -> str:
    """A pod that asks for a GPU node but does not tolerate the taint: the scheduler's message, or
    the node it was bound to (which is the failure)."""
    name = unique("no-toleration")
    env.apply(pod_manifest(name, PROBE_NAMESPACE, node_selector=gpu_node_selector()))
    try:
        message = env.expect_unschedulable(PROBE_NAMESPACE, name)
        assert env.node_of(PROBE_NAMESPACE, name) is None
        return message
    finally:
        env.delete_pod(PROBE_NAMESPACE, name)


def test_a_pod_without_the_gpu_toleration_never_binds_to_a_gpu_node(any_cluster):
    message = _untolerating_pod_is_kept_off_gpu_nodes(any_cluster.env)
    gpu_nodes = len(_gpu_nodes(any_cluster.env))
    assert f"{gpu_nodes} node(s) had untolerated taint(s)" in message, message


def _role_of_node_bound_to(env, prefix: str, **spec) -> str:
    """The ``role`` label of the node the scheduler binds a probe pod to."""
    name = unique(prefix)
    env.apply(pod_manifest(name, PROBE_NAMESPACE, **spec))
    try:
        return env.core.read_node(env.expect_bound(PROBE_NAMESPACE, name)).metadata.labels["role"]
    finally:
        env.delete_pod(PROBE_NAMESPACE, name)


def test_a_pod_without_the_gpu_toleration_binds_to_a_system_node(any_cluster):
    assert _role_of_node_bound_to(any_cluster.env, "plain") == "system"


def test_a_pod_with_the_gpu_toleration_binds_to_a_gpu_node(any_cluster):
    role = _role_of_node_bound_to(any_cluster.env, "tolerating", node_selector=gpu_node_selector(),
                                  tolerations=[gpu_toleration()])
    assert role == "gpu-training"


def test_broken_variant_without_the_taint_lets_the_untolerating_pod_onto_a_gpu_node(any_cluster):
    """The taint dropped from the pool's nodes: the same check must fail, so it cannot pass for another reason."""
    env = any_cluster.env
    nodes = _gpu_nodes(env)
    saved = {n.metadata.name: [t.to_dict() for t in n.spec.taints or []] for n in nodes}
    try:
        for node in nodes:
            env.core.patch_node(node.metadata.name, {"spec": {"taints": [
                t for t in saved[node.metadata.name] if t["key"] != GPU_TAINT_KEY
            ]}})
        try:
            message = _untolerating_pod_is_kept_off_gpu_nodes(env)
        except AssertionError:
            pass  # bound to a GPU node: without the taint the check fails, as it must
        else:
            taints = {n.metadata.name: [t.key for t in n.spec.taints or []] for n in _gpu_nodes(env)}
            pytest.fail(f"without the GPU taint the pod was still kept off every GPU node: {message}; the GPU nodes' taints: {taints}")
    finally:
        for name, taints in saved.items():
            env.core.patch_node(name, {"spec": {"taints": [
                {k: v for k, v in t.items() if v is not None} for t in taints
            ]}})
