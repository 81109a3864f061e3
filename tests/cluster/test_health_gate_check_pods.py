"""The health gate's check pods under their namespace's rules, judged by the real API server on
prod's local cluster: the pod of a check Job the gate would make for a p5 node, from the settings
in its ConfigMap, is admitted by Pod Security ``baseline`` and the ResourceQuota ``health-checks``
(a server-side dry run: admission runs, nothing is stored); the same pod with a capability added
back, or asking for more GPUs than the quota holds, is refused. That checks like it run and admit
nodes is ``test_node_faults``'s (each join waits for the gate)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.support.environment import expect_refused, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.healthgate.node_check import GPU_RESOURCE, check_job
from eks_gpu_training.healthgate.gate_settings import CONFIG_KEY, GateSettings
from eks_gpu_training.workloads.health_gate import NAMESPACE
from eks_gpu_training.workloads.health_gate_quota import QUOTA_NAME
from tests.support.manifests import unique

POOL = "p5-training"


def _settings(env) -> GateSettings:
    config_map = env.core.read_namespaced_config_map(NAMESPACE, NAMESPACE)
    return GateSettings.from_json(config_map.data[CONFIG_KEY])


def _check_pod(env) -> dict[str, Any]:
    """The pod of the check Job the gate makes for one of the pool's nodes."""
    settings = _settings(env)
    node = env.nodes(f"{GPU_POOL_KEY}={POOL}")[0]
    job = check_job(settings.check_pod, NAMESPACE, node.metadata.name, node.metadata.uid, settings.pools[POOL], settings.check_seconds)
    template = job["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": unique("check-probe"), "namespace": NAMESPACE},
            "spec": template["spec"]}


def _dry_run(env, pod: dict[str, Any]):
    return env.core.create_namespaced_pod(NAMESPACE, pod, dry_run="All")


def _containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]}


def _quota_in_force(env) -> dict[str, str]:
    """The quota's hard limits once its controller has counted the namespace (until then the API
    server refuses every pod there: the quota's usage is unknown)."""
    def counted():
        quota = env.core.read_namespaced_resource_quota(QUOTA_NAME, NAMESPACE)
        return quota.status and quota.status.hard == quota.spec.hard and quota.status.hard
    return wait_for(counted, what=f"ResourceQuota {NAMESPACE}/{QUOTA_NAME} counted")


def test_a_p5_check_pod_is_admitted_by_baseline_and_the_namespaces_quota(prod_cluster):
    env = prod_cluster.env
    hard = _quota_in_force(env)
    pod = _check_pod(env)
    assert set(_containers(pod)) == {"efa", "efa-loopback", "dcgm"}
    try:
        admitted = _dry_run(env, pod)
    except ApiException as error:
        pytest.fail(f"the API server refused the check pod: {error.body}")
    for container in [*admitted.spec.init_containers, *admitted.spec.containers]:
        assert container.security_context.capabilities.drop == ["ALL"], container.name
        assert container.security_context.capabilities.add is None, container.name
    # One check of every node the pools may have at once fits: this one is far inside.
    assert int(hard[f"requests.{GPU_RESOURCE}"]) >= 8


@pytest.mark.parametrize(("container", "capability"), [("dcgm", "SYS_ADMIN"), ("efa-loopback", "IPC_LOCK")])
def test_broken_variant_a_check_container_given_a_capability_back_is_refused_by_baseline(prod_cluster, container, capability):
    env = prod_cluster.env
    _quota_in_force(env)
    pod = _check_pod(env)
    _containers(pod)[container]["securityContext"]["capabilities"]["add"] = [capability]
    message = json.loads(expect_refused(lambda: _dry_run(env, pod)))["message"]
    assert 'violates PodSecurity "baseline:latest": non-default capabilities' in message, message
    assert f'container "{container}" must not include "{capability}"' in message, message


def test_broken_variant_a_check_asking_for_more_gpus_than_the_quota_holds_is_refused(prod_cluster):
    env = prod_cluster.env
    hard = _quota_in_force(env)
    pod = copy.deepcopy(_check_pod(env))
    past = str(int(hard[f"requests.{GPU_RESOURCE}"]) + 1)
    dcgm = _containers(pod)["dcgm"]
    dcgm["resources"]["requests"][GPU_RESOURCE] = dcgm["resources"]["limits"][GPU_RESOURCE] = past
    message = json.loads(expect_refused(lambda: _dry_run(env, pod)))["message"]
    assert f"exceeded quota: {QUOTA_NAME}" in message, message
