"""A GPU node fails under a running job, and a node joins sick: on prod's pool grown to three nodes
(a spare in the job's layer-3 block), faults are injected as ``eks-gpu-training-local fault``
injects them (real API writes), and Kubernetes, Kueue and the health gate decide the rest.

Simulated: a deleted node's replacement joining (the managed node group launching an instance) is
a Node created as a kubelet registers it, with the node group's taints; the check containers'
verdict (pass unless a ``fail-checks`` fault says otherwise) and the node monitoring agent's
condition are the local cluster's (``local.node_health``). The gate itself runs its own program as
its ServiceAccount; eviction, the Job controller and Kueue's node replacement are the real ones.

The recovery bounds asserted here are the ones docs/health.md ("When a node fails during a job")
documents; each test prints what it measured.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import pytest

from clusters import RunningCluster, start
from environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, network_layer_key
from eks_gpu_training.healthgate.settings import CONDITION_TYPE, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY
from eks_gpu_training.local.cluster import _create_node
from eks_gpu_training.local.faults import condition_fault

POOL = "p5-training"
DELETED_NODE_BOUND_SECONDS = 150
"""A deleted node's rank runs again on the spare within this: the pod garbage collector's 40 s
quarantine of pods on a missing node, then Kueue's replacement and the scheduler."""
QUARANTINED_NODE_BOUND_SECONDS = 90
"""A node whose GPUs fail: the agent's condition, the gate's quarantine taint (a round of 5 s), the
taint manager's eviction, Kueue's replacement."""
GATE_BOUND_SECONDS = 60
"""A joining node's check: a gate round, the check Job's pod placed and run (3 s simulated), the
next round lifting the taint."""


@pytest.fixture(scope="module")
def prod_faults_cluster(tmp_path_factory):
    """Prod's stack with its GPU pool grown to three nodes (``up --scale 3``)."""
    yield from start("prod", tmp_path_factory.mktemp("local-prod-faults"), scale=3)


class _Unset:
    status = None


def _node(running: RunningCluster, name: str) -> Optional[Any]:
    return next((n for n in running.env.nodes() if n.metadata.name == name), None)


def _taint_keys(node: Any) -> set[str]:
    return {t.key for t in node.spec.taints or []}


def _condition(node: Any, kind: str) -> Optional[Any]:
    return next((c for c in node.status.conditions or [] if c.type == kind), None)


def _admitted(running: RunningCluster, name: str) -> bool:
    node = _node(running, name)
    passed = node is not None and _condition(node, CONDITION_TYPE)
    return bool(node is not None and STARTUP_TAINT_KEY not in _taint_keys(node) and passed and passed.status == "True")


def _join(running: RunningCluster, name: str) -> None:
    """The node ``name`` joins again as it first did (the node group's labels and taints, the
    startup taint among them), as an instance the node group launches registers."""
    manifest = next(node.manifest() for node in running.cluster.nodes if node.name == name)
    _create_node(running.env, manifest)


def _replace(running: RunningCluster, name: str) -> None:
    """The node goes and a new one of the same name joins: the pool back to three admitted nodes."""
    if _node(running, name) is not None:
        running.cluster.faults().delete(name)
        wait_for(lambda: _node(running, name) is None, what=f"node {name} gone")
    _join(running, name)
    wait_for(lambda: _admitted(running, name), what=f"node {name} admitted by the health gate", timeout=GATE_BOUND_SECONDS)


def _training_pods_on(running: RunningCluster, name: str) -> list[str]:
    pods = running.env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods
            if (p.metadata.labels or {}).get("app.kubernetes.io/component") == "training"]


def _blocks(running: RunningCluster, pods: list[Any]) -> set[str]:
    layer = network_layer_key(3)
    return {_node(running, p.spec.node_name).metadata.labels[layer] for p in pods}


def _recovered(running: RunningCluster, namespace: str, name: str, lost: str):
    def check():
        pods = [p for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]
        return len(pods) == 2 and all(p.spec.node_name != lost for p in pods) and pods
    return check


@pytest.fixture
def running_job(prod_faults_cluster):
    """A two-node run of prod's job, Running; every node of the pool admitted again afterwards."""
    running = prod_faults_cluster
    for node in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"):
        wait_for(lambda: _admitted(running, node.metadata.name), what=f"{node.metadata.name} admitted before the test",
                 timeout=GATE_BOUND_SECONDS)
    namespace, name = running.submit_run(running.training_app().name, parallelism=2)
    try:
        pods = running.env.expect_job_running(namespace, name, 2)
        yield namespace, name, pods
    finally:
        running.env.delete_job(namespace, name)
        faults = running.cluster.faults()
        faults.clear(pool=POOL)
        for simulated in running.cluster.nodes:
            if simulated.pool != POOL:
                continue
            node = _node(running, simulated.name)
            if node is not None and (faults.recorded().get(f"node.{simulated.name}") or QUARANTINE_TAINT_KEY in _taint_keys(node)):
                faults.clear(node=simulated.name)
            if node is None or not _admitted(running, simulated.name):
                _replace(running, simulated.name)


