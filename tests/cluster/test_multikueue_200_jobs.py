"""200 jobs through a MultiKueue fleet (``tests.support.multikueue_fleet``: a manager and two workers,
its own fleet, beside test_multikueue's on another worker). What the real Kueues decide: 200 Jobs
and JobSets submitted to the manager each run once, whole, on one worker, in one network block,
within each worker's quotas, and their status comes back to the manager."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import watch

from eks_gpu_training.facts.gpu_nodes import GPU_RESOURCE, network_layer_key
from eks_gpu_training.local.recorder import KUEUE_GROUP, KUEUE_VERSION, TRACE_JOB_LABEL
from eks_gpu_training.local.simulate import delete_jobs, job_objects
from eks_gpu_training.local.trace import TraceJob, check_rows

from tests.support.clusters import RunningCluster
from tests.support.environment import GROUP_APIS, TimedOut, wait_for
from tests.support.kueue import condition
from tests.support.multikueue_fleet import POOL, WORKERS

FLEET_JOBS = 200
JOB_SECONDS = 1.0
"""How long each of the 200 jobs' pods runs once it runs (KWOK completes it)."""
QUEUED_AT_MOST = 16
"""Jobs submitted and not yet admitted by a worker, at most: the next is submitted once one is. Kueue
0.19.2's manager reads every worker on each change of each of its Workloads, pending ones included,
through clients held to client-go's default 5 requests a second; with all 200 queued at once,
reading them kept the jobs that had quota waiting for a worker (docs/fleet.md)."""
FLEET_RUN_TIMEOUT_SECONDS = 420
POD_EVENTS_TIMEOUT_SECONDS = 120
"""How long the workers' pod watches have, once the manager says every job completed, to deliver the last pods' events."""


class Events(threading.Thread):
    """Every change to what one list call lists, in the API server's order (one watch, resumed from
    the last version it saw), each handed to ``seen`` with the time it arrived; from a list taken
    when the thread starts."""

    def __init__(self, running: RunningCluster, list_call: Callable[..., Any], seen: Callable[[str, dict[str, Any], float], None],
                 **query: Any):
        super().__init__(daemon=True)
        self.api, self.list_call, self.seen, self.query = running.env.api, list_call, seen, query
        self.listed, self.stopping = threading.Event(), threading.Event()
        self.failure: Exception | None = None

    def run(self) -> None:
        try:
            listed = self.api.sanitize_for_serialization(self.list_call(**self.query))
            version = listed["metadata"]["resourceVersion"]
            for item in listed["items"]:
                self.seen("ADDED", item, time.monotonic())
            self.listed.set()
            while not self.stopping.is_set():
                for event in watch.Watch().stream(self.list_call, resource_version=version, timeout_seconds=2, **self.query):
                    obj = self.api.sanitize_for_serialization(event["object"])
                    if event["type"] == "ERROR":
                        raise AssertionError(f"the watch ended: {obj}")
                    version = obj["metadata"]["resourceVersion"]
                    self.seen(event["type"], obj, time.monotonic())
        except Exception as error:  # noqa: BLE001 - handed to the test, which fails with it
            self.failure = error
            self.listed.set()

    def finish(self) -> None:
        self.stopping.set()
        self.join(timeout=10)
        assert self.failure is None, f"watching {self.list_call.__name__} failed: {self.failure}"


@dataclass
class PodRun:
    job: str
    namespace: str
    node: str = ""
    gpus: int = 0
    phase: str = ""


class PodLog:
    """The trace jobs' pods one cluster ran: each pod's job, node, GPUs and last phase, and the order
    pods took and gave back their GPUs in (bound to a node, until they end or go)."""

    def __init__(self) -> None:
        self.pods: dict[str, PodRun] = {}
        self.timeline: list[tuple[bool, str]] = []
        self.holding: set[str] = set()

    def seen(self, event: str, pod: dict[str, Any], at: float) -> None:
        uid, spec = pod["metadata"]["uid"], pod["spec"]
        run = self.pods.setdefault(uid, PodRun(pod["metadata"]["labels"][TRACE_JOB_LABEL], pod["metadata"]["namespace"]))
        run.node = spec.get("nodeName") or run.node
        run.gpus = sum(int(((c.get("resources") or {}).get("requests") or {}).get(GPU_RESOURCE, 0)) for c in spec["containers"])
        run.phase = (pod.get("status") or {}).get("phase") or run.phase
        holds = bool(run.node) and run.phase not in ("Succeeded", "Failed") and event != "DELETED"
        if holds != (uid in self.holding):
            (self.holding.add if holds else self.holding.discard)(uid)
            self.timeline.append((holds, uid))

    def peak_gpus(self) -> dict[str, int]:
        """The most GPUs each namespace's pods held at once."""
        held: Counter[str] = Counter()
        peak: Counter[str] = Counter()
        for holds, uid in self.timeline:
            run = self.pods[uid]
            held[run.namespace] += run.gpus if holds else -run.gpus
            peak[run.namespace] = max(peak[run.namespace], held[run.namespace])
        return dict(peak)


