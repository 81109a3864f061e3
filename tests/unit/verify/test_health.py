"""The node health rows judged on snapshots: nodes the health gate still holds, nodes whose GPUs
the node monitoring agent reports failing, and jobs waiting for a replacement node; a pass, a fail
and a skip for each, every fail saying what to do."""

from __future__ import annotations

from eks_gpu_training.verify import Snapshot, judge, judge_health
from tests.support.cluster_objects import node, system_node, training_pods

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
    assert row.evidence == "1 GPU node failed the health gate's checks (DCGMDiagnosticFailed) and keeps eks-gpu-training/unverified (gpu-1)."
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
    assert row.evidence == "1 GPU node reports failing GPUs (NvidiaXID79Error, quarantined) (gpu-1)."
    assert "node auto repair" in row.fix
    assert rows([node("gpu-0")])["accelerated-hardware"].status == "pass"
    assert rows([node("gpu-0", accelerated_hardware_ready=None)])["accelerated-hardware"].status == "skip"


def test_a_job_with_a_rank_waiting_for_a_node_fails_the_replacement_row():
    row = rows([node("gpu-0"), node("gpu-1")], training_pods("rl-training", ["gpu-0", None]))["replacement-wait"]
    assert row.status == "fail"
    assert row.evidence == "1 multi-node training job with a rank waiting for a node (training/rl-training-multi)."
    assert "requeues the whole job" in row.fix
    assert rows([node("gpu-0"), node("gpu-1")], training_pods("rl-training", ["gpu-0", "gpu-1"]))["replacement-wait"].status == "pass"
    assert rows([node("gpu-0")])["replacement-wait"].status == "skip"


def test_the_health_rows_follow_the_seeds_in_the_report():
    items = [r.item for r in judge(Snapshot(nodes=[node("gpu-0")]))]
    assert items[-4:] == ["health-gate", "health-gate-configuration", "accelerated-hardware", "replacement-wait"]


def test_on_a_fleet_the_failing_nodes_are_counted_per_reason_and_only_the_first_few_named():
    failing = [gated(f"gpu-{i}", "False", "DCGMDiagnosticFailed" if i % 4 else "EFALoopbackFailed") for i in range(400)]
    row = {r.item: r for r in judge_health(Snapshot(nodes=failing), examples=2)}["health-gate"]
    assert [(g.reason.split(")")[0], g.count, g.examples) for g in row.failures] == [
        ("failed the health gate's checks (DCGMDiagnosticFailed", 300, ("gpu-1", "gpu-2")),
        ("failed the health gate's checks (EFALoopbackFailed", 100, ("gpu-0", "gpu-4")),
    ]
    assert "and 298 more" in row.evidence


def test_a_cause_no_node_can_fix_is_one_configuration_row_naming_it_and_not_a_node_failure():
    held = [gated(f"gpu-{i}", "False", reason="CheckImageUnavailable") for i in range(3)]
    for found in held:
        found["status"]["conditions"][-1]["message"] = "check dcgm cannot pull mirror.example/dcgm:4 (ErrImagePull)"
    judged = rows(held)
    row = judged["health-gate-configuration"]
    assert row.status == "fail"
    assert row.evidence == ("the health gate's checks cannot pass: CheckImageUnavailable on gpu-0, gpu-1, gpu-2: "
                            "check dcgm cannot pull mirror.example/dcgm:4 (ErrImagePull).")
    assert "images.registryMirrors" in row.fix
    assert judged["health-gate"].status == "pass", "named once, in the configuration row"


def test_no_configuration_cause_passes_the_configuration_row_and_no_gpu_node_skips_it():
    assert rows([gated("gpu-1", "False")])["health-gate-configuration"].status == "pass"
    assert rows([])["health-gate-configuration"].status == "skip"
