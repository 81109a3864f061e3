"""The health gate's decisions, from the cluster as listed: a joining node is checked once Ready,
a passing one gets its startup taint lifted, a failing one keeps it with a condition saying why
(and a Karpenter node goes back to Karpenter), a node whose GPUs fail later is quarantined, never
more than half of its pool, and checked again once it recovers."""

from __future__ import annotations

from datetime import datetime, timezone

from eks_gpu_training.healthgate.node_check import NODE_ANNOTATION, NODE_UID_ANNOTATION, TEMPLATE_ANNOTATION, check_job, template_hash
from eks_gpu_training.healthgate.decide import (
    CreateCheck, DeleteCheck, DeleteNodeClaim, SetCondition, SetTaints, plan, quarantine_taint, startup_taint,
)
from eks_gpu_training.healthgate.gate_settings import (
    CONDITION_TYPE, GPU_POOL_LABEL, KARPENTER_POOL_LABEL, QUARANTINE_TAINT_KEY, GateSettings, PoolDevices,
)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
SETTINGS = GateSettings(
    namespace="health-gate", pools={"p5": PoolDevices(8, 32), "kp": PoolDevices(8, 0)},
    check_pod={"spec": {"containers": [{"name": "dcgm", "image": "dcgm"}]}}, check_seconds=900,
    quarantine_ignored_reasons=("DCGMError",), karpenter_pools=("kp",),
)


def node(name, *, pool="p5", karpenter=False, taints=(), ready=True, conditions=(), uid=None, gpus="8", efa="32"):
    label = KARPENTER_POOL_LABEL if karpenter else GPU_POOL_LABEL
    return {
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": "7", "labels": {label: pool}},
        "spec": {"taints": [GPU_TAINT, *taints]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}, *conditions],
                   "allocatable": {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}},
    }


def job_for(name, *, done=None, uid=None):
    job = check_job(SETTINGS.check_pod, "health-gate", name, uid or f"uid-{name}", PoolDevices(8, 32), 900)
    job["metadata"]["uid"] = f"job-{name}"
    if done is not None:
        job["status"] = {"conditions": [{"type": "Complete" if done else "Failed", "status": "True",
                                         "reason": "" if done else "BackoffLimitExceeded"}]}
    return job


def failed_pod(job, container, message):
    return {"metadata": {"ownerReferences": [{"uid": job["metadata"]["uid"]}]},
            "status": {"containerStatuses": [{"name": container, "state": {"terminated": {"exitCode": 1, "message": message}}}]}}


STARTUP = startup_taint()


def test_a_node_that_joins_with_the_startup_taint_is_checked_once_the_kubelet_reports_it_ready():
    assert plan([node("a", taints=[STARTUP], ready=False)], [], [], [], SETTINGS, NOW) == []
    assert plan([node("a", taints=[STARTUP])], [], [], [], SETTINGS, NOW) == [CreateCheck("a", "uid-a", "p5")]


def test_a_running_check_is_waited_for():
    assert plan([node("a", taints=[STARTUP])], [job_for("a")], [], [], SETTINGS, NOW) == []


def test_a_passed_check_lifts_the_startup_taint_alone_sets_the_condition_and_deletes_the_job():
    actions = plan([node("a", taints=[STARTUP])], [job_for("a", done=True)], [], [], SETTINGS, NOW)
    lift, passed, delete = actions
    assert isinstance(lift, SetTaints)
    assert lift.taints == (GPU_TAINT,)
    assert lift.resource_version == "7"
    assert (passed.status, passed.reason) == ("True", "ChecksPassed")
    assert delete == DeleteCheck(job_for("a")["metadata"]["name"])


def test_a_failed_check_keeps_the_taint_and_says_which_check_failed_and_why():
    job = job_for("a", done=False)
    actions = plan([node("a", taints=[STARTUP])], [job], [failed_pod(job, "dcgm", "test Memory failed on GPU 3")], [], SETTINGS, NOW)
    (failed,) = actions
    assert failed == SetCondition("a", "False", "DCGMDiagnosticFailed", "check dcgm failed: test Memory failed on GPU 3")


def test_a_check_that_ran_out_of_time_on_a_node_advertising_fewer_gpus_says_so():
    job = job_for("a", done=False)
    job["status"]["conditions"][0]["reason"] = "DeadlineExceeded"
    (failed,) = plan([node("a", taints=[STARTUP], gpus="7")], [job], [], [], SETTINGS, NOW)
    assert failed.reason == "GPUCountMismatch"
    assert "advertises 7 of its 8 nvidia.com/gpu" in failed.message
    (efa,) = plan([node("a", taints=[STARTUP], efa="16")], [job], [], [], SETTINGS, NOW)
    assert (efa.reason, "advertises 16 of its 32" in efa.message) == ("EFADeviceCountMismatch", True)
    (late,) = plan([node("a", taints=[STARTUP])], [job], [], [], SETTINGS, NOW)
    assert late.reason == "CheckTimedOut"


def test_a_failing_karpenter_node_is_handed_back_by_deleting_its_nodeclaim_and_again_until_karpenter_takes_it():
    claim = {"metadata": {"name": "kp-abc12", "labels": {KARPENTER_POOL_LABEL: "kp"}}, "status": {"nodeName": "k"}}
    job = job_for("k", done=False)
    kn = node("k", pool="kp", karpenter=True, taints=[STARTUP], efa="0")
    actions = plan([kn], [job], [failed_pod(job, "dcgm", "bad")], [claim], SETTINGS, NOW)
    assert actions[-1] == DeleteNodeClaim("kp-abc12", "k", "kp", "DCGMDiagnosticFailed")
    kn["status"]["conditions"].append({"type": CONDITION_TYPE, "status": "False", "reason": "DCGMDiagnosticFailed"})
    assert plan([kn], [], [], [claim], SETTINGS, NOW) == [DeleteNodeClaim("kp-abc12", "k", "kp", "DCGMDiagnosticFailed")]
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert plan([kn], [], [], [claim], SETTINGS, NOW) == []


