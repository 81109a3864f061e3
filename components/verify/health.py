"""Rows about GPU node health and the jobs it holds up: nodes the health gate still holds, nodes
whose node monitoring agent reports failing GPUs, and training jobs that wait for a node to replace
one they lost. Each judges nodes and pods only (reads the verify role already has).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..healthgate.decide import has_taint
from ..healthgate.gate_settings import (
    CONDITION_TYPE,
    CONFIGURATION_REASONS,
    HARDWARE_CONDITION,
    QUARANTINE_TAINT_KEY,
    STARTUP_TAINT_KEY,
)
from .objects import condition, gpu_nodes, name, node_name, training_jobs
from .rows import EXAMPLES, Row, described, failed, group, listing, passed, skipped
from .snapshot import Snapshot


def _reason(found: Mapping[str, Any]) -> str:
    return str(found.get("reason") or "no reason")


def gated_nodes(snapshot: Snapshot, examples: int = EXAMPLES) -> Row:
    """GPU nodes still carrying the health gate's startup taint: a fail for those whose checks
    failed (``HealthChecksPassed`` False), a pass naming those still being checked."""
    item = "health-gate"
    nodes = gpu_nodes(snapshot.nodes)
    if not nodes:
        return skipped(item, "no GPU node.")
    gated = [n for n in nodes if has_taint(n, STARTUP_TAINT_KEY)]
    # A configuration cause is the health-gate-configuration row's, named once there.
    failing = [n for n in gated if (condition(n, CONDITION_TYPE) or {}).get("status") == "False"
               and _reason(condition(n, CONDITION_TYPE) or {}) not in CONFIGURATION_REASONS.values()]
    if failing:
        groups = group("GPU node", ((name(n), f"failed the health gate's checks ({_reason(condition(n, CONDITION_TYPE) or {})}) "
                                    f"and keeps {STARTUP_TAINT_KEY}") for n in failing), examples)
        return failed(
            item,
            f"{described(groups)}.",
            f"read why in the node's {CONDITION_TYPE} condition (kubectl describe node) and the check's log "
            "(kubectl logs -n health-gate -l app.kubernetes.io/name=health-check); a Karpenter node is replaced on its own; "
            "replace a managed node (kubectl drain NODE --ignore-daemonsets, then terminate its instance: the node group "
            "launches another, which is checked in turn).",
            groups,
        )
    if gated:
        return passed(item, f"{listing([name(n) for n in gated])} still being checked ({STARTUP_TAINT_KEY}); they get work "
                      "once their checks pass. If one stays past healthGate.timeoutMinutes, read the gate's log "
                      "(kubectl logs -n health-gate deploy/health-gate).")
    return passed(item, f"none of the {len(nodes)} GPU nodes carries {STARTUP_TAINT_KEY}.")


CONFIGURATION_FIXES = {
    CONFIGURATION_REASONS["image"]: "make the image pullable from the nodes (healthGate.dcgmImage, healthGate.efaLoopbackImage, "
    "healthGate.image, images.registryMirrors) and `pulumi up`: the gate checks the held nodes again once its settings change",
    CONFIGURATION_REASONS["device-plugin"]: "make the device plugins run on the pool (the GPU Operator's or the AMI's NVIDIA plugin, "
    "the EFA device plugin, their tolerations): kubectl get ds -A -o wide; the gate checks again when its settings change or "
    "the failed check's Job is gone (an hour)",
    CONFIGURATION_REASONS["pool"]: "read one failed check's log (kubectl logs -n health-gate -l app.kubernetes.io/name=health-check): "
    "a cause the pool's nodes share (an image, a driver, the AMI, healthGate.dcgmLevel) is fixed in the stack, not by replacing nodes",
}


def gate_configuration(snapshot: Snapshot, examples: int = EXAMPLES) -> Row:
    """GPU nodes the gate holds for a cause no node can fix (``CONFIGURATION_REASONS``): one row
    naming each cause once, with its first message and the nodes it holds."""
    item = "health-gate-configuration"
    nodes = gpu_nodes(snapshot.nodes)
    if not nodes:
        return skipped(item, "no GPU node.")
    held: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        found = condition(node, CONDITION_TYPE) or {}
        if found.get("status") == "False" and _reason(found) in CONFIGURATION_REASONS.values():
            held.setdefault(_reason(found), []).append(node)
    if not held:
        return passed(item, f"no GPU node is held for a configuration cause ({', '.join(CONFIGURATION_REASONS.values())}).")
    causes = []
    for reason, holding in sorted(held.items()):
        message = str((condition(holding[0], CONDITION_TYPE) or {}).get("message") or "")
        causes.append(f"{reason} on {listing([name(n) for n in holding], examples)}: {message}")
    return failed(item, "the health gate's checks cannot pass: " + "; ".join(causes) + ".",
                  " ".join(CONFIGURATION_FIXES[reason] + "." for reason in sorted(held)))


def accelerated_hardware(snapshot: Snapshot, examples: int = EXAMPLES) -> Row:
    """GPU nodes whose node monitoring agent reports ``AcceleratedHardwareReady`` False."""
    item = "accelerated-hardware"
    nodes = gpu_nodes(snapshot.nodes)
    reported = [n for n in nodes if condition(n, HARDWARE_CONDITION) is not None]
    if not reported:
        return skipped(item, f"no GPU node reports {HARDWARE_CONDITION} (no GPU node, or no node monitoring agent).")
    failing = [n for n in reported if (condition(n, HARDWARE_CONDITION) or {}).get("status") == "False"]
    if not failing:
        return passed(item, f"{HARDWARE_CONDITION} True on each of the {len(reported)} GPU nodes that report it.")
    groups = group("GPU node", ((name(n), f"reports failing GPUs ({_reason(condition(n, HARDWARE_CONDITION) or {})}"
                                 + (", quarantined" if has_taint(n, QUARANTINE_TAINT_KEY) else "") + ")") for n in failing), examples)
    return failed(
        item,
        f"{described(groups)}.",
        "EKS node auto repair replaces (or reboots) a managed node after 10 minutes, and Karpenter's NodeRepair a "
        "Karpenter node; without repair, drain it (kubectl drain NODE --ignore-daemonsets) and terminate its instance "
        "or delete its NodeClaim. A job on it resumes from its last checkpoint on the node that replaces it "
        "(docs/health.md, \"When a node fails during a job\").",
        groups,
    )


def waiting_for_replacement(snapshot: Snapshot, examples: int = EXAMPLES) -> Row:
    """Training jobs with a pod running and a pod waiting for a node: a lost rank waiting for a
    node to replace the one it lost."""
    item = "replacement-wait"
    jobs = [job for job in training_jobs(snapshot.pods) if job.multi_node]
    if not jobs:
        return skipped(item, "no multi-node training job runs.")
    waiting = [(job, [p for p in job.pods if not node_name(p)]) for job in jobs]
    waiting = [(job, pods) for job, pods in waiting if pods]
    if not waiting:
        return passed(item, f"every pod of the {len(jobs)} multi-node training job(s) is on a node.")
    groups = group("multi-node training job", ((str(job), "with a rank waiting for a node") for job, _ in waiting), examples)
    return failed(
        item,
        f"{described(groups)}.",
        "Kueue places a lost rank on a free GPU node in the job's network block (kubectl get workloads -n NAMESPACE -o "
        "yaml: status.unhealthyNodes); with none free it evicts and requeues the whole job, which restarts from its "
        "checkpoint. Free or add a node in that block (a repaired node comes back through the health gate), or "
        "delete the job to give its nodes back.",
        groups,
    )


def judge_health(snapshot: Snapshot, examples: int = EXAMPLES) -> list[Row]:
    """The node health rows, each group of failing objects naming its first ``examples``."""
    return [gated_nodes(snapshot, examples), gate_configuration(snapshot, examples), accelerated_hardware(snapshot, examples),
            waiting_for_replacement(snapshot, examples)]
