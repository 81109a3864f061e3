"""What a MultiKueue worker must mirror of its manager's queues, and the rule that it does.

MultiKueue creates its copy of a job on the worker in the job's own namespace with the job's own
``kueue.x-k8s.io/queue-name``, so every LocalQueue a manager's jobs are submitted to must exist on
every worker, in the same namespace (Kueue, "Setup a MultiKueue environment": "ensure that the worker
cluster configuration mirrors the one of the manager cluster in terms of namespaces and LocalQueues").
The ClusterQueues behind them must carry the same names too, so a namespace's team is the same team
everywhere and its quotas and borrowing hold per worker. Quotas and pools are each worker's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import GpuTrainingPlatformArgs, Problem
from .kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE


@dataclass(frozen=True)
class FleetQueues:
    """A stack's training namespaces with the ClusterQueue each one's LocalQueues point at."""

    cluster_queue_of: dict[str, str]
    """Namespace → ClusterQueue (its team's, else its own)."""
    local_queues: tuple[str, ...] = (LOCAL_QUEUE, HELD_LOCAL_QUEUE)
    """The LocalQueues every training namespace has."""


def fleet_queues(args: GpuTrainingPlatformArgs) -> FleetQueues:
    """The queues ``KueueQueues`` makes for the stack: each namespace's ClusterQueue is its team's
    when teams share the fleet, else the namespace's own."""
    namespaces = [ns.name for ns in args.scheduling.namespaces]
    if args.scheduling.teams:
        team_of = {ns: team.name for team in args.scheduling.teams for ns in team.namespaces}
        return FleetQueues({ns: team_of.get(ns, ns) for ns in namespaces})
    return FleetQueues({ns: ns for ns in namespaces})


def queue_mismatch_problems(path: str, worker: str, manager_queues: FleetQueues, worker_queues: FleetQueues) -> list[Problem]:
    """The manager's namespaces a worker lacks, and those whose ClusterQueue (team) differs there:
    a job dispatched to it would find no LocalQueue, or run under another team's quota."""
    problems: list[Problem] = []
    missing = sorted(set(manager_queues.cluster_queue_of) - set(worker_queues.cluster_queue_of))
    if missing:
        problems.append(Problem(path, f"worker {worker} has no training namespace {', '.join(missing)}, which the "
                                "manager's jobs run in: add it to the worker's scheduling.namespaces (with the same team)"))
    for namespace, queue in sorted(manager_queues.cluster_queue_of.items()):
        theirs = worker_queues.cluster_queue_of.get(namespace)
        if theirs is not None and theirs != queue:
            problems.append(Problem(path, f"worker {worker} queues namespace {namespace} in ClusterQueue '{theirs}', "
                                    f"the manager in '{queue}': give the namespace the same team on both"))
    lacking = [q for q in manager_queues.local_queues if q not in worker_queues.local_queues]
    if lacking:
        problems.append(Problem(path, f"worker {worker} has no LocalQueue {', '.join(lacking)}: every worker makes "
                                "the manager's LocalQueues"))
    return problems
