"""What ``simulate`` and the scale benchmark read of a trace as it plays: each job's submission,
admission, eviction and end from Kueue's Workloads, where its pods ran, and each pool's and
team's use, sampled; and the report made of it. On a MultiKueue manager, the Workloads are the
manager's and the pods and nodes its workers', so the report says which worker ran each job and
each worker's use."""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional

from ..facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, KARPENTER_NODEPOOL_LABEL, network_layer_key
from ..healthgate.gate_api import list_items
from .platform import Applier
from .trace import TraceJob

TRACE_JOB_LABEL = "eks-gpu-training/trace-job"
"""The trace row a job and its pods belong to."""
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"


@dataclass
class JobResult:
    name: str
    team: Optional[str]
    namespace: str
    kind: str
    pool: str
    nodes: int
    gpus: int
    submitted: Optional[float] = None
    admitted: Optional[float] = None
    finished: Optional[float] = None
    wait_s: Optional[float] = None
    blocks: list[str] = field(default_factory=list)
    """The layer-3 network nodes its last admission's pods ran under (empty on nodes without a
    topology); the pods of an admission Kueue evicted count only until they are deleted."""
    layer2_blocks: list[str] = field(default_factory=list)
    pending_after_admission_s: Optional[float] = None
    """How long after its latest admission the last of its pods was still unbound to a node."""
    unbound_reason: str = ""
    """Why that pod was unbound, as its PodScheduled condition says (Kueue's scheduling gates, or the scheduler)."""
    refused: str = ""
    """The scheduler's message when it found no node for one of its pods after admission (PodScheduled
    reason ``Unschedulable``): Kueue admitted it onto nodes the scheduler would not use."""
    wait_reason: str = ""
    """Kueue's last word on why the job was not admitted yet (its Workload's QuotaReserved message)."""
    evicted: bool = False
    """Kueue evicted the job after admitting it (its Workload has an Evicted condition, or a requeue count)."""
    eviction: str = ""
    """Why, as the Workload's Evicted condition says: its reason and message."""
    cluster: str = ""
    """The worker a MultiKueue manager dispatched it to (its Workload's ``status.clusterName``); empty
    when it ran where it was submitted or was never dispatched."""


@dataclass
class Report:
    stack: str
    scale: Optional[int]
    speedup: float
    trace: str
    jobs: list[JobResult]
    pools: list[dict[str, Any]]
    teams: list[dict[str, Any]]
    wall_s: float
    complete: bool
    admissions_per_second: float = 0.0
    """Jobs admitted, over the time from the first submission to the last admission."""
    wait_reasons: dict[str, int] = field(default_factory=dict)
    """Kueue's reasons jobs waited (numbers taken out), and how many jobs waited for each."""
    pull_delay_s: float = 0.0
    clusters: list[dict[str, Any]] = field(default_factory=list)
    """Per worker of a MultiKueue manager: its jobs, their waits to dispatch (submission to the
    manager's admission, once the worker admitted its copy) and its GPUs in use; empty off a fleet."""

    def as_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "jobs"}, "jobs": [asdict(job) for job in self.jobs]}


@dataclass
class _Node:
    pool: str
    gpus: int
    layer3: str
    layer2: str
    cluster: str = ""


def _at(cluster: str, name: str) -> str:
    """A node's or pool's name, qualified by its worker on a fleet (workers share node names)."""
    return f"{cluster}/{name}" if cluster else name


