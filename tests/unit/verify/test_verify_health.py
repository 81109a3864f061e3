"""The node health rows judged on snapshots: nodes the health gate still holds, nodes whose GPUs
the node monitoring agent reports failing, and jobs waiting for a replacement node; a pass, a fail
and a skip for each, every fail saying what to do."""

from __future__ import annotations

from eks_gpu_training.verify import Snapshot, judge, judge_health
from cluster_objects import node, system_node, training_pods

STARTUP = {"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}


def gated(name: str, checks: str | None = None, reason: str = "DCGMDiagnosticFailed") -> dict:
    found = node(name)
    found["spec"]["taints"].append(dict(STARTUP))
    if checks is not None:
        found["status"]["conditions"].append({"type": "HealthChecksPassed", "status": checks, "reason": reason})
    return found


def rows(nodes, pods=()) -> dict:
    return {r.item: r for r in judge_health(Snapshot(nodes=[system_node("system-0"), *nodes], pods=list(pods)))}


def test_a_node_that_failed_its_checks_fails_the_gate_row_naming_it_its_reason_and_what_to_do():
    row = rows([node("gpu-0"), gated("gpu-1", "False")])["health-gate"]
    assert row.status == "fail"
    assert "gpu-1 (DCGMDiagnosticFailed)" in row.evidence
    assert "kubectl drain" in row.fix


def test_a_node_still_being_checked_passes_and_says_when_to_look_at_the_gate():
    row = rows([node("gpu-0"), gated("gpu-1")])["health-gate"]
    assert row.status == "pass"
    assert row.evidence.startswith("gpu-1 still being checked")
    assert "healthGate.timeoutMinutes" in row.evidence


def test_no_gated_node_passes_and_no_gpu_node_skips():
    assert rows([node("gpu-0"), node("gpu-1")])["health-gate"].status == "pass"
    assert rows([])["health-gate"].status == "skip"


def test_a_node_with_failing_gpus_fails_the_hardware_row_with_its_reason_and_quarantine():
    failing = node("gpu-1", accelerated_hardware_ready="False")
    failing["spec"]["taints"].append({"key": "eks-gpu-training/unhealthy", "value": "NvidiaXID79Error", "effect": "NoExecute"})
    row = rows([node("gpu-0"), failing])["accelerated-hardware"]
    assert row.status == "fail"
    assert "gpu-1 (NvidiaXID79Error, quarantined)" in row.evidence
    assert "node auto repair" in row.fix
    assert rows([node("gpu-0")])["accelerated-hardware"].status == "pass"
    assert rows([node("gpu-0", accelerated_hardware_ready=None)])["accelerated-hardware"].status == "skip"


def test_a_job_with_a_rank_waiting_for_a_node_fails_the_replacement_row():
    row = rows([node("gpu-0"), node("gpu-1")], training_pods("rl-training", ["gpu-0", None]))["replacement-wait"]
    assert row.status == "fail"
    assert row.evidence == "training/rl-training-multi (1 of 2 pods wait for a node)."
    assert "requeues the whole job" in row.fix
    assert rows([node("gpu-0"), node("gpu-1")], training_pods("rl-training", ["gpu-0", "gpu-1"]))["replacement-wait"].status == "pass"
    assert rows([node("gpu-0")])["replacement-wait"].status == "skip"


def test_the_health_rows_follow_the_seeds_in_the_report():
    items = [r.item for r in judge(Snapshot(nodes=[node("gpu-0")]))]
    assert items[-3:] == ["health-gate", "accelerated-hardware", "replacement-wait"]
