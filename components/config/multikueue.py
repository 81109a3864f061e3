"""MultiKueue: many clusters behind one Kueue. A stack is a worker (its usual platform, plus the
identity a manager dispatches through), a manager (its ClusterQueues dispatch each job whole to one
of the workers it names), or both.

The rules here need only this stack's settings; that the workers' queues mirror the manager's needs
theirs too, and ``workloads.multikueue_queues`` compares them."""

from __future__ import annotations

import re
from typing import Optional

from pydantic import Field

from ..facts import aws_enums
from .base import _DNS_LABEL, _Model
from .problems import Problem

MULTIKUEUE_MAX_WORKERS = 20
"""Most clusters one MultiKueueConfig lists (``spec.clusters`` maxItems, kueue.x-k8s.io v1beta2,
Kueue 0.19.2)."""

WORKER_LOST_TIMEOUT_MINUTES = 15
"""Default of ``multiKueue.workerLostTimeoutMinutes``: Kueue's own default of ``multiKueue.workerLostTimeout``
(Kueue 0.19.2 configuration API)."""

STACK_REFERENCE = re.compile(r"^([A-Za-z0-9_.-]+/){0,2}[A-Za-z0-9_.-]+$")
"""A Pulumi stack name: ``stack``, ``project/stack`` or ``organization/project/stack``."""


class MultiKueueWorkerConfig(_Model):
    """A worker cluster a manager dispatches jobs to: by its stack, or by its EKS cluster's name and region."""

    name: str = Field(pattern=_DNS_LABEL, max_length=63)
    """The worker's MultiKueueCluster on the manager, and its kubeconfig Secret's name there (required)."""
    stack: Optional[str] = None
    """The worker's Pulumi stack (`stack`, `project/stack` or `org/project/stack`), a worker itself (`multiKueue.worker`): the manager reads the credentials it exports by stack reference. Either this or `clusterName` with `region`."""
    cluster_name: Optional[str] = None
    """The worker's EKS cluster: the manager's deployment makes the manager's identity on it (its deployer must reach that cluster's API). Either this with `region`, or `stack`."""
    region: Optional[str] = None
    """AWS region of `clusterName`."""


class MultiKueueFleetConfig(_Model):
    """MultiKueue: whether this stack dispatches jobs to other clusters (`manager`), accepts them from a manager (`worker`), or both."""

    manager: bool = False
    """Dispatch every job of this stack's ClusterQueues to one of `workers`, where it runs whole; none runs here (Kueue's MultiKueue AdmissionCheck on each ClusterQueue). Default: false."""
    worker: bool = False
    """Accept jobs from a manager: a ServiceAccount with the verbs MultiKueue needs, writing only in the training namespaces, and its kubeconfig as the stack's secret output `multiKueueKubeconfig` (docs/fleet.md). Default: false."""
    workers: list[MultiKueueWorkerConfig] = []
    """The clusters a manager dispatches to, most preferred first; each mirrors the manager's training namespaces and teams (at least one, at most 20). Default: none."""
    worker_lost_timeout_minutes: int = Field(default=WORKER_LOST_TIMEOUT_MINUTES, ge=1, le=1440)
    """Minutes a manager keeps a job dispatched to a worker it cannot reach before it dispatches the job again elsewhere (Kueue's `multiKueue.workerLostTimeout`); the lost copy may still be running. Default: 15."""


def _worker_identity(worker: MultiKueueWorkerConfig) -> Optional[str]:
    if worker.stack is not None:
        return f"stack {worker.stack}"
    if worker.cluster_name is not None and worker.region is not None:
        return f"cluster {worker.cluster_name} in {worker.region}"
    return None


def _worker_problems(worker: MultiKueueWorkerConfig, path: str) -> list[Problem]:
    """A worker is named by its stack, or by its cluster and region, and either one is well formed."""
    problems: list[Problem] = []
    by_cluster = worker.cluster_name is not None or worker.region is not None
    if worker.stack is not None and by_cluster:
        problems.append(Problem(path, "names its worker twice: give `stack`, or `clusterName` and `region`, not both"))
    elif worker.stack is None and not by_cluster:
        problems.append(Problem(path, "names no cluster: give `stack`, or `clusterName` and `region`"))
    elif by_cluster and worker.cluster_name is None:
        problems.append(Problem(f"{path}.clusterName", "is required with region"))
    elif by_cluster and worker.region is None:
        problems.append(Problem(f"{path}.region", "is required with clusterName"))
    if worker.stack is not None and not STACK_REFERENCE.match(worker.stack):
        problems.append(Problem(f"{path}.stack", f"'{worker.stack}' is not a stack name (`stack`, `project/stack` or "
                                "`org/project/stack`)"))
    if worker.region is not None and worker.region not in aws_enums.aws_regions():
        problems.append(Problem(f"{path}.region", f"'{worker.region}' is not an AWS region"
                                + aws_enums.suggestion(worker.region, aws_enums.aws_regions())))
    return problems


def validate_multikueue(fleet: MultiKueueFleetConfig, *, kueue_enabled: bool) -> list[Problem]:
    """A manager names between one and twenty workers, each once, each by its stack or its cluster
    and region; a manager or worker runs Kueue."""
    problems: list[Problem] = []
    if (fleet.manager or fleet.worker) and not kueue_enabled:
        role = "manager" if fleet.manager else "worker"
        problems.append(Problem(f"multiKueue.{role}", "needs Kueue on this cluster: set kueue.enabled: true"))
    if fleet.manager and not fleet.workers:
        problems.append(Problem("multiKueue.workers", "a manager needs at least one worker to dispatch to: name each by "
                                "`stack` or by `clusterName` and `region`"))
    if fleet.workers and not fleet.manager:
        problems.append(Problem("multiKueue.workers", "only a manager dispatches to workers: set multiKueue.manager: true, "
                                "or remove the workers"))
    if len(fleet.workers) > MULTIKUEUE_MAX_WORKERS:
        problems.append(Problem("multiKueue.workers", f"{len(fleet.workers)} workers; one MultiKueueConfig lists at most "
                                f"{MULTIKUEUE_MAX_WORKERS}"))
    names: dict[str, int] = {}
    identities: dict[str, int] = {}
    for i, worker in enumerate(fleet.workers):
        path = f"multiKueue.workers[{i}]"
        if worker.name in names:
            problems.append(Problem(f"{path}.name", f"'{worker.name}' is workers[{names[worker.name]}]'s name too: each "
                                    "worker has a name of its own"))
        names.setdefault(worker.name, i)
        problems.extend(_worker_problems(worker, path))
        identity = _worker_identity(worker)
        if identity is not None:
            if identity in identities:
                problems.append(Problem(path, f"{identity} is workers[{identities[identity]}] too: a cluster is one "
                                        "worker, or it would get each job twice"))
            identities.setdefault(identity, i)
    return problems