def test_a_joining_node_gets_no_training_pod_until_the_gate_admits_it_across_repeated_joins(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    for join in range(3):
        running.cluster.faults().delete(spare)
        wait_for(lambda: _node(running, spare) is None, what=f"node {spare} gone")
        joined = time.monotonic()
        _join(running, spare)
        node = wait_for(lambda: _node(running, spare), what=f"node {spare} registered")
        assert STARTUP_TAINT_KEY in _taint_keys(node), f"join {join}: {spare} joined without the startup taint"

        def gated_and_empty() -> bool:
            now = _node(running, spare)
            assert not (STARTUP_TAINT_KEY in _taint_keys(now) and _training_pods_on(running, spare)), \
                f"join {join}: a training pod on {spare} before the gate admitted it: {_training_pods_on(running, spare)}"
            return _admitted(running, spare)

        wait_for(gated_and_empty, what=f"join {join}: the gate admitting {spare}", timeout=GATE_BOUND_SECONDS)
        print(f"join {join}: {spare} admitted {time.monotonic() - joined:.1f} s after it joined")


def test_a_node_that_fails_its_checks_keeps_the_taint_and_says_why(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    running.cluster.faults().fail_checks("dcgm", pool=POOL)
    running.cluster.faults().delete(spare)
    wait_for(lambda: _node(running, spare) is None, what=f"node {spare} gone")
    _join(running, spare)

    def failed():
        node = _node(running, spare)
        found = node is not None and _condition(node, CONDITION_TYPE)
        return found and found.status == "False" and found

    found = wait_for(failed, what=f"the gate failing {spare}", timeout=GATE_BOUND_SECONDS)
    assert found.reason == "DCGMDiagnosticFailed"
    assert "check dcgm failed: simulated by the local cluster" in found.message
    # It never loses the taint, and nothing trains on it.
    holds_for(lambda: STARTUP_TAINT_KEY in _taint_keys(_node(running, spare)) and not _training_pods_on(running, spare),
              seconds=15, what=f"{spare} held back after failing its checks")


def test_a_running_job_survives_the_deletion_of_one_of_its_nodes_on_the_spare_in_its_block(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    kept = {p.metadata.name for p in pods if p.spec.node_name != lost}
    started = time.monotonic()
    running.cluster.faults().delete(lost)
    recovered = wait_for(_recovered(running, namespace, name, lost), what=f"job {name} Running again without {lost}",
                         timeout=DELETED_NODE_BOUND_SECONDS)
    print(f"node deleted: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - started:.1f} s")
    # Kueue replaced the node: the other rank never stopped, and both stand under one layer-3 block.
    assert kept <= {p.metadata.name for p in recovered}
    assert len(_blocks(running, recovered)) == 1
    workload = running.env.workload(namespace, name)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in workload["status"].get("conditions", []))


def test_a_job_on_a_node_whose_gpus_fail_is_moved_to_the_spare(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    started = time.monotonic()
    running.cluster.faults().set_condition(lost, condition_fault("AcceleratedHardwareReady=False", "NvidiaXID79Error", None))
    recovered = wait_for(_recovered(running, namespace, name, lost), what=f"job {name} Running again without {lost}",
                         timeout=QUARANTINED_NODE_BOUND_SECONDS)
    print(f"GPU fault: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - started:.1f} s")
    assert QUARANTINE_TAINT_KEY in _taint_keys(_node(running, lost))
    assert len(_blocks(running, recovered)) == 1
    # Recovered GPUs: the quarantine goes, and the node is checked again before it gets work.
    running.cluster.faults().clear(node=lost)
    wait_for(lambda: _admitted(running, lost) and QUARANTINE_TAINT_KEY not in _taint_keys(_node(running, lost)),
             what=f"{lost} checked again and admitted", timeout=GATE_BOUND_SECONDS)


def test_with_no_spare_the_job_is_requeued_and_waits_instead_of_splitting_across_blocks(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    # The spare is replaced by a node that fails its checks (the pool's next joins fail): no spare.
    running.cluster.faults().fail_checks("dcgm", pool=POOL)
    running.cluster.faults().delete(spare)
    wait_for(lambda: _node(running, spare) is None, what=f"node {spare} gone")
    _join(running, spare)
    wait_for(lambda: (_condition(_node(running, spare), CONDITION_TYPE) or _Unset).status == "False",
             what=f"{spare} failing its checks", timeout=GATE_BOUND_SECONDS)
    lost = pods[0].spec.node_name
    running.cluster.faults().set_condition(lost, condition_fault("AcceleratedHardwareReady=False", "NvidiaXID79Error", None))

    def requeued():
        conditions = {c["type"]: c for c in running.env.workload(namespace, name)["status"].get("conditions", [])}
        evicted = conditions.get("Evicted", {})
        return (evicted.get("status") == "True" and evicted.get("reason") == "NodeFailures" and "Requeued" in conditions
                and conditions)

    started = time.monotonic()
    conditions = wait_for(requeued, what=f"Kueue evicting and requeuing {name} for its failed node",
                          timeout=QUARANTINED_NODE_BOUND_SECONDS)
    print(f"no spare: evicted and requeued after {time.monotonic() - started:.1f} s "
          f"({conditions['Requeued']['reason']}: {conditions['Requeued'].get('message', '')})")
    assert conditions["Requeued"]["reason"] == "NodeFailures"
    # The whole job stops (its other rank too), then waits admitted nowhere: not on the pool's one
    # healthy node plus another block, nor on the Karpenter flavor, which has no topology.
    def running_pods():
        return [f"{p.metadata.name} on {p.spec.node_name}" for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]

    wait_for(lambda: not running_pods(), what=f"every rank of {name} stopped", timeout=60)

    def waiting():
        workload = running.env.workload(namespace, name)
        admitted = conditions_of(running, namespace, name).get("Admitted", {})
        assignments = (workload.get("status", {}).get("admission") or {}).get("podSetAssignments")
        nodes = {n.metadata.name: sorted(_taint_keys(n)) for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}")}
        assert admitted.get("status") != "True", f"job {name} admitted again: {assignments}; pool nodes {nodes}"
        assert not running_pods(), f"job {name} runs again: {running_pods()}"
        return True

    holds_for(waiting, seconds=20, what=f"job {name} waiting, admitted nowhere")


def conditions_of(running: RunningCluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (running.env.workload(namespace, name) or {}).get("status", {}).get("conditions", [])}
