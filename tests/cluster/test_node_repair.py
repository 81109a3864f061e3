"""Repair paths end to end: a GPU node that goes bad is replaced.

- Karpenter: a node of prod's Karpenter pool that fails the health gate's checks has its NodeClaim
  deleted by the gate, and Karpenter's own provisioner launches a new NodeClaim for the pod that
  still waits (Karpenter's KWOK provider). Karpenter's NodeRepair is not what acts here: the KWOK
  provider's repair policies cover only the kubelet's Ready condition, False or Unknown for 10
  minutes, a constant in its code (sigs.k8s.io/karpenter v1.14.3, kwok/cloudprovider), not the node
  monitoring agent's conditions that the AWS provider repairs.
- Managed node groups: EKS node auto repair runs on AWS's side, so the local cluster simulates it
  (``local.node_repair``): after the condition's wait (10 minutes for AcceleratedHardwareReady,
  10 s here) a replacement registers as a kubelet registers it, with the node group's labels and
  startup taint, and the bad node is cordoned and drained through the Eviction API, so the API
  server enforces its pods' PodDisruptionBudget. Its broken variant, a pool whose nodeRepair is off
  keeping its bad node with nothing in its place, runs on test_node_faults' pool, whose repair is off.

Simulated besides: the check containers' verdict and the node monitoring agent's condition
(``local.node_health``). The health gate, Karpenter, the scheduler, the taint manager and the
Eviction API are the real ones. Each test prints what it measured; docs/health.md ("Repair") states the bounds.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import pytest

from tests.support import gpu_nodes
from tests.support.clusters import RunningCluster, start
from tests.support.environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.healthgate.gate_settings import CONDITION_TYPE, STARTUP_TAINT_KEY
from eks_gpu_training.local.faults import node_key
from eks_gpu_training.local.node_repair import REPAIRED_BY
from tests.support.gpu_nodes import REPAIR_WAIT_SECONDS
from tests.support.fit_probe import FIT_NAMESPACE, fit_job, prepare_fit_namespace, shorter_consolidation

POOL = "p5-training"
KARPENTER_POOL = "gpu-training"
REPLACED_BOUND_SECONDS = REPAIR_WAIT_SECONDS + 20
"""The fault is noticed after the wait, within two rounds of the simulation (2 s each) and its
Node created at once."""
ADMITTED_BOUND_SECONDS = 60
"""The replacement's checks: a gate round, the check pod placed and run (3 s simulated), the next round."""
KARPENTER_BOUND_SECONDS = 180
"""Karpenter launching a node for a pending pod, the gate's check of it, as the environment's JOB_TIMEOUT."""
PROBE = "repair-probe"
PROBE_NAMESPACE = "default"


@pytest.fixture(scope="module")
def prod_repair_cluster(tmp_path_factory):
    """Prod's stack with its GPU pool grown to three nodes (``up --scale 3``): one of them a spare."""
    yield from start("prod", tmp_path_factory.mktemp("local-prod-repair"), scale=3)


