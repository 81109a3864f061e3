"""Checks that cannot pass on any node: a configuration error, not a node failure.

Prod's stack, its p5 pool grown to three nodes with node auto repair off (``node_faults``), and its
Karpenter GPU pool:

- the DCGM check's image cannot be pulled on the pool (``fault --unpullable``: the simulated
  kubelet reports ``ErrImagePull``): every node that joins keeps its startup taint with
  ``CheckImageUnavailable``, none is quarantined or deleted, and ``verify`` names the cause in one
  row; once the gate's settings change (a fixed image, as ``pulumi up`` writes it) the nodes are
  checked again and admitted;
- the same check fails on every node of the pool: the nodes after the first are held with
  ``PoolWideCheckFailure``, and ``verify`` says so;
- every node of the Karpenter pool fails: the gate hands the first back (its NodeClaim deleted,
  recorded as an Event), and holds the next, which failed the same way, instead of looping
  Karpenter through new nodes.

The gate's decisions, the scheduler, Karpenter and the API server are the real ones; the kubelet's
pull and the check containers' verdicts are simulated (``local.node_health``).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from typing import Any, Optional

import pytest

from tests.support import gpu_nodes
from tests.support.clusters import RunningCluster
from tests.support.environment import holds_for, wait_for
from tests.support.node_faults import GATE_BOUND_SECONDS, POOL, remove, rejoin, restore_pool
from eks_gpu_training.healthgate.replacements import EVENT_REASON
from eks_gpu_training.healthgate.gate_settings import CONDITION_TYPE, CONFIG_KEY, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY
from eks_gpu_training.verify import FAIL, main
from eks_gpu_training.workloads.health_gate import NAME, NAMESPACE
from tests.support.fit_probe import FIT_NAMESPACE, fit_job, prepare_fit_namespace, shorter_consolidation

KARPENTER_POOL = "gpu-training"
KARPENTER_BOUND_SECONDS = 180
"""Karpenter launching a node for a pending pod and the gate's check of it (``test_node_repair``)."""


@pytest.fixture(scope="module")
def prod_gate_cluster(prod_unreachable_cluster):
    """``test_node_unreachable``'s cluster (``node_faults``): what sets it apart, training pods that
    tolerate an unreachable node for no time, changes nothing here, where no node stops answering."""
    return prod_unreachable_cluster


def _verify_rows(running: RunningCluster) -> dict[str, dict]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        main(["--kubeconfig", str(running.kubeconfig), "--json"])
    return {row["item"]: row for row in json.loads(out.getvalue())["rows"]}


def _reason(running: RunningCluster, name: str) -> Optional[str]:
    node = gpu_nodes.node(running, name)
    found = node is not None and gpu_nodes.condition(node, CONDITION_TYPE)
    return found.reason if found and found.status == "False" else None


def _rejoin_all(running: RunningCluster) -> list[str]:
    names = sorted(n.metadata.name for n in running.env.nodes(f"eks-gpu-training/pool={POOL}"))
    for name in names:
        remove(running, name)
        rejoin(running, name)
    return names


def _held(running: RunningCluster, name: str) -> bool:
    node = gpu_nodes.node(running, name)
    keys = gpu_nodes.taint_keys(node) if node is not None else set()
    return node is not None and STARTUP_TAINT_KEY in keys and QUARANTINE_TAINT_KEY not in keys


def test_an_unpullable_check_image_holds_every_node_as_a_configuration_error_until_the_settings_change(prod_gate_cluster):
    running = prod_gate_cluster
    faults = running.cluster.faults()
    faults.fail_pulls("dcgm", pool=POOL)
    try:
        names = _rejoin_all(running)
        for name in names:
            wait_for(lambda: _reason(running, name) == "CheckImageUnavailable", what=f"{name} held for the check's image",
                     timeout=GATE_BOUND_SECONDS)
        holds_for(lambda: all(_held(running, n) for n in names), seconds=10,
                  what="every node kept, tainted and not quarantined")
        row = _verify_rows(running)["health-gate-configuration"]
        assert row["status"] == FAIL
        assert "CheckImageUnavailable" in row["detail"]
        assert "cannot pull" in row["detail"]
        assert _verify_rows(running)["health-gate"]["status"] != FAIL, "the cause is named once, in its own row"
        # The fix, as `pulumi up` writes it: the gate's settings with another image, and the pull works.
        faults.clear(pool=POOL)
        settings_map = running.env.core.read_namespaced_config_map(NAME, NAMESPACE)
        settings = json.loads(settings_map.data[CONFIG_KEY])
        for container in settings["checkPod"]["spec"]["containers"]:
            if container["name"] == "dcgm":
                container["image"] += "-fixed"
        running.env.core.patch_namespaced_config_map(NAME, NAMESPACE, {"data": {CONFIG_KEY: json.dumps(settings, sort_keys=True)}})
        for name in names:
            wait_for(lambda: gpu_nodes.admitted(running, name), what=f"{name} checked again and admitted",
                     timeout=GATE_BOUND_SECONDS)
    finally:
        faults.clear(pool=POOL)
        restore_pool(running)


