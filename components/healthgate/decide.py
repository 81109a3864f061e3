"""What the gate does next, decided from the cluster as listed: plain data in, actions out, so every
rule is tested without an API server.

For each GPU node (a node of a pool the settings name) with the startup taint:

- no check yet: once the kubelet reports it Ready, a check Job is created (``checks.check_job``);
- its check succeeded: the taint is lifted and ``HealthChecksPassed`` set True;
- the scheduler cannot place its check because pods already on the node hold its devices: the node
  got the taint while it ran work (EKS applies a node group's new taints to its running nodes), so
  it is admitted unchecked (``IN_USE_REASON``) and its check deleted; only for a node never checked;
- it passed before (``HealthChecksPassed`` True): the taint came back from its node group, and is lifted;
- its check failed: the taint stays, ``HealthChecksPassed`` turns False with the reason, and a
  Karpenter node's NodeClaim is deleted so Karpenter replaces it, at most as ``replacements`` allows;
- a cause no node can fix (``CONFIGURATION_REASONS``) turns the condition False with that reason,
  and nothing is deleted; the check is made again once the gate's settings change.

A node without the startup taint whose monitoring agent reports ``AcceleratedHardwareReady`` False
is quarantined (NoExecute), at most half its pool; once healthy it gets the startup taint back, to
be checked again. A check Job whose node is gone (by uid) is deleted, with its pod.
"""


from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional, Union

from .gate_settings import (
    CONDITION_TYPE,
    CONFIGURATION_REASONS,
    IN_USE_REASON,
    HARDWARE_CONDITION,
    PASSED_REASON,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    STARTUP_TAINT_EFFECT,
    STARTUP_TAINT_KEY,
    GateSettings,
    pool_of,
)
from .node_check import (
    NODE_ANNOTATION,
    NODE_UID_ANNOTATION,
    TEMPLATE_ANNOTATION,
    check_verdict,
    devices_taken,
    image_pull_failure,
    job_finished,
    missing_device,
    template_hash,
)
from .replacements import Replacement, held_back, recent

RECHECK_REASON = "RecheckAfterRecovery"
"""``HealthChecksPassed`` Unknown: the node left quarantine and is checked again."""
RECHECK_SETTINGS_REASON = "RecheckAfterConfigurationError"
"""``HealthChecksPassed`` Unknown: a node held for a configuration cause is checked again."""
MESSAGE_LIMIT = 1024
POOL_WIDE_MIN_NODES = 2
"""A check failing the same way on at least this many of a pool's nodes (those deleted within the
hour included), and on more than half of them, is the pool's configuration, not its nodes."""


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
    pool: str = ""
    reason: str = ""


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


@dataclass
class _Round:
    """What one round knows beside the node at hand: the listings and what earlier nodes decided."""

    jobs: list[Mapping[str, Any]]
    pods: list[Mapping[str, Any]]
    nodeclaims: list[Mapping[str, Any]]
    settings: GateSettings
    now: datetime
    replacements: list[Replacement]
    failures: dict[tuple[str, str], int]
    """Nodes of each pool whose check failed, by the failed check's reason (node failures only)."""
    members: dict[str, int]
    present: set[str]
    """The GPU nodes' names."""


def _failed_reason(node: Mapping[str, Any]) -> Optional[str]:
    passed = condition(node, CONDITION_TYPE)
    if passed is not None and passed.get("status") == "False":
        return str(passed.get("reason") or "")
    return None