class WorkloadLog:
    """When the manager's Workload of each job first had its quota reserved, and first was admitted
    (a worker admitted its copy), and on which worker; and which finished. Kueue 0.19.2 finishes the
    manager's Workload from a finished remote one before it marks it admitted and names the worker
    (``multikueue/workload.go``, step 3 before step 6): a one-second job may end on its worker before
    the throttled manager saw it admitted there, and its Workload then names no worker."""

    def __init__(self) -> None:
        self.reserved: dict[str, float] = {}
        self.admitted: dict[str, float] = {}
        self.worker: dict[str, str] = {}
        self.finished: set[str] = set()

    def seen(self, event: str, workload: dict[str, Any], at: float) -> None:
        owners = workload["metadata"].get("ownerReferences") or []
        if not owners:
            return
        job = owners[0]["name"]
        if condition(workload, "QuotaReserved").get("status") == "True":
            self.reserved.setdefault(job, at)
        if condition(workload, "Admitted").get("status") == "True":
            self.admitted.setdefault(job, at)
        if (workload.get("status") or {}).get("clusterName"):
            self.worker.setdefault(job, workload["status"]["clusterName"])
        if condition(workload, "Finished").get("status") == "True":
            self.finished.add(job)


def fleet_trace(manager: RunningCluster) -> list[TraceJob]:
    """200 jobs of 1 or 2 nodes, Jobs and JobSets alike; one block of four in eight is research's,
    the rest evaluation's (their quotas are 1 to 7)."""
    rows = []
    for i in range(FLEET_JOBS):
        research = (i // 4) % 8 == 0
        rows.append({"name": f"fleet-{i:03d}", "team": "research" if research else "evaluation", "app": "rl-training",
                     "kind": "JobSet" if i % 2 else "Job", "nodes": 1 + (i // 2) % 2, "duration": JOB_SECONDS,
                     **({} if research else {"priority": "evaluation-normal"})})
    return check_rows(rows, manager.args, "the fleet's trace")


def unfinished(manager: RunningCluster, jobs: list[TraceJob]) -> list[str]:
    """The jobs whose object on the manager does not say yet that it completed (its status, mirrored from the worker)."""
    done = {j["metadata"]["name"] for j in manager.env.list("batch/v1", "Job", selector=TRACE_JOB_LABEL)
            if condition(j, "Complete").get("status") == "True"}
    done |= {j["metadata"]["name"] for j in manager.env.list(GROUP_APIS["JobSet"], "JobSet", selector=TRACE_JOB_LABEL)
             if condition(j, "Completed").get("status") == "True"}
    return [job.name for job in jobs if job.name not in done]


def how_each_ran(fleet: dict[str, RunningCluster], jobs: list[TraceJob], pods: dict[str, PodLog], workloads: WorkloadLog) -> list[str]:
    """Each job that did not run once, whole, in one network block, on the one worker the manager
    says it dispatched it to: what it did instead."""
    layer3 = {name: {n.metadata.name: n.metadata.labels.get(network_layer_key(3)) for n in running.env.nodes()}
              for name, running in fleet.items()}
    ran: dict[str, dict[str, list[PodRun]]] = defaultdict(lambda: defaultdict(list))
    for cluster, log in pods.items():
        for run in log.pods.values():
            ran[run.job][cluster].append(run)
    problems = []
    for job in jobs:
        where = ran[job.name]
        if len(where) != 1 or "manager" in where:
            problems.append(f"{job.name}: pods on {sorted(where) or 'no cluster'}")
            continue
        ((worker, runs),) = where.items()
        if len(runs) != job.nodes or len({r.node for r in runs}) != job.nodes or {r.phase for r in runs} != {"Succeeded"}:
            problems.append(f"{job.name}: {[(r.node, r.phase) for r in runs]} on {worker} for {job.nodes} nodes")
        if len({layer3[worker][r.node] for r in runs}) != 1:
            problems.append(f"{job.name}: over network blocks {sorted({str(layer3[worker][r.node]) for r in runs})}")
        named = workloads.worker.get(job.name)
        if named != worker and not (named is None and job.name in workloads.finished):
            problems.append(f"{job.name}: ran on {worker}, the manager says {named}")
    return problems


def pods_pending(jobs: list[TraceJob], pods: dict[str, PodLog]) -> list[str]:
    """The jobs fewer of whose pods the workers' watches have seen Succeeded than the job has nodes."""
    done: Counter[str] = Counter(run.job for log in pods.values() for run in list(log.pods.values()) if run.phase == "Succeeded")
    return [job.name for job in jobs if done[job.name] < job.nodes]


def team_quotas(running: RunningCluster) -> dict[str, int]:
    """The GPUs each training namespace's team holds on the pool on this cluster (its quota: ``fleet_stack``
    lets no team borrow)."""
    quotas = {}
    for team in running.args.scheduling.teams:
        quota = next(q for q in team.quotas if q.pool == POOL)
        assert quota.borrowing_limit == 0, f"team {team.name} may borrow on {POOL}"
        quotas.update({namespace: quota.gpus for namespace in team.namespaces})
    return quotas


def seconds(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(ordered):.1f} s, 90th percentile {ordered[int(0.9 * (len(ordered) - 1))]:.1f} s, most {ordered[-1]:.1f} s"


def test_200_jobs_each_run_once_whole_in_one_block_on_one_worker_within_its_quotas(fleet, manager_cluster, east_cluster,
                                                                                   west_cluster):
    jobs = fleet_trace(manager_cluster)
    pods = {name: PodLog() for name in fleet}
    workloads = WorkloadLog()
    streams = [Events(running, running.env.core.list_pod_for_all_namespaces, pods[name].seen, label_selector=TRACE_JOB_LABEL)
               for name, running in fleet.items()]
    streams.append(Events(manager_cluster, manager_cluster.env.custom.list_cluster_custom_object, workloads.seen,
                          group=KUEUE_GROUP, version=KUEUE_VERSION, plural="workloads"))
    for stream in streams:
        stream.start()
        assert stream.listed.wait(30), "the watch listed nothing in 30 s"
        assert stream.failure is None, stream.failure
    submitted: dict[str, float] = {}
    try:
        started = time.monotonic()
        for job in jobs:
            wait_for(lambda: sum(name not in workloads.admitted and name not in workloads.finished for name in submitted)
                     < QUEUED_AT_MOST,
                     what=f"fewer than {QUEUED_AT_MOST} submitted jobs waiting", timeout=FLEET_RUN_TIMEOUT_SECONDS, interval=0.2)
            for obj in job_objects(job, manager_cluster.args, speedup=1.0):
                manager_cluster.env.apply(obj)
            submitted[job.name] = time.monotonic()
        wait_for(lambda: not unfinished(manager_cluster, jobs), what=f"the manager's {FLEET_JOBS} jobs completed",
                 timeout=FLEET_RUN_TIMEOUT_SECONDS, interval=2)
        print(f"{FLEET_JOBS} jobs through the fleet in {time.monotonic() - started:.0f} s")
        # The manager's status can be ahead of the workers' pod watches under load: the last pods'
        # events are awaited before the watches stop, and what never came is judged below.
        try:
            wait_for(lambda: not pods_pending(jobs, pods), what="every job's pods seen Succeeded on a worker",
                     timeout=POD_EVENTS_TIMEOUT_SECONDS, interval=1)
        except TimedOut:
            pass
    finally:
        for stream in streams:
            stream.stopping.set()
        delete_jobs(manager_cluster.env.applier, TRACE_JOB_LABEL)
    for stream in streams:
        stream.finish()

    problems = how_each_ran(fleet, jobs, pods, workloads)
    assert problems == [], f"{len(problems)} jobs: " + "; ".join(problems[:10])
    for worker in WORKERS:
        peak, quotas = pods[worker].peak_gpus(), team_quotas(fleet[worker])
        print(f"{worker}: {len({r.job for r in pods[worker].pods.values()})} jobs; GPUs held at most "
              + ", ".join(f"{ns} {peak.get(ns, 0)} of {quota}" for ns, quota in quotas.items()))
        assert all(peak.get(namespace, 0) <= quota for namespace, quota in quotas.items()), (worker, peak, quotas)
        assert peak, f"worker {worker} ran none of the jobs"
    seen = [j for j in jobs if j.name in workloads.admitted]
    print(f"{len(jobs) - len(seen)} jobs finished on their worker before the manager saw them admitted there")
    print("dispatch, from the manager reserving quota to a worker admitting the job: "
          + seconds([workloads.admitted[j.name] - workloads.reserved[j.name] for j in seen]))
    print("from submission to a worker admitting the job (waits for quota included): "
          + seconds([workloads.admitted[j.name] - submitted[j.name] for j in seen]))
