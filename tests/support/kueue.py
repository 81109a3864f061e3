"""Kueue as the cluster tier reads it: Workloads, their conditions, and the books one test can
leave behind for the next (``Accounting``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eks_gpu_training.workloads.templates import QUEUE_NAME_LABEL

KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""The label Kueue puts on a Job's Workload: the Job's uid."""
QUEUE_LABEL = QUEUE_NAME_LABEL
"""The label that puts a Job in a Kueue queue, as the platform's templates write it."""


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    """The Workload's condition of type ``kind``; empty when it has none."""
    for found in (workload.get("status") or {}).get("conditions") or []:
        if found["type"] == kind:
            return found
    return {}


def conditions(workload: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each condition's type, status and message, for a failure's message."""
    return [(c["type"], c["status"], c.get("message", "")) for c in (workload.get("status") or {}).get("conditions") or []]


def job_uids(workload: dict[str, Any]) -> set[str]:
    """The uids of the Jobs a Workload is for: its owners' and its job-uid label's. By uid, not by
    name: a Job made again under the same name is another Job, and the Workload of the one
    deleted may still be there."""
    meta = workload["metadata"]
    uids = {o["uid"] for o in meta.get("ownerReferences") or []}
    label = (meta.get("labels") or {}).get(JOB_UID_LABEL)
    return uids | {label} if label else uids


def owner_key(namespace: str, kind: str, name: str) -> str:
    """How the books name a Workload: by what owns it (``training/Job rl-training``), so a Job
    deleted and made again, whose Workload has another name, counts as the same."""
    return f"{namespace}/{kind} {name}"


def workload_key(workload: dict[str, Any]) -> str:
    meta = workload["metadata"]
    owners = meta.get("ownerReferences") or []
    return owner_key(meta["namespace"], owners[0]["kind"], owners[0]["name"]) if owners else f"{meta['namespace']}/{meta['name']}"


@dataclass(frozen=True)
class Accounting:
    """What one test can leave behind for the next: Kueue's books and the pods holding GPU nodes.

    ``queues`` is each ClusterQueue's ``status.admittedWorkloads``, ``reservingWorkloads`` and
    ``flavorsUsage`` (per flavor and resource, the total in use); ``workloads`` every Workload, by
    its owner; ``unmade`` the Jobs queued to Kueue it has not made a Workload for yet (Kueue makes
    one after its Job, so until then the books miss that Job); ``pods`` every pod not owned by a
    DaemonSet that stands on a GPU node or waits for one (a pending pod the scheduler has nominated
    a node for counts against that node too)."""

    queues: tuple[tuple[str, int, int, tuple[tuple[str, str, str], ...]], ...]
    workloads: frozenset[str]
    unmade: frozenset[str]
    pods: dict[str, str]
    """``namespace/name`` -> where it stands (phase and node), for the message."""

    def differences(self, expected: "Accounting") -> list[str]:
        """What differs from ``expected``, one line each, in the words of the objects."""
        found: list[str] = []
        ours, theirs = {q[0]: q for q in self.queues}, {q[0]: q for q in expected.queues}
        for name in sorted(set(ours) | set(theirs)):
            now, then = ours.get(name), theirs.get(name)
            if now == then:
                continue
            if now is None or then is None:
                found.append(f"ClusterQueue {name} {'gone' if now is None else 'new'}")
                continue
            if now[1:3] != then[1:3]:
                found.append(f"ClusterQueue {name}: admittedWorkloads {now[1]} (was {then[1]}), "
                             f"reservingWorkloads {now[2]} (was {then[2]})")
            used = [f"{flavor} {resource} {total}" for flavor, resource, total in now[3] if (flavor, resource, total) not in then[3]]
            if used:
                found.append(f"ClusterQueue {name} flavorsUsage: {', '.join(used)} (was {_usage(then[3])})")
        for name in sorted(self.unmade):
            found.append(f"{name} queued, and Kueue has made no Workload for it yet")
        for name in sorted(self.workloads - expected.workloads):
            found.append(f"Workload {name} left")
        for name in sorted(expected.workloads - self.workloads - self.unmade):
            found.append(f"Workload {name} gone")
        for name in sorted(set(self.pods) - set(expected.pods)):
            found.append(f"pod {name} left ({self.pods[name]})")
        return found


def read_accounting(cluster_queues: list[dict[str, Any]], workloads: list[dict[str, Any]], queued_jobs: list[dict[str, Any]],
                    gpu_pods: dict[str, str]) -> Accounting:
    """The books from the objects as listed: ClusterQueues, Workloads, the jobs (Jobs, JobSets,
    TrainJobs) labelled with a queue, and the pods on or waiting for GPU nodes."""
    queues = []
    for queue in cluster_queues:
        status = queue.get("status") or {}
        usage = tuple(sorted(
            (flavor["name"], resource["name"], str(resource.get("total", "0")))
            for flavor in status.get("flavorsUsage") or [] for resource in flavor.get("resources") or []
            if not _zero(str(resource.get("total", "0")))))
        queues.append((queue["metadata"]["name"], int(status.get("admittedWorkloads") or 0),
                       int(status.get("reservingWorkloads") or 0), usage))
    made = set().union(*(job_uids(w) for w in workloads))
    unmade = frozenset(owner_key(j["metadata"]["namespace"], j.get("kind") or "Job", j["metadata"]["name"])
                       for j in queued_jobs if j["metadata"]["uid"] not in made)
    return Accounting(queues=tuple(sorted(queues)), workloads=frozenset(workload_key(w) for w in workloads),
                      unmade=unmade, pods=gpu_pods)


def _usage(usage: tuple[tuple[str, str, str], ...]) -> str:
    return ", ".join(f"{flavor} {resource} {total}" for flavor, resource, total in usage) or "none"


def _zero(quantity: str) -> bool:
    return quantity.strip("0.m") == "" or quantity in ("0", "0m")