def test_one_check_failing_on_every_node_of_a_pool_holds_them_for_the_pool_not_as_node_failures(prod_gate_cluster):
    running = prod_gate_cluster
    faults = running.cluster.faults()
    faults.fail_checks("dcgm", pool=POOL)
    try:
        names = _rejoin_all(running)
        reasons = wait_for(lambda: (found := {n: _reason(running, n) for n in names}) and all(found.values()) and found,
                           what="every node's check failed", timeout=GATE_BOUND_SECONDS)
        assert sorted(reasons.values()).count("PoolWideCheckFailure") >= len(names) - 1, reasons
        assert all(_held(running, n) for n in names)
        row = _verify_rows(running)["health-gate-configuration"]
        assert row["status"] == FAIL
        assert "PoolWideCheckFailure" in row["detail"]
        print(f"pool-wide failure: {reasons}")
    finally:
        faults.clear(pool=POOL)
        restore_pool(running)


def _claims(running: RunningCluster) -> list[dict[str, Any]]:
    return running.env.list("karpenter.sh/v1", "NodeClaim", selector=f"karpenter.sh/nodepool={KARPENTER_POOL}")


def _kept_claims(running: RunningCluster) -> set[str]:
    return {c["metadata"]["name"] for c in _claims(running) if not c["metadata"].get("deletionTimestamp")}


def _deletions(running: RunningCluster) -> list[dict[str, Any]]:
    events = running.env.list("events.k8s.io/v1", "Event", NAMESPACE, selector=f"eks-gpu-training/pool={KARPENTER_POOL}")
    return [e for e in events if e.get("reason") == EVENT_REASON]


def test_a_karpenter_pool_whose_every_node_fails_is_handed_back_once_then_held(prod_gate_cluster):
    running = prod_gate_cluster
    env = running.env
    (pool,) = [p for p in running.args.karpenter.gpu_node_pools if p.name == KARPENTER_POOL]
    faults = running.cluster.faults()
    faults.fail_checks("dcgm", pool=KARPENTER_POOL)
    restore = shorter_consolidation(env, KARPENTER_POOL)
    prepare_fit_namespace(running)
    job = fit_job(running, pool, karpenter=True, nodes=1)
    env.apply(job)
    try:
        def second_failed() -> Optional[str]:
            for claim in _claims(running):
                node = (claim.get("status") or {}).get("nodeName")
                if node and _reason(running, node) == "PoolWideCheckFailure":
                    return str(node)
            return None

        held = wait_for(second_failed, what="the second Karpenter node held for the pool", timeout=2 * KARPENTER_BOUND_SECONDS)
        assert len(_deletions(running)) == 1, "the first failing node handed back, recorded once"
        # The first NodeClaim may still be terminating (Karpenter drains and finalizes it); what must
        # hold is the set of claims Karpenter keeps: the held one, and no new one.
        expected = (_kept_claims(running), 1)
        seen: list[tuple[set[str], int]] = []

        def unchanged() -> bool:
            seen.append((_kept_claims(running), len(_deletions(running))))
            return seen[-1] == expected

        try:
            holds_for(unchanged, seconds=20, what=f"{held} kept: no NodeClaim deleted, none launched")
        except AssertionError as error:
            raise AssertionError(f"{error}: claims and deletions {expected} became {seen[-1]}") from None
    finally:
        faults.clear(pool=KARPENTER_POOL)
        env.delete_job(FIT_NAMESPACE, job["metadata"]["name"])
        for claim in _claims(running):
            env.delete("karpenter.sh/v1", "NodeClaim", claim["metadata"]["name"])
        wait_for(lambda: not env.nodes(f"karpenter.sh/nodepool={KARPENTER_POOL}"),
                 what=f"pool {KARPENTER_POOL}'s nodes gone", timeout=KARPENTER_BOUND_SECONDS)
        restore()
