"""A node joins sick, or its GPUs fail under a running job: on prod's pool grown to three nodes (a
spare in the job's layer-3 block, ``node_faults``), faults are injected as ``eks-gpu-training-local
fault`` injects them (real API writes), and Kubernetes, Kueue and the health gate decide the rest.
A node lost under a job is ``test_node_loss``'s, a node that stops answering ``test_node_unreachable``'s.
This module and the two node-loss ones take turns on one cluster (``prod_faults_cluster``); the
unreachable node's variant runs on a cluster of its own beside them.

Simulated: a replacement joining (the managed node group launching an instance) is a Node created as
a kubelet registers it, with the node group's taints; the check containers' verdict (pass unless a
``fail-checks`` fault says otherwise) and the node monitoring agent's condition are the local
cluster's (``local.node_health``). The gate itself runs its own program as its ServiceAccount;
eviction, the Job controller and Kueue's node replacement are the real ones.

The recovery bounds asserted here are the ones docs/health.md ("When a node fails during a job")
documents; each test prints what it measured.
"""

from __future__ import annotations

import time

from tests.support import gpu_nodes
from tests.support.environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.healthgate.gate_settings import CONDITION_TYPE, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY
from eks_gpu_training.local.node_repair import REPAIRED_BY
from tests.support.gpu_nodes import REPAIR_WAIT_SECONDS
from tests.support.node_faults import (
    GATE_BOUND_SECONDS,
    POOL,
    QUARANTINED_NODE_BOUND_SECONDS,
    expect_moved,
    rejoin,
    rejoin_failing_checks,
    remove,
    restore_pool,
    spare_beside,
    training_pods_on,
)


def test_a_joining_node_gets_no_training_pod_until_the_gate_admits_it_across_repeated_joins(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    spare = spare_beside(running, pods)
    for join in range(3):
        remove(running, spare)
        joined = time.monotonic()
        rejoin(running, spare)
        node = wait_for(lambda: gpu_nodes.node(running, spare), what=f"node {spare} registered")
        assert STARTUP_TAINT_KEY in gpu_nodes.taint_keys(node), f"join {join}: {spare} joined without the startup taint"

        def gated_and_empty() -> bool:
            now = gpu_nodes.node(running, spare)
            assert not (STARTUP_TAINT_KEY in gpu_nodes.taint_keys(now) and training_pods_on(running, spare)), \
                f"join {join}: a training pod on {spare} before the gate admitted it: {training_pods_on(running, spare)}"
            return gpu_nodes.admitted(running, spare)

        wait_for(gated_and_empty, what=f"join {join}: the gate admitting {spare}", timeout=GATE_BOUND_SECONDS)
        print(f"join {join}: {spare} admitted {time.monotonic() - joined:.1f} s after it joined")


def test_a_node_that_fails_its_checks_keeps_the_taint_and_says_why(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    spare = spare_beside(running, pods)
    rejoin_failing_checks(running, spare)

    def failed():
        node = gpu_nodes.node(running, spare)
        found = node is not None and gpu_nodes.condition(node, CONDITION_TYPE)
        return found and found.status == "False" and found

    found = wait_for(failed, what=f"the gate failing {spare}", timeout=GATE_BOUND_SECONDS)
    assert found.reason == "DCGMDiagnosticFailed"
    assert "check dcgm failed: simulated by the local cluster" in found.message
    # It never loses the taint, and nothing trains on it.
    holds_for(lambda: STARTUP_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, spare)) and not training_pods_on(running, spare),
              seconds=15, what=f"{spare} held back after failing its checks")


def test_a_job_on_a_node_whose_gpus_fail_is_moved_to_the_spare(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    started = time.monotonic()
    gpu_nodes.gpu_fault(running, lost)
    expect_moved(running, namespace, name, lost, since=started, bound=QUARANTINED_NODE_BOUND_SECONDS, fault="GPU fault")
    assert QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, lost))
    # Recovered GPUs: the quarantine goes, and the node is checked again before it gets work.
    running.cluster.faults().clear(node=lost)
    wait_for(lambda: gpu_nodes.ready_for_work(running, lost),
             what=f"{lost} checked again and admitted", timeout=GATE_BOUND_SECONDS)


def test_broken_variant_without_node_repair_the_bad_node_stays_and_nothing_replaces_it(prod_faults_cluster):
    """The broken variant of test_node_repair's managed pool: with nodeRepair off, as this
    module's pool has it, a node whose GPUs fail is quarantined and stays, nothing in its place."""
    running = prod_faults_cluster
    pool = sorted(n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"))
    bad = pool[-1]
    wait_for(lambda: gpu_nodes.admitted(running, bad), what=f"{bad} admitted before the test", timeout=GATE_BOUND_SECONDS)
    gpu_nodes.gpu_fault(running, bad)
    try:
        wait_for(lambda: QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, bad)), what=f"{bad} quarantined by the gate")

        def unrepaired() -> bool:
            node = gpu_nodes.node(running, bad)
            now = sorted(n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"))
            assert node is not None, f"{bad} was removed"
            assert now == pool, f"the pool changed from {pool} to {now}"
            assert not node.spec.unschedulable
            assert REPAIRED_BY not in (node.metadata.annotations or {})
            return True

        holds_for(unrepaired, seconds=3 * REPAIR_WAIT_SECONDS, what=f"{bad} left as it is, nothing in its place")
    finally:
        restore_pool(running)
