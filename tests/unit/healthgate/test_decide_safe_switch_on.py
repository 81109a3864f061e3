"""The gate on pools that already run, and failures no node can fix.

- A node its node group re-tainted after it passed is admitted again at once; one whose devices
  were held by pods placed before the taint came (the scheduler leaves its check pending for lack
  of them) is admitted unchecked; a node recovering from quarantine is never admitted that way.
- A check image that cannot be pulled, no device plugin, or one failure on most of a pool is a
  configuration error: a condition naming it, no NodeClaim deleted; checked again once the
  settings change.
- NodeClaim deletions are capped per pool and hour, each after a growing wait, counted from the
  Events the gate wrote.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from eks_gpu_training.healthgate.node_check import check_job
from eks_gpu_training.healthgate.decide import CreateCheck, DeleteCheck, DeleteNodeClaim, SetCondition, SetTaints, plan, startup_taint
from eks_gpu_training.healthgate.replacements import (
    BACKOFF_SECONDS, Replacement, event_manifest, from_events, held_back,
)
from eks_gpu_training.healthgate.gate_settings import (
    CONDITION_TYPE, GPU_POOL_LABEL, KARPENTER_POOL_LABEL, GateSettings, PoolDevices,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
STARTUP = startup_taint()
SETTINGS = GateSettings(
    namespace="health-gate", pools={"p5": PoolDevices(8, 32), "kp": PoolDevices(8, 0)},
    check_pod={"spec": {"containers": [{"name": "dcgm", "image": "dcgm"}]}}, check_seconds=900, karpenter_pools=("kp",),
)


def node(name, *, pool="p5", karpenter=False, passed=None, gpus="8", efa="32"):
    conditions = [{"type": "Ready", "status": "True"}]
    if passed is not None:
        status, reason = passed
        conditions.append({"type": CONDITION_TYPE, "status": status, "reason": reason})
    label = KARPENTER_POOL_LABEL if karpenter else GPU_POOL_LABEL
    allocatable = {"nvidia.com/gpu": gpus, **({"vpc.amazonaws.com/efa": efa} if efa is not None else {})}
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "3", "labels": {label: pool}},
            "spec": {"taints": [GPU_TAINT, STARTUP]}, "status": {"conditions": conditions, "allocatable": allocatable}}


P5_DEVICES = PoolDevices(8, 32)


def job_for(name, *, failed=False, settings=SETTINGS, devices=P5_DEVICES):
    job = check_job(settings.check_pod, "health-gate", name, f"uid-{name}", devices, 900)
    job["metadata"]["uid"] = f"job-{name}"
    if failed:
        job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
    return job


def pending_pod(job, message):
    return {"metadata": {"ownerReferences": [{"uid": job["metadata"]["uid"]}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}}


def pulling_pod(job):
    return {"metadata": {"ownerReferences": [{"uid": job["metadata"]["uid"]}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "dcgm", "image": "mirror.example/dcgm:4",
                                                                  "state": {"waiting": {"reason": "ImagePullBackOff",
                                                                                        "message": "pull access denied"}}}]}}


def failed_pod(job, container="dcgm"):
    return {"metadata": {"ownerReferences": [{"uid": job["metadata"]["uid"]}]},
            "status": {"containerStatuses": [{"name": container, "state": {"terminated": {"exitCode": 1, "message": "bad"}}}]}}


INSUFFICIENT = "0/5 nodes are available: 1 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node affinity/selector."


def test_a_node_its_node_group_tainted_again_after_it_passed_is_admitted_at_once_without_a_check():
    (lift,) = plan([node("a", passed=("True", "ChecksPassed"))], [], [], [], SETTINGS, NOW)
    assert isinstance(lift, SetTaints)
    assert lift.taints == (GPU_TAINT,)


def test_a_running_node_whose_gpus_pods_hold_is_admitted_unchecked_once_the_scheduler_cannot_place_its_check():
    job = job_for("busy")
    lift, admitted, delete = plan([node("busy")], [job], [pending_pod(job, INSUFFICIENT)], [], SETTINGS, NOW)
    assert lift.taints == (GPU_TAINT,)
    assert (admitted.status, admitted.reason) == ("True", "AdmittedInUse")
    assert delete == DeleteCheck(job["metadata"]["name"])


def test_an_idle_running_node_is_checked_like_a_joining_one():
    assert plan([node("idle")], [], [], [], SETTINGS, NOW) == [CreateCheck("idle", "uid-idle", "p5")]
    job = job_for("idle")
    assert plan([node("idle")], [job], [pending_pod(job, "0/5 nodes are available: waiting")], [], SETTINGS, NOW) == []


def test_broken_variant_a_node_recovering_from_quarantine_is_never_admitted_unchecked_while_its_pods_terminate():
    job = job_for("recovering")
    recovering = node("recovering", passed=("Unknown", "RecheckAfterRecovery"))
    assert plan([recovering], [job], [pending_pod(job, INSUFFICIENT)], [], SETTINGS, NOW) == []


def test_broken_variant_a_node_that_advertises_fewer_gpus_than_its_pool_is_not_taken_for_a_busy_one():
    job = job_for("short")
    assert plan([node("short", gpus="7")], [job], [pending_pod(job, INSUFFICIENT)], [], SETTINGS, NOW) == []


def test_a_check_image_that_cannot_be_pulled_is_a_configuration_error_and_no_nodeclaim_is_deleted():
    job = job_for("k", devices=PoolDevices(8, 0))
    claim = {"metadata": {"name": "kp-1", "labels": {KARPENTER_POOL_LABEL: "kp"}}, "status": {"nodeName": "k"}}
    (said,) = plan([node("k", pool="kp", karpenter=True, efa="0")], [job], [pulling_pod(job)], [claim], SETTINGS, NOW)
    assert (said.status, said.reason) == ("False", "CheckImageUnavailable")
    assert "cannot pull mirror.example/dcgm:4 (ImagePullBackOff: pull access denied)" in said.message
    failed = node("k", pool="kp", karpenter=True, efa="0", passed=("False", "CheckImageUnavailable"))
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}
    assert plan([failed], [job], [pulling_pod(job)], [claim], SETTINGS, NOW) == [], "held, never handed back"


def test_a_configuration_error_is_checked_again_once_the_settings_change():
    failed = node("a", passed=("False", "CheckImageUnavailable"))
    stale = job_for("a", failed=True)
    fixed = replace(SETTINGS, check_pod={"spec": {"containers": [{"name": "dcgm", "image": "dcgm-fixed"}]}})
    assert plan([failed], [stale], [], [], SETTINGS, NOW) == [], "held while the settings stay"
    recheck, delete = plan([failed], [stale], [], [], fixed, NOW)
    assert (recheck.status, recheck.reason) == ("Unknown", "RecheckAfterConfigurationError")
    assert delete == DeleteCheck(stale["metadata"]["name"])
    expired, create = plan([failed], [], [], [], SETTINGS, NOW)
    assert (expired.status, create) == ("Unknown", CreateCheck("a", "uid-a", "p5")), "its failed Job's hour is over"


def test_a_node_without_a_device_plugin_is_a_configuration_error():
    job = job_for("a", failed=True)
    (said,) = plan([node("a", efa=None)], [job], [], [], SETTINGS, NOW)
    assert (said.status, said.reason) == ("False", "DevicePluginMissing")
    assert "vpc.amazonaws.com/efa" in said.message


def test_one_failure_on_most_of_a_pool_is_the_pools_configuration_not_its_nodes():
    first, second = job_for("a", failed=True), job_for("b", failed=True)
    nodes = [node("a"), node("b"), node("c", passed=("True", "ChecksPassed"))]
    nodes[2]["spec"]["taints"] = [GPU_TAINT]
    own, shared = plan(nodes, [first, second], [failed_pod(first), failed_pod(second)], [], SETTINGS, NOW)
    assert (own.node, own.reason) == ("a", "DCGMDiagnosticFailed")
    assert (shared.node, shared.reason) == ("b", "PoolWideCheckFailure")
    assert "2 of the pool's 3 nodes" in shared.message


def test_a_karpenter_node_failing_as_the_one_replaced_before_it_is_a_pool_failure_and_kept():
    job = job_for("k2", failed=True, devices=PoolDevices(8, 0))
    claim = {"metadata": {"name": "kp-2", "labels": {KARPENTER_POOL_LABEL: "kp"}}, "status": {"nodeName": "k2"}}
    earlier = [Replacement("kp", "DCGMDiagnosticFailed", (NOW - timedelta(minutes=30)).replace(tzinfo=None))]
    (said,) = plan([node("k2", pool="kp", karpenter=True, efa="0")], [job], [failed_pod(job)], [claim], SETTINGS, NOW, earlier)
    assert said.reason == "PoolWideCheckFailure"


def test_a_handed_back_node_still_draining_counts_once_toward_a_pool_failure():
    # k1 failed and its NodeClaim was deleted; Karpenter still drains it. k2 failing alike is 2 of
    # the pool's 4 nodes, not most of them: k1 is not counted again as its NodeClaim's deletion.
    drained = node("k1", pool="kp", karpenter=True, efa="0", passed=("False", "DCGMDiagnosticFailed"))
    healthy = [node(n, pool="kp", karpenter=True, efa="0", passed=("True", "ChecksPassed")) for n in ("k3", "k4")]
    for each in healthy:
        each["spec"]["taints"] = [GPU_TAINT]
    job = job_for("k2", failed=True, devices=PoolDevices(8, 0))
    claim = {"metadata": {"name": "kp-2", "labels": {KARPENTER_POOL_LABEL: "kp"}}, "status": {"nodeName": "k2"}}
    handed_back = [Replacement("kp", "DCGMDiagnosticFailed", (NOW - timedelta(minutes=1)).replace(tzinfo=None), "k1")]
    nodes = [drained, node("k2", pool="kp", karpenter=True, efa="0"), *healthy]
    (said,) = plan(nodes, [job], [failed_pod(job)], [claim], SETTINGS, NOW, handed_back)
    assert (said.node, said.reason) == ("k2", "DCGMDiagnosticFailed")
    gone = [node for node in nodes if node["metadata"]["name"] != "k1"]
    (said,) = plan(gone, [job], [failed_pod(job)], [claim], SETTINGS, NOW, handed_back)
    assert said.reason == "DCGMDiagnosticFailed", "k1 gone, its deletion counts instead: the same 2 of 4"
    third = node("k3", pool="kp", karpenter=True, efa="0", passed=("False", "DCGMDiagnosticFailed"))
    (said,) = plan([drained, nodes[1], third, healthy[1]], [job], [failed_pod(job)], [claim], SETTINGS, NOW, handed_back)
    assert said.reason == "PoolWideCheckFailure", "3 of 4"


def test_nodeclaim_deletions_wait_longer_each_time_and_stop_at_the_hours_cap():
    one_minute = [Replacement("kp", "GPUCountMismatch", (NOW - timedelta(minutes=1)).replace(tzinfo=None))]
    assert "less than 300 s ago" in held_back(one_minute, "kp", 2, NOW)
    later = [Replacement("kp", "GPUCountMismatch", (NOW - timedelta(seconds=BACKOFF_SECONDS + 1)).replace(tzinfo=None))]
    assert held_back(later, "kp", 2, NOW) is None
    two = [*later, Replacement("kp", "x", (NOW - timedelta(minutes=50)).replace(tzinfo=None))]
    assert "2 of the pool's NodeClaims deleted in the last hour" in held_back(two, "kp", 2, NOW)
    assert held_back(two, "other", 2, NOW) is None
    old = [Replacement("kp", "x", (NOW - timedelta(minutes=61)).replace(tzinfo=None))]
    assert held_back(old, "kp", 1, NOW) is None
    assert held_back([], "kp", 0, NOW) is not None, "0 never hands a node back"


def test_a_held_back_karpenter_node_keeps_its_taint_and_its_nodeclaim():
    failed = node("k", pool="kp", karpenter=True, efa="0", passed=("False", "GPUCountMismatch"))
    claim = {"metadata": {"name": "kp-1", "labels": {KARPENTER_POOL_LABEL: "kp"}}, "status": {"nodeName": "k"}}
    recent = [Replacement("kp", "GPUCountMismatch", (NOW - timedelta(minutes=1)).replace(tzinfo=None))]
    assert plan([failed], [], [], [claim], SETTINGS, NOW, recent) == []
    assert plan([failed], [], [], [claim], SETTINGS, NOW) == [DeleteNodeClaim("kp-1", "k", "kp", "GPUCountMismatch")]


def test_a_deletions_event_is_read_back_as_the_deletion():
    event = event_manifest("health-gate", "health-gate", "kp-1", "k", "kp", "GPUCountMismatch", NOW)
    assert event["regarding"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "health-gate", "name": "health-gate"}
    assert event["related"] == {"apiVersion": "v1", "kind": "Node", "name": "k"}
    assert from_events([event]) == [Replacement("kp", "GPUCountMismatch", NOW.replace(tzinfo=None), "k")]
    assert from_events([{**event, "reason": "Other"}]) == []
    unnamed = {key: value for key, value in event.items() if key != "related"}
    assert from_events([unnamed]) == [Replacement("kp", "GPUCountMismatch", NOW.replace(tzinfo=None))]


def test_a_quarantined_node_that_recovers_gets_its_recheck_condition_a_round_before_the_startup_taint():
    held = node("a", passed=("True", "ChecksPassed"))
    held["spec"]["taints"] = [GPU_TAINT, {"key": "eks-gpu-training/unhealthy", "value": "x", "effect": "NoExecute"}]
    held["status"]["conditions"].append({"type": "AcceleratedHardwareReady", "status": "True"})
    (first,) = plan([held], [], [], [], SETTINGS, NOW)
    assert isinstance(first, SetCondition)
    held["status"]["conditions"][1] = {"type": CONDITION_TYPE, "status": "Unknown", "reason": "RecheckAfterRecovery"}
    (second,) = plan([held], [], [], [], SETTINGS, NOW)
    assert isinstance(second, SetTaints), "the taints written with the node's version after the condition's write"