def test_broken_variant_a_failed_managed_node_is_never_checked_again_and_keeps_its_taint():
    failed = node("a", taints=[STARTUP], conditions=[{"type": CONDITION_TYPE, "status": "False", "reason": "DCGMDiagnosticFailed"}])
    assert plan([failed], [], [], [], SETTINGS, NOW) == []


def test_a_check_of_a_node_replaced_under_the_same_name_is_not_the_new_nodes_and_is_deleted():
    old_check = job_for("a", done=False, uid="old")
    assert plan([node("a", taints=[STARTUP], uid="new")], [old_check], [], [], SETTINGS, NOW) == [
        DeleteCheck(old_check["metadata"]["name"]), CreateCheck("a", "new", "p5")]


def test_the_check_of_a_deleted_node_is_deleted_and_a_failed_check_of_a_present_node_is_kept_for_its_log():
    gone, kept = job_for("gone", done=False), job_for("a", done=False)
    failed = node("a", taints=[STARTUP], conditions=[{"type": CONDITION_TYPE, "status": "False", "reason": "DCGMDiagnosticFailed"}])
    assert plan([failed], [gone, kept], [], [], SETTINGS, NOW) == [DeleteCheck(gone["metadata"]["name"])]


def test_nodes_of_pools_the_gate_does_not_know_are_left_alone():
    assert plan([node("s", pool="system", taints=[STARTUP])], [], [], [], SETTINGS, NOW) == []


def hardware(status, reason):
    return {"type": "AcceleratedHardwareReady", "status": status, "reason": reason}


def test_a_gpu_fault_quarantines_the_node_with_a_no_execute_taint_naming_the_reason():
    (taint,) = plan([node("a", conditions=[hardware("False", "NvidiaXID79Error")]), node("b")], [], [], [], SETTINGS, NOW)
    assert taint.taints == (GPU_TAINT, quarantine_taint("NvidiaXID79Error"))
    assert quarantine_taint("NvidiaXID79Error") == {"key": QUARANTINE_TAINT_KEY, "value": "NvidiaXID79Error", "effect": "NoExecute"}


def test_the_agent_losing_its_dcgm_host_engine_is_no_gpu_fault_and_quarantines_nothing():
    assert plan([node("a", conditions=[hardware("False", "DCGMError")])], [], [], [], SETTINGS, NOW) == []


def test_never_more_than_half_of_a_pool_rounded_up_is_quarantined():
    bad = [node(n, conditions=[hardware("False", "NvidiaXID79Error")]) for n in "abc"]
    actions = plan([*bad, node("d")], [], [], [], SETTINGS, NOW)
    assert [a.node for a in actions] == ["a", "b"]
    assert plan([node("solo", conditions=[hardware("False", "NvidiaXID48Error")])], [], [], [], SETTINGS, NOW)[0].node == "solo"


def test_a_node_whose_gpus_recover_swaps_the_quarantine_for_the_startup_taint_and_is_checked_again():
    held = node("a", taints=[quarantine_taint("NvidiaXID79Error")], conditions=[hardware("True", "")])
    (unknown,) = plan([held], [], [], [], SETTINGS, NOW)
    assert (unknown.status, unknown.reason) == ("Unknown", "RecheckAfterRecovery")
    held["status"]["conditions"].append({"type": CONDITION_TYPE, "status": "Unknown", "reason": "RecheckAfterRecovery"})
    (swap,) = plan([held], [], [], [], SETTINGS, NOW)
    assert swap.taints == (GPU_TAINT, STARTUP)


def test_broken_variant_with_quarantine_off_a_gpu_fault_leaves_the_node_in_its_jobs():
    from dataclasses import replace

    off = replace(SETTINGS, quarantine=False)
    assert plan([node("a", conditions=[hardware("False", "NvidiaXID79Error")])], [], [], [], off, NOW) == []


def test_a_node_already_running_before_the_gate_has_no_startup_taint_and_is_not_checked():
    assert plan([node("old")], [], [], [], SETTINGS, NOW) == []


def test_the_check_job_lands_on_its_node_alone_with_every_gpu_and_efa_device_and_no_retry():
    template = {"spec": {"initContainers": [{"name": "efa", "image": "gate"}], "containers": [{"name": "dcgm", "image": "dcgm"}]}}
    job = check_job(template, "health-gate", "ip-10-0-0-1", "u1", PoolDevices(8, 32), 900)
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 900)
    pod = spec["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["ip-10-0-0-1"]}]}]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert pod["initContainers"][0]["resources"]["limits"] == {"vpc.amazonaws.com/efa": "32"}
    assert {"name": "EXPECTED_EFA_DEVICES", "value": "32"} in pod["initContainers"][0]["env"]
    assert job["metadata"]["annotations"] == {NODE_ANNOTATION: "ip-10-0-0-1", NODE_UID_ANNOTATION: "u1",
                                              TEMPLATE_ANNOTATION: template_hash(template)}
    assert pod["preemptionPolicy"] == "Never", "a check never preempts the pods that hold its node's devices"
    without_efa = check_job(template, "health-gate", "n", "u", PoolDevices(8, 0), 900)["spec"]["template"]["spec"]
    assert "initContainers" not in without_efa
    assert template["spec"]["containers"][0] == {"name": "dcgm", "image": "dcgm"}, "the template is not changed"
