"""What the gate does next, decided from the cluster as listed: plain data in, actions out, so every
rule is tested without an API server.

For each GPU node (a node of a pool the settings name):

- it carries the startup taint and has no check yet: once the kubelet reports it Ready, a check Job
  is created for it (``checks.check_job``);
- its check succeeded: the startup taint is lifted and ``HealthChecksPassed`` set True;
- its check failed (a check container exited non-zero, or the Job ran out of time): the taint
  stays, ``HealthChecksPassed`` turns False with the failed check's reason and message, and a
  Karpenter node's NodeClaim is deleted, so Karpenter replaces the node (Karpenter 1.14
  docs-disruption.md: deleting a NodeClaim drains and terminates its node);
- its node monitoring agent reports ``AcceleratedHardwareReady`` False (a reason that names a GPU
  fault): the quarantine taint (NoExecute) takes the node out of its jobs, never more than half of
  a pool at once (a fault on most of a pool is the fleet's: a driver, an AMI, the agent);
- the agent reports it healthy again: the quarantine taint is swapped for the startup taint, so
  the node is checked again before it gets work;
- a check Job whose node is gone (by uid) is deleted, with its pod.

A node that never had the startup taint (one that ran before the gate was turned on) is not
checked; it is still quarantined on a GPU fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional, Union

from .settings import (
    CONDITION_TYPE,
    HARDWARE_CONDITION,
    PASSED_REASON,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    STARTUP_TAINT_EFFECT,
    STARTUP_TAINT_KEY,
    GateSettings,
    pool_of,
)
from .checks import NODE_ANNOTATION, NODE_UID_ANNOTATION, check_verdict, job_finished

RECHECK_REASON = "RecheckAfterRecovery"
"""``HealthChecksPassed`` Unknown: the node left quarantine and is checked again."""
MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class CreateCheck:
    node: str
    node_uid: str
    pool: str


@dataclass(frozen=True)
class SetTaints:
    node: str
    resource_version: str
    taints: tuple[Mapping[str, str], ...]
    why: str


@dataclass(frozen=True)
class SetCondition:
    node: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class DeleteCheck:
    job: str


@dataclass(frozen=True)
class DeleteNodeClaim:
    name: str
    node: str


Action = Union[CreateCheck, SetTaints, SetCondition, DeleteCheck, DeleteNodeClaim]


def _taints(node: Mapping[str, Any]) -> list[Mapping[str, str]]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Mapping[str, Any], key: str) -> bool:
    """Whether the node (as the API returns it, plain data) carries a taint of ``key``."""
    return any(t.get("key") == key for t in _taints(node))


def condition(node: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    for found in (node.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return found
    return None


def _ready(node: Mapping[str, Any]) -> bool:
    ready = condition(node, "Ready")
    return bool(ready and ready.get("status") == "True")


def startup_taint() -> dict[str, str]:
    return {"key": STARTUP_TAINT_KEY, "effect": STARTUP_TAINT_EFFECT}


def quarantine_taint(reason: str) -> dict[str, str]:
    # A taint value is a label value: at most 63 characters of [A-Za-z0-9_.-].
    value = "".join(c for c in reason if c.isalnum() or c in "-_.")[:63].strip("-_.")
    return {"key": QUARANTINE_TAINT_KEY, "value": value, "effect": QUARANTINE_TAINT_EFFECT}


def _without(taints: Iterable[Mapping[str, str]], key: str) -> tuple[Mapping[str, str], ...]:
    return tuple(t for t in taints if t.get("key") != key)


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _check_of(jobs: Iterable[Mapping[str, Any]], node: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    meta = node["metadata"]
    for job in jobs:
        annotations = job["metadata"].get("annotations") or {}
        if annotations.get(NODE_ANNOTATION) == meta["name"] and annotations.get(NODE_UID_ANNOTATION) == meta.get("uid"):
            return job
    return None


def _nodeclaim_of(nodeclaims: Iterable[Mapping[str, Any]], node: str) -> Optional[Mapping[str, Any]]:
    for claim in nodeclaims:
        if (claim.get("status") or {}).get("nodeName") == node and not claim["metadata"].get("deletionTimestamp"):
            return claim
    return None


def plan(
    nodes: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    nodeclaims: Iterable[Mapping[str, Any]],
    settings: GateSettings,
    now: datetime,
) -> list[Action]:
    """The actions that bring the GPU nodes one step nearer to what the module docstring says."""
    nodes, jobs, pods, nodeclaims = list(nodes), list(jobs), list(pods), list(nodeclaims)
    gpu_nodes = [n for n in nodes if pool_of(n["metadata"].get("labels")) in settings.pools]
    # A check of a node that is gone (deleted, or replaced by another of the same name) is garbage:
    # its pod would otherwise stay on the name's next node, and its Job until its time to live.
    uids = {n["metadata"].get("uid") for n in nodes}
    actions: list[Action] = [DeleteCheck(_name(job)) for job in jobs
                             if (job["metadata"].get("annotations") or {}).get(NODE_UID_ANNOTATION) not in uids]
    quarantined: dict[str, int] = {}
    members: dict[str, int] = {}
    for node in gpu_nodes:
        pool = str(pool_of(node["metadata"].get("labels")))
        members[pool] = members.get(pool, 0) + 1
        if has_taint(node, QUARANTINE_TAINT_KEY):
            quarantined[pool] = quarantined.get(pool, 0) + 1
    for node in gpu_nodes:
        pool = str(pool_of(node["metadata"].get("labels")))
        if has_taint(node, STARTUP_TAINT_KEY):
            actions += _gate(node, pool, _check_of(jobs, node), pods, nodeclaims, settings)
        elif settings.quarantine:
            # Never more than half of a pool, rounded up: a single node's pool can still lose it.
            allowed = quarantined.get(pool, 0) < -(-members[pool] // 2)
            found, added = _quarantine(node, settings, allowed=allowed)
            quarantined[pool] = quarantined.get(pool, 0) + added
            actions += found
    return actions


def _gate(node: Mapping[str, Any], pool: str, job: Optional[Mapping[str, Any]], pods: list[Mapping[str, Any]],
          nodeclaims: list[Mapping[str, Any]], settings: GateSettings) -> list[Action]:
    name = _name(node)
    passed = condition(node, CONDITION_TYPE)
    if job is None:
        if passed is not None and passed.get("status") == "False":
            # Failed before: it keeps its taint; a Karpenter node is handed back until Karpenter takes it.
            claim = _nodeclaim_of(nodeclaims, name) if pool in settings.karpenter_pools else None
            return [DeleteNodeClaim(_name(claim), name)] if claim is not None else []
        return [CreateCheck(name, str(node["metadata"].get("uid", "")), pool)] if _ready(node) else []
    finished = job_finished(job)
    if finished is None:
        return []
    if finished:
        return [
            SetTaints(name, str(node["metadata"].get("resourceVersion", "")), _without(_taints(node), STARTUP_TAINT_KEY),
                      "checks passed: startup taint lifted"),
            SetCondition(name, "True", PASSED_REASON, "the node passed its health checks"),
            DeleteCheck(_name(job)),
        ]
    actions: list[Action] = []
    if passed is None or passed.get("status") != "False":  # said once; the failed Job stays for its log
        reason, message = check_verdict(job, pods, node, settings.pools[pool])
        actions.append(SetCondition(name, "False", reason, message[:MESSAGE_LIMIT]))
    claim = _nodeclaim_of(nodeclaims, name) if pool in settings.karpenter_pools else None
    if claim is not None:
        actions.append(DeleteNodeClaim(_name(claim), name))
    return actions


def _quarantine(node: Mapping[str, Any], settings: GateSettings, *, allowed: bool) -> tuple[list[Action], int]:
    """The quarantine's actions for one node, and how many nodes it adds to its pool's quarantined."""
    name = _name(node)
    hardware = condition(node, HARDWARE_CONDITION)
    faulty = hardware is not None and hardware.get("status") == "False" and hardware.get("reason") not in settings.quarantine_ignored_reasons
    held = has_taint(node, QUARANTINE_TAINT_KEY)
    version = str(node["metadata"].get("resourceVersion", ""))
    if faulty and not held and allowed:
        reason = str((hardware or {}).get("reason") or HARDWARE_CONDITION)
        return [SetTaints(name, version, (*_taints(node), quarantine_taint(reason)),
                          f"{HARDWARE_CONDITION} False ({reason}): quarantined")], 1
    if held and hardware is not None and hardware.get("status") == "True":
        return [
            SetTaints(name, version, (*_without(_taints(node), QUARANTINE_TAINT_KEY), startup_taint()),
                      f"{HARDWARE_CONDITION} True again: checked before it gets work"),
            SetCondition(name, "Unknown", RECHECK_REASON, "the node recovered from a GPU fault and is checked again"),
        ], 0
    return [], 0