def _probe(node: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pod on ``node`` that tolerates every taint (the quarantine's eviction leaves it) and a
    PodDisruptionBudget that allows none of it to go."""
    labels = {"app": PROBE}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": PROBE, "namespace": PROBE_NAMESPACE, "labels": labels},
           "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": PROBE, "namespace": PROBE_NAMESPACE},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}
    return pod, budget


def test_eks_node_auto_repair_replaces_a_node_whose_gpus_fail_and_drains_it_under_its_disruption_budget(prod_repair_cluster):
    running = prod_repair_cluster
    env = running.env
    pool = sorted(n.metadata.name for n in env.nodes(f"{GPU_POOL_KEY}={POOL}"))
    bad = pool[-1]
    for name in pool:
        wait_for(lambda: gpu_nodes.admitted(running, name), what=f"{name} admitted before the test", timeout=ADMITTED_BOUND_SECONDS)
    pod, budget = _probe(bad)
    env.apply(budget)
    env.apply(pod)
    try:
        env.expect_running(PROBE_NAMESPACE, PROBE)
        wait_for(lambda: (env.get("policy/v1", "PodDisruptionBudget", PROBE, PROBE_NAMESPACE) or {}).get("status", {})
                 .get("currentHealthy") == 1, what="the disruption budget counting its pod")
        started = time.monotonic()
        gpu_nodes.gpu_fault(running, bad)

        def replaced() -> Optional[str]:
            node = gpu_nodes.node(running, bad)
            return node is not None and (node.metadata.annotations or {}).get(REPAIRED_BY)

        new = wait_for(replaced, what=f"a replacement for {bad}", timeout=REPLACED_BOUND_SECONDS)
        registered = time.monotonic() - started
        joined = wait_for(lambda: gpu_nodes.node(running, new), what=f"{new} registered")
        assert STARTUP_TAINT_KEY in gpu_nodes.taint_keys(joined), f"{new} joined without the startup taint"
        assert joined.metadata.labels[GPU_POOL_KEY] == POOL
        assert gpu_nodes.node(running, bad).spec.unschedulable, f"{bad} not cordoned"
        wait_for(lambda: gpu_nodes.admitted(running, new), what=f"the gate admitting {new}", timeout=ADMITTED_BOUND_SECONDS)
        admitted = time.monotonic() - started

        # The budget allows no eviction: the API server refuses it, and the bad node stays while its pod does.
        holds_for(lambda: gpu_nodes.node(running, bad) is not None and env.pod(PROBE_NAMESPACE, PROBE).metadata.deletion_timestamp is None,
                  seconds=10, what=f"{bad} kept while the disruption budget refuses to let its pod go")
        env.delete("policy/v1", "PodDisruptionBudget", PROBE, PROBE_NAMESPACE)
        released = time.monotonic()
        wait_for(lambda: gpu_nodes.node(running, bad) is None, what=f"{bad} drained and deleted", timeout=30)
        print(f"repair: {new} registered {registered:.1f} s after the GPU fault on {bad} (EKS's 10 min, scaled to "
              f"{REPAIR_WAIT_SECONDS:.0f} s), admitted by the gate after {admitted:.1f} s; {bad} drained and deleted "
              f"{time.monotonic() - released:.1f} s after its disruption budget allowed it")
        now = sorted(n.metadata.name for n in env.nodes(f"{GPU_POOL_KEY}={POOL}"))
        assert now == sorted([*pool[:-1], new])
    finally:
        env.delete("v1", "Pod", PROBE, PROBE_NAMESPACE)
        env.delete("policy/v1", "PodDisruptionBudget", PROBE, PROBE_NAMESPACE)
        wait_for(lambda: not env.pods(PROBE_NAMESPACE, f"app={PROBE}"), what="the probe pod gone")


def _claims(running: RunningCluster) -> list[dict[str, Any]]:
    return running.env.list("karpenter.sh/v1", "NodeClaim", selector=f"karpenter.sh/nodepool={KARPENTER_POOL}")


def test_a_karpenter_node_that_fails_its_checks_is_replaced_by_a_new_nodeclaim(prod_repair_cluster):
    running = prod_repair_cluster
    env = running.env
    (pool,) = [p for p in running.args.karpenter.gpu_node_pools if p.name == KARPENTER_POOL]
    faults = running.cluster.faults()
    # The pool's checks fail until the job's first node is known; then only that node's do. Any
    # other node fails no check: the one Karpenter launches in its place, and one it may launch
    # while the first one's check holds its GPUs (Karpenter counts that pod's requests against the
    # node, so the job's pod no longer fits there in its simulation). Two nodes failing alike
    # would rightly be a pool-wide failure.
    faults.fail_checks("dcgm", pool=KARPENTER_POOL)
    restore = shorter_consolidation(env, KARPENTER_POOL)
    prepare_fit_namespace(running)
    job = fit_job(running, pool, karpenter=True, nodes=1)
    name = job["metadata"]["name"]
    started = time.monotonic()
    env.apply(job)
    first_node = None
    try:
        def launched() -> Optional[dict[str, Any]]:
            return next((c for c in _claims(running) if (c.get("status") or {}).get("nodeName")), None)

        first = wait_for(launched, what="Karpenter launching a node for the job", timeout=KARPENTER_BOUND_SECONDS)
        first_node = first["status"]["nodeName"]
        faults.fail_checks("dcgm", node=first_node)
        faults.clear(pool=KARPENTER_POOL)

        def failed():
            node = gpu_nodes.node(running, first_node)
            found = node is not None and gpu_nodes.condition(node, CONDITION_TYPE)
            return found and found.status == "False" and found

        verdict = wait_for(failed, what=f"the gate failing {first_node}", timeout=ADMITTED_BOUND_SECONDS)
        failed_at = time.monotonic() - started
        assert verdict.reason == "DCGMDiagnosticFailed", verdict.message

        def second() -> Optional[dict[str, Any]]:
            return next((c for c in _claims(running) if c["metadata"]["name"] != first["metadata"]["name"]), None)

        new = wait_for(second, what="Karpenter launching a new NodeClaim for the job that still waits",
                       timeout=KARPENTER_BOUND_SECONDS)
        replaced_at = time.monotonic() - started

        def bound() -> Optional[str]:
            pods = env.pods(FIT_NAMESPACE, f"batch.kubernetes.io/job-name={name}")
            return pods and pods[0].spec.node_name

        on = wait_for(bound, what="the job's pod bound", timeout=KARPENTER_BOUND_SECONDS)
        assert on != first_node
        assert on == (env.get("karpenter.sh/v1", "NodeClaim", new["metadata"]["name"]) or {}).get(
            "status", {}).get("nodeName")
        wait_for(lambda: gpu_nodes.node(running, first_node) is None, what=f"Karpenter terminating {first_node}",
                 timeout=KARPENTER_BOUND_SECONDS)
        print(f"karpenter: {first_node} failed its checks {failed_at:.1f} s after the job was submitted; NodeClaim "
              f"{new['metadata']['name']} there {replaced_at - failed_at:+.1f} s from then; the job's pod on {on} after "
              f"{time.monotonic() - started:.1f} s")
    finally:
        faults.clear(pool=KARPENTER_POOL)
        if first_node is not None:
            faults.clear(node=first_node)
            assert node_key(first_node) not in faults.recorded()
        env.delete_job(FIT_NAMESPACE, name)
        wait_for(lambda: not env.nodes(f"karpenter.sh/nodepool={KARPENTER_POOL}"),
                 what=f"Karpenter removing pool {KARPENTER_POOL}'s emptied nodes", timeout=KARPENTER_BOUND_SECONDS)
        restore()
