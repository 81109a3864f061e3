"""How many failing Karpenter nodes the gate hands back to Karpenter, and when.

Deleting a failed node's NodeClaim makes Karpenter drain and terminate the node and launch another
for the pods that wait (Karpenter 1.14 docs-disruption.md). A failure every node shares (a check
image, a driver, an AMI) would then bill a new GPU node every check deadline, for ever. So the gate
deletes at most ``GateSettings.replacements_per_hour`` NodeClaims of a pool in any hour, the n-th
of them only ``BACKOFF_SECONDS * 2**(n-1)`` after the one before; a failing node past that keeps
its startup taint until a later round may hand it back.

Each deletion is recorded as an Event in the gate's namespace (``events.k8s.io/v1``), read back
every round, so a restarted gate counts the same. The API server keeps Events for an hour by
default (kube-apiserver ``--event-ttl``), the length of the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Optional

WINDOW = timedelta(hours=1)
BACKOFF_SECONDS = 300
"""The wait before a pool's second deletion in an hour; it doubles for each one after."""
EVENT_REASON = "NodeClaimDeleted"
POOL_LABEL = "eks-gpu-training/pool"
CHECK_REASON_LABEL = "eks-gpu-training/check-reason"
REPORTING_CONTROLLER = "eks-gpu-training/health-gate"
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class Replacement:
    """A NodeClaim the gate deleted: its pool, the failed check's reason, when, and its node's name
    (empty for an Event that names none)."""

    pool: str
    reason: str
    at: datetime
    node: str = ""


def _parse(text: str) -> Optional[datetime]:
    for layout in (MICRO_TIME, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, layout).replace(tzinfo=None)
        except ValueError:
            continue
    return None


def from_events(events: Iterable[Mapping[str, Any]]) -> list[Replacement]:
    """The gate's deletions among the Events of its namespace, as the API server returns them."""
    found = []
    for event in events:
        labels = event.get("metadata", {}).get("labels") or {}
        when = _parse(str(event.get("eventTime") or ""))
        if event.get("reason") == EVENT_REASON and POOL_LABEL in labels and when is not None:
            related = event.get("related") or {}
            node = str(related.get("name") or "") if related.get("kind") == "Node" else ""
            found.append(Replacement(labels[POOL_LABEL], labels.get(CHECK_REASON_LABEL, ""), when, node))
    return found


def recent(replacements: Iterable[Replacement], pool: str, now: datetime) -> list[Replacement]:
    """The pool's deletions within the last hour, oldest first."""
    naive = now.replace(tzinfo=None)
    return sorted((r for r in replacements if r.pool == pool and naive - r.at < WINDOW), key=lambda r: r.at)


def held_back(replacements: Iterable[Replacement], pool: str, per_hour: int, now: datetime) -> Optional[str]:
    """Why the pool's next deletion must wait (in words), or None when it may happen now."""
    past = recent(replacements, pool, now)
    if len(past) >= per_hour:
        return f"{len(past)} of the pool's NodeClaims deleted in the last hour, the most healthGate.maxNodeReplacementsPerHour allows"
    if not past:
        return None
    wait = timedelta(seconds=BACKOFF_SECONDS * 2 ** (len(past) - 1))
    ready = past[-1].at + wait
    if now.replace(tzinfo=None) < ready:
        return f"the pool's last NodeClaim deletion was less than {int(wait.total_seconds())} s ago"
    return None


def event_manifest(namespace: str, config_map: str, claim: str, node: str, pool: str, reason: str,
                   now: datetime) -> dict[str, Any]:
    """The Event that records a deletion. It regards the gate's ConfigMap: an Event of a namespace
    other than ``default`` or ``kube-system`` may not regard a cluster-scoped object such as a
    NodeClaim (kubernetes pkg/apis/core/validation/events.go); its ``related`` object, which that
    rule does not cover, is the node."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": "nodeclaim-deleted-", "namespace": namespace,
                     "labels": {POOL_LABEL: pool, CHECK_REASON_LABEL: reason[:63]}},
        "eventTime": now.strftime(MICRO_TIME),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": REPORTING_CONTROLLER.rsplit("/", 1)[-1],
        "action": "DeleteNodeClaim",
        "reason": EVENT_REASON,
        "type": "Warning",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": config_map},
        "related": {"apiVersion": "v1", "kind": "Node", "name": node},
        "note": f"node {node} of pool {pool} failed its checks ({reason}): NodeClaim {claim} deleted, Karpenter replaces it",
    }