def plan(
    nodes: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    nodeclaims: Iterable[Mapping[str, Any]],
    settings: GateSettings,
    now: datetime,
    replacements: Iterable[Replacement] = (),
) -> list[Action]:
    """The actions that bring the GPU nodes one step nearer to what the module docstring says;
    ``replacements``: the NodeClaims the gate deleted lately (``replacements.from_events``)."""
    nodes = list(nodes)
    gpu_nodes = [n for n in nodes if pool_of(n["metadata"].get("labels")) in settings.pools]
    state = _Round(list(jobs), list(pods), list(nodeclaims), settings, now, list(replacements), {}, {},
                   {_name(n) for n in gpu_nodes})
    # A check of a node that is gone (deleted, or replaced by another of the same name) is garbage:
    # its pod would otherwise stay on the name's next node, and its Job until its time to live.
    uids = {n["metadata"].get("uid") for n in nodes}
    actions: list[Action] = [DeleteCheck(_name(job)) for job in state.jobs
                             if (job["metadata"].get("annotations") or {}).get(NODE_UID_ANNOTATION) not in uids]
    quarantined: dict[str, int] = {}
    for node in gpu_nodes:
        pool = str(pool_of(node["metadata"].get("labels")))
        state.members[pool] = state.members.get(pool, 0) + 1
        if has_taint(node, QUARANTINE_TAINT_KEY):
            quarantined[pool] = quarantined.get(pool, 0) + 1
        failed = _failed_reason(node)
        if failed is not None and failed not in CONFIGURATION_REASONS.values():
            state.failures[(pool, failed)] = state.failures.get((pool, failed), 0) + 1
    for node in gpu_nodes:
        pool = str(pool_of(node["metadata"].get("labels")))
        if has_taint(node, STARTUP_TAINT_KEY):
            actions += _gate(node, pool, _check_of(state.jobs, node), state)
        elif settings.quarantine:
            # Never more than half of a pool, rounded up: a single node's pool can still lose it.
            allowed = quarantined.get(pool, 0) < -(-state.members[pool] // 2)
            found, added = _quarantine(node, settings, allowed=allowed)
            quarantined[pool] = quarantined.get(pool, 0) + added
            actions += found
    return actions


def _lift(node: Mapping[str, Any], why: str) -> SetTaints:
    return SetTaints(_name(node), str(node["metadata"].get("resourceVersion", "")), _without(_taints(node), STARTUP_TAINT_KEY), why)


def _pool_wide(pool: str, reason: str, state: _Round) -> Optional[str]:
    """The pool-wide failure's message when ``reason`` is most of the pool's (this node counted), else None.
    A deleted NodeClaim whose node is still here (Karpenter drains it) is counted once, as that node."""
    deleted = [r for r in recent(state.replacements, pool, state.now) if r.node not in state.present]
    same = state.failures.get((pool, reason), 0) + 1 + sum(1 for r in deleted if r.reason == reason)
    nodes = state.members.get(pool, 0) + len(deleted)
    if same >= POOL_WIDE_MIN_NODES and 2 * same > nodes:
        return (f"{same} of the pool's {nodes} nodes (this hour's replacements included) failed their checks with {reason}: "
                f"a cause they share (an image, a driver, the AMI, the check's settings), not a node fault")
    return None


def _hand_back(node: Mapping[str, Any], pool: str, reason: str, state: _Round) -> list[Action]:
    """A failing Karpenter node's NodeClaim deletion, when the pool's replacements allow it now."""
    if pool not in state.settings.karpenter_pools:
        return []
    claim = _nodeclaim_of(state.nodeclaims, _name(node))
    if claim is None or held_back(state.replacements, pool, state.settings.replacements_per_hour, state.now) is not None:
        return []
    state.replacements.append(Replacement(pool, reason, state.now.replace(tzinfo=None), _name(node)))
    return [DeleteNodeClaim(_name(claim), _name(node), pool, reason)]


def _say(node: Mapping[str, Any], reason: str, message: str) -> list[Action]:
    """``HealthChecksPassed`` False with ``reason``, unless the node says so already."""
    passed = condition(node, CONDITION_TYPE) or {}
    if passed.get("status") == "False" and passed.get("reason") == reason:
        return []
    return [SetCondition(_name(node), "False", reason, message[:MESSAGE_LIMIT])]


def _verdict(node: Mapping[str, Any], pool: str, job: Mapping[str, Any], pull: Optional[str],
             state: _Round) -> tuple[str, str]:
    """Why a node's check failed: a configuration cause first, else the failed check's own reason."""
    if pull is not None:
        return CONFIGURATION_REASONS["image"], pull
    device = missing_device(node, state.settings.pools[pool])
    if device is not None:
        return CONFIGURATION_REASONS["device-plugin"], (
            f"the node advertises no {device}: no device plugin runs on it (the pool's daemons, their tolerations, "
            f"the AMI), so no check can start")
    failed, message = check_verdict(job, state.pods, node, state.settings.pools[pool])
    shared = _pool_wide(pool, failed, state)
    return (CONFIGURATION_REASONS["pool"], f"{shared}; this node: {message}") if shared else (failed, message)


def _gate(node: Mapping[str, Any], pool: str, job: Optional[Mapping[str, Any]], state: _Round) -> list[Action]:
    name, settings = _name(node), state.settings
    passed = condition(node, CONDITION_TYPE)
    status, reason = (passed or {}).get("status"), str((passed or {}).get("reason") or "")
    configuration = status == "False" and reason in CONFIGURATION_REASONS.values()
    if status == "True":
        # Admitted before: the startup taint came back with its node group's taints.
        return [_lift(node, "admitted before: startup taint its node group put back lifted"),
                *([DeleteCheck(_name(job))] if job is not None else [])]
    if job is None:
        if status == "False" and not configuration:
            # Failed before: it keeps its taint; a Karpenter node is handed back when its pool allows.
            return _hand_back(node, pool, reason, state)
        recheck = [_recheck(node, "its failed check is gone")] if configuration else []
        return [*recheck, CreateCheck(name, str(node["metadata"].get("uid", "")), pool)] if _ready(node) else []
    if configuration and (job["metadata"].get("annotations") or {}).get(TEMPLATE_ANNOTATION) != template_hash(settings.check_pod):
        return [_recheck(node, "the gate's settings changed"), DeleteCheck(_name(job))]
    finished = job_finished(job)
    pull = image_pull_failure(job, state.pods)
    if finished is None:
        if pull is not None:
            return _say(node, CONFIGURATION_REASONS["image"], pull)
        if passed is None and devices_taken(job, state.pods, node, settings.pools[pool]):
            return [
                _lift(node, "its devices are held by pods placed before it was tainted: admitted unchecked"),
                SetCondition(name, "True", IN_USE_REASON, "the node got the startup taint while pods placed before it held "
                             "its devices: it ran work before the gate was on, and is admitted without a check"),
                DeleteCheck(_name(job)),
            ]
        return []
    if finished:
        return [
            _lift(node, "checks passed: startup taint lifted"),
            SetCondition(name, "True", PASSED_REASON, "the node passed its health checks"),
            DeleteCheck(_name(job)),
        ]
    if status == "False":
        # Said once (the failed Job stays an hour for its log): a configuration cause holds the node.
        return [] if configuration else _hand_back(node, pool, reason, state)
    failed, message = _verdict(node, pool, job, pull, state)
    if failed in CONFIGURATION_REASONS.values():
        return _say(node, failed, message)
    state.failures[(pool, failed)] = state.failures.get((pool, failed), 0) + 1
    return [*_say(node, failed, message), *_hand_back(node, pool, failed, state)]


def _recheck(node: Mapping[str, Any], why: str) -> SetCondition:
    """``HealthChecksPassed`` Unknown for a node held for a configuration cause that is checked again."""
    return SetCondition(_name(node), "Unknown", RECHECK_SETTINGS_REASON, f"checked again: {why}")


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
        # The condition a round before the taints: a node with the startup taint and the condition
        # still True would be taken for one its node group re-tainted, and admitted unchecked; and
        # the taint write carries the resourceVersion read before the condition's write changed it.
        passed = condition(node, CONDITION_TYPE) or {}
        if (passed.get("status"), passed.get("reason")) != ("Unknown", RECHECK_REASON):
            return [SetCondition(name, "Unknown", RECHECK_REASON, "the node recovered from a GPU fault and is checked again")], 0
        return [SetTaints(name, version, (*_without(_taints(node), QUARANTINE_TAINT_KEY), startup_taint()),
                          f"{HARDWARE_CONDITION} True again: checked before it gets work")], 0
    return [], 0