class Recorder:
    """What the cluster shows of the trace, sample by sample. ``applier`` is the cluster the jobs
    are submitted to; ``workers``, a MultiKueue manager's workers by name, where they run."""

    def __init__(self, applier: Applier, jobs: list[TraceJob], speedup: float, workers: Optional[Mapping[str, Applier]] = None):
        from kubernetes import client

        self.applier, self.speedup = applier, speedup
        self.workers = dict(workers or {})
        self.cluster_samples: dict[str, list[list[float]]] = {}
        self.custom = client.CustomObjectsApi(applier.api_client)
        self.jobs = {job.name: job for job in jobs}
        self.results = {job.name: JobResult(job.name, job.team, job.namespace, job.kind, job.pool, job.nodes, job.gpus)
                        for job in jobs}
        self.nodes: dict[str, _Node] = {}
        self.pool_samples: dict[str, list[list[float]]] = {}
        self.team_samples: dict[str, list[list[float]]] = {}
        self.started = time.monotonic()
        self._nodes_read = -math.inf
        self._admitted: dict[str, float] = {}
        """The jobs admitted at the last sample, each since when (a job evicted and admitted
        again counts from its new admission)."""

    def now(self) -> float:
        """Trace seconds since the replay started."""
        return (time.monotonic() - self.started) * self.speedup

    def _runs_on(self) -> dict[str, Applier]:
        """The clusters the jobs' pods run on, by worker (``""``: the cluster they are submitted to)."""
        return self.workers or {"": self.applier}

    def _read_nodes(self) -> None:
        for cluster, applier in self._runs_on().items():
            for node in cached_items(applier.core.list_node):
                labels = node["metadata"].get("labels") or {}
                pool = labels.get(GPU_POOL_KEY) or labels.get(KARPENTER_NODEPOOL_LABEL)
                gpus = int((node.get("status") or {}).get("allocatable", {}).get(GPU_RESOURCE, 0) or 0)
                if pool and gpus:
                    self.nodes[_at(cluster, node["metadata"]["name"])] = _Node(
                        _at(cluster, pool), gpus, labels.get(network_layer_key(3), ""), labels.get(network_layer_key(2), ""), cluster)
        self._nodes_read = time.monotonic()

    def submitted(self, name: str) -> None:
        self.results[name].submitted = self.now()

    def sample(self) -> None:
        if time.monotonic() - self._nodes_read > 5:
            self._read_nodes()
        now = self.now()
        admitted = self._sample_workloads(now)
        self._admitted = {name: self._admitted.get(name, now) for name in admitted}
        used, running_gpus, unbound = self._sample_pods()
        for name, since in self._admitted.items():
            if name in unbound:
                reason, message = unbound[name]
                self.results[name].pending_after_admission_s = now - since
                self.results[name].unbound_reason = message
                if reason == "Unschedulable" and not self.results[name].refused:
                    self.results[name].refused = message
        for pool in {node.pool for node in self.nodes.values()} | set(used):
            self.pool_samples.setdefault(pool, []).append([round(now, 1), used.get(pool, 0), self._pool_gpus(pool)])
        for cluster in self.workers:
            in_use = sum(gpus for pool, gpus in used.items() if pool.startswith(f"{cluster}/"))
            total = sum(node.gpus for node in self.nodes.values() if node.cluster == cluster)
            self.cluster_samples.setdefault(cluster, []).append([round(now, 1), in_use, total])
        for key in {job.team or job.namespace for job in self.jobs.values()}:
            queued = sum(1 for job in self.jobs.values() if (job.team or job.namespace) == key
                         and self.results[job.name].submitted is not None and self.results[job.name].admitted is None)
            self.team_samples.setdefault(key, []).append([round(now, 1), queued, running_gpus.get(key, 0)])

    def _sample_workloads(self, now: float) -> set[str]:
        """Each trace job's Kueue workload read: its wait reason, eviction, admission and finish
        recorded; the names of those admitted now."""
        workloads = cached_items(self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads")
        admitted: set[str] = set()
        for workload in workloads:
            name = _trace_job_of(workload)
            if name not in self.results:
                continue
            result = self.results[name]
            found = (workload.get("status") or {}).get("conditions") or []
            conditions = {c["type"]: c["status"] for c in found}
            if result.admitted is None:
                reserved = next((c for c in found if c["type"] == "QuotaReserved" and c["status"] == "False"), None)
                if reserved is not None and reserved.get("message"):
                    result.wait_reason = str(reserved["message"])
            if conditions.get("Admitted") == "True":
                admitted.add(name)
            if (workload.get("status") or {}).get("clusterName"):
                result.cluster = str(workload["status"]["clusterName"])
            if "Evicted" in conditions or ((workload.get("status") or {}).get("requeueState") or {}).get("count"):
                result.evicted = True
                evicted = next((c for c in found if c["type"] == "Evicted"), None)
                if evicted is not None and not result.eviction:
                    result.eviction = f'{evicted.get("reason", "")}: {evicted.get("message", "")}'
            if result.admitted is None and was_admitted(found):
                # Admitted by now at the latest. A workload can end with its reservation unset as it
                # finishes (Kueue 0.19), and the samples may never have caught it Admitted.
                result.admitted = now
                result.wait_s = max(0.0, now - (result.submitted or 0.0))
            if conditions.get("Finished") == "True" and result.finished is None:
                result.finished = now
        return admitted

    def _sample_pods(self) -> tuple[dict[str, int], dict[str, int], dict[str, tuple[str, str]]]:
        """The trace jobs' pods read: the blocks their nodes are in recorded; the GPUs in use by
        pool and by team (or namespace), and the jobs with a pod no scheduler has bound, with the
        reason and message of its PodScheduled condition."""
        pods = [(cluster, pod) for cluster, applier in self._runs_on().items()
                for pod in cached_items(applier.core.list_pod_for_all_namespaces, label_selector=TRACE_JOB_LABEL)]
        used: dict[str, int] = {}
        running_gpus: dict[str, int] = {}
        unbound: dict[str, tuple[str, str]] = {}
        layer3: dict[str, set[str]] = {}
        layer2: dict[str, set[str]] = {}
        for cluster, pod in pods:
            name = (pod["metadata"].get("labels") or {}).get(TRACE_JOB_LABEL, "")
            found = self.results.get(name)
            if found is None:
                continue
            node_name, phase = pod["spec"].get("nodeName"), (pod.get("status") or {}).get("phase")
            if not node_name:
                if phase == "Pending":
                    unbound[name] = next(((str(c.get("reason", "")), str(c.get("message", "")))
                                          for c in (pod.get("status") or {}).get("conditions") or []
                                          if c.get("type") == "PodScheduled" and c.get("status") == "False"), ("", ""))
                continue
            node = self.nodes.get(_at(cluster, node_name))
            if node is None:
                self._read_nodes()
                node = self.nodes.get(_at(cluster, node_name))
            if node is None:
                continue
            if not pod["metadata"].get("deletionTimestamp"):
                layer3.setdefault(name, set()).update({node.layer3} - {""})
                layer2.setdefault(name, set()).update({node.layer2} - {""})
            if phase in ("Pending", "Running"):
                gpus = self.jobs[name].gpus_per_node
                used[node.pool] = used.get(node.pool, 0) + gpus
                key = self.jobs[name].team or self.jobs[name].namespace
                running_gpus[key] = running_gpus.get(key, 0) + gpus
        for name, blocks in layer3.items():
            self.results[name].blocks = sorted(blocks)
            self.results[name].layer2_blocks = sorted(layer2[name])
        return used, running_gpus, unbound

    def _pool_gpus(self, pool: str) -> int:
        return sum(node.gpus for node in self.nodes.values() if node.pool == pool)

    def done(self) -> bool:
        return all(result.finished is not None for result in self.results.values())

    def report(self, stack: str, scale: Optional[int], trace: str, complete: bool, pull_delay_s: float = 0.0) -> Report:
        pools = []
        for pool, samples in sorted(self.pool_samples.items()):
            busy = [used / total for _, used, total in samples if total]
            pools.append({"name": pool, "gpus": max((s[2] for s in samples), default=0),
                          "mean_utilization": round(statistics.fmean(busy), 3) if busy else 0.0,
                          "peak_gpus_used": max((s[1] for s in samples), default=0),
                          "samples": samples, "sample_fields": ["t", "gpus_used", "gpus"]})
        teams = []
        for key, samples in sorted(self.team_samples.items()):
            waits = [r.wait_s for r in self.results.values() if (r.team or r.namespace) == key and r.wait_s is not None]
            teams.append({"name": key, "jobs": sum(1 for r in self.results.values() if (r.team or r.namespace) == key),
                          "mean_wait_s": round(statistics.fmean(waits), 1) if waits else None,
                          "max_wait_s": round(max(waits), 1) if waits else None,
                          "max_queued": max((s[1] for s in samples), default=0),
                          "samples": samples, "sample_fields": ["t", "queued_jobs", "gpus_running"]})
        jobs = sorted(self.results.values(), key=lambda r: (r.submitted if r.submitted is not None else math.inf, r.name))
        for job in jobs:
            for key in ("submitted", "admitted", "finished", "wait_s", "pending_after_admission_s"):
                value = getattr(job, key)
                if value is not None:
                    setattr(job, key, round(value, 1))
        return Report(stack, scale, self.speedup, trace, jobs, pools, teams,
                      round(time.monotonic() - self.started, 1), complete,
                      admissions_per_second=round(admissions_per_second(jobs), 3),
                      wait_reasons=wait_reasons(jobs), pull_delay_s=pull_delay_s,
                      clusters=[cluster_summary(cluster, jobs, self.cluster_samples.get(cluster, [])) for cluster in self.workers])


def cluster_summary(cluster: str, jobs: list[JobResult], samples: list[list[float]]) -> dict[str, Any]:
    """A worker's line of the report: the jobs dispatched to it, their waits, and its GPUs in use."""
    waits = [job.wait_s for job in jobs if job.cluster == cluster and job.wait_s is not None]
    busy = [used / total for _, used, total in samples if total]
    return {"name": cluster, "jobs": sum(1 for job in jobs if job.cluster == cluster),
            "mean_wait_s": round(statistics.fmean(waits), 1) if waits else None, "max_wait_s": round(max(waits), 1) if waits else None,
            "gpus": max((s[2] for s in samples), default=0), "mean_utilization": round(statistics.fmean(busy), 3) if busy else 0.0,
            "peak_gpus_used": max((s[1] for s in samples), default=0), "samples": samples, "sample_fields": ["t", "gpus_used", "gpus"]}


def cached_items(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as the API server's JSON: a thousand nodes read in a fraction of the
    time the client's models take to build. Served from the API server's watch cache
    (``resourceVersion`` 0), as a controller's informer would read: each sample a moment old
    at most, and no read of etcd every second beside the fleet being measured."""
    return list_items(call, *args, resource_version="0", **kwargs)


def was_admitted(found: list[dict[str, Any]]) -> bool:
    """Whether a Workload's conditions show it admitted now or at some time: Admitted, or its pods
    Ready (Kueue makes them only once it admits), or finished with every pod succeeded."""
    true = {c["type"]: c.get("reason") for c in found if c["status"] == "True"}
    return "Admitted" in true or "PodsReady" in true or true.get("Finished") == "Succeeded"


def _trace_job_of(workload: dict[str, Any]) -> str:
    """The trace row a Kueue Workload admits: its owner's name, which is the row's (Kueue makes one
    Workload per Job, JobSet or TrainJob, owned by it)."""
    for owner in workload["metadata"].get("ownerReferences") or []:
        if owner.get("kind") in ("Job", "JobSet", "TrainJob"):
            return str(owner.get("name"))
    return ""


def admissions_per_second(jobs: list[JobResult]) -> float:
    """Jobs admitted, over the seconds from the first submission to the last admission."""
    admitted = [job.admitted for job in jobs if job.admitted is not None]
    submitted = [job.submitted for job in jobs if job.submitted is not None]
    if not admitted or not submitted:
        return 0.0
    return len(admitted) / max(1e-9, max(admitted) - min(submitted))


def wait_reasons(jobs: list[JobResult]) -> dict[str, int]:
    """Kueue's last reason each job waited for, its numbers replaced by N so alike reasons count
    together; most frequent first."""
    counted = Counter(re.sub(r"(?<![A-Za-z])\d+", "N", job.wait_reason) for job in jobs if job.wait_reason)
    return dict(counted.most_common())
