"""Many clusters behind one Kueue: a manager and two workers, three local control planes on loopback,
started and wired by ``eks-gpu-training-local fleet up``'s own code (``local.local_fleet``). The
workers come from the same stack with different pools: east has 8 dev-gpu nodes, west 16, and the
manager a pool of their sum (its maxSize), whose quotas admit what the fleet could run, with the
stack's 8 nodes, which run nothing once its ClusterQueues dispatch. On every member research holds
an eighth of dev-gpu and evaluation the rest, neither borrowing: research has one GPU on east, two
on west and three on the manager.

What the real Kueues decide: a job submitted to the manager runs once, whole, on one worker (one with
room), and its status comes back to the manager; 200 of them run once each, on one worker, in one
network block, within each worker's quotas; a job larger than any worker waits rather than
splitting; a lost worker's job runs on the other; without the AdmissionCheck (the broken variant)
the manager runs the job itself; dispatch switched on stops a job running on the manager, and
switched off leaves a dispatched job to its worker, unseen by the manager."""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from kubernetes import watch

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, network_layer_key
from eks_gpu_training.local.control_plane import COMPLETE_DELAY_ANNOTATION
from eks_gpu_training.local.local_fleet import LocalFleet
from eks_gpu_training.local.multikueue_wiring import dispatch
from eks_gpu_training.local.recorder import KUEUE_GROUP, KUEUE_VERSION, TRACE_JOB_LABEL
from eks_gpu_training.local.simulate import delete_jobs, job_objects
from eks_gpu_training.local.trace import TraceJob, check_rows
from eks_gpu_training.workloads.multikueue_manager import ADMISSION_CHECK, MULTIKUEUE_CONTROLLER

from tests.support import start_slots
from tests.support.clusters import RunningCluster, stack_variant
from tests.support.environment import GROUP_APIS, TimedOut, holds_for, wait_for
from tests.support.harness import PROJECT_ROOT
from tests.support.kueue import KUEUE_API, condition
from tests.support.manifests import submitted_run, unique

POOL = "dev-gpu"
WORKER_LOST_TIMEOUT_SECONDS = 30
"""The manager's ``multiKueue.workerLostTimeout`` here: half a minute instead of a quarter of an hour."""
STACK_NODES = 8
"""dev-gpu nodes (one GPU each) of the stack every member is sized from: research holds one, evaluation seven."""
WORKERS = {"east": 8, "west": 16}
"""Each worker's dev-gpu nodes; the manager's pool reaches their sum, and the teams' quotas follow each pool."""
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


def fleet_stack(config: dict[str, Any]) -> None:
    (pool,) = config["eks-gpu-training:gpuNodeGroups"]
    pool.update(minSize=STACK_NODES, desiredSize=STACK_NODES, maxSize=STACK_NODES)
    scheduling = config["eks-gpu-training:scheduling"]
    teams = {team["name"]: team for team in scheduling["teams"]}
    next(q for q in teams["research"]["quotas"] if q["pool"] == POOL).update(gpus=1, borrowingLimit=0)
    teams["evaluation"]["quotas"].append({"pool": POOL, "gpus": STACK_NODES - 1, "borrowingLimit": 0})
    # rl-training on the fixed pool, as finetune is: each cluster's nodes are there from the start.
    next(app for app in scheduling["trainingApps"] if app["name"] == "rl-training")["pool"] = POOL
    # The gate's rounds and the node monitoring agent's two DaemonSets (its pods and dcgm-server's on
    # each of the fleet's 32 nodes) are judged in their own modules; here they would only slow each
    # start and keep the fleet's three API servers busier.
    config["eks-gpu-training:healthGate"]["enabled"] = False
    config["eks-gpu-training:nodeMonitoring"]["enabled"] = False


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The three clusters, as ``fleet up`` starts them (side by side, in one start slot), the manager wired to both workers."""
    folder = tmp_path_factory.mktemp("fleet")
    local = LocalFleet("dev", folder / "state", workers=dict(WORKERS), project_root=PROJECT_ROOT,
                       stack_path=stack_variant(folder, "dev", fleet_stack), attached=True,
                       worker_lost_timeout_s=WORKER_LOST_TIMEOUT_SECONDS)
    try:
        local.up(starting=start_slots.start_slot)
        yield {name: RunningCluster(cluster) for name, cluster in local.clusters.items()}
    finally:
        local.down()


@pytest.fixture(scope="module")
def manager_cluster(fleet):
    return fleet["manager"]


@pytest.fixture(scope="module")
def east_cluster(fleet):
    return fleet["east"]


@pytest.fixture(scope="module")
def west_cluster(fleet):
    return fleet["west"]


def workload_of(running: RunningCluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    return running.env.workload(namespace, name, kind)


def dispatched_to(manager: RunningCluster, kind: str, namespace: str, name: str, *, not_to: str = "", timeout: float = 120) -> str:
    """The worker the manager's Workload of the job was dispatched to (other than ``not_to``), once its check is Ready."""
    def ready():
        workload = workload_of(manager, kind, namespace, name)
        checks = {c["name"]: c["state"] for c in (workload.get("status") or {}).get("admissionChecks") or []}
        worker = checks.get(ADMISSION_CHECK) == "Ready" and workload["status"].get("clusterName")
        return worker if worker and worker != not_to else None

    return wait_for(ready, what=f"the manager dispatching {kind} {name}" + (f" to a worker other than {not_to}" if not_to else ""),
                    timeout=timeout)


def back_up(cluster) -> list[str]:
    """The lost worker's control plane started again: its API server, and every controller beside it
    stopped and started after it, as a control plane restarted whole. Restarting only those that had
    exited when the API server came back could leave one that gave up a moment later (a local
    artefact, not the loss being tested) dead for the tests after. The processes that had exited."""
    supervisor = cluster.supervisor
    dead = [name for name, started in supervisor.started.items() if not started.alive() and name != "kube-apiserver"]
    again = [name for name in cluster.processes if name not in ("etcd", "kube-apiserver") and name in supervisor.started]
    for name in again:
        supervisor.stop(name)
    supervisor.start_all([cluster.processes[name] for name in ["kube-apiserver", *again]], log=print)
    return dead


def active(manager: RunningCluster, worker: str) -> str:
    return condition(manager.env.get(KUEUE_API, "MultiKueueCluster", worker) or {}, "Active").get("status", "")


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


def fleet_rows(manager: RunningCluster) -> dict[str, Any]:
    """``verify --fleet``'s MultiKueue rows on the manager, by item."""
    from eks_gpu_training.verify import verify

    return {row.item: row for row in verify(str(manager.kubeconfig), fleet=True) if row.item.startswith("multikueue-")}


def set_dispatch(manager: RunningCluster, *, on: bool) -> None:
    """``dispatch`` (MultiKueue's AdmissionCheck on every ClusterQueue, or off), then wait until
    Kueue's Job webhook defaults a new Job as it now should. The webhook reads the ClusterQueues'
    checks from Kueue's own cache, a moment behind the API server (Kueue 0.19.2,
    ``jobframework.ApplyDefaultForManagedBy``): a Job created sooner after the check came off still
    gets ``spec.managedBy`` MultiKueue's, and the manager's Job controller never makes its pods."""
    dispatch(manager.kubeconfig, on=on)
    probe = submitted_run(manager.platform_object("Job", "rl-training"), unique("dispatch-probe"), parallelism=1)
    namespace = probe["metadata"]["namespace"]

    def defaulted() -> bool:
        response = manager.env.batch.create_namespaced_job(namespace, probe, dry_run="All", _preload_content=False)
        return (json.loads(response.data)["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER) == on

    wait_for(defaulted, what=f"Kueue's webhook defaulting new Jobs with dispatch {'on' if on else 'off'}", timeout=60)


def test_the_workers_are_active_and_so_is_the_admission_check(manager_cluster):
    env = manager_cluster.env
    check = env.get(KUEUE_API, "AdmissionCheck", ADMISSION_CHECK)
    assert condition(check, "Active")["status"] == "True"
    for queue in env.list(KUEUE_API, "ClusterQueue"):
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": ADMISSION_CHECK}]}
        assert condition(queue, "Active")["status"] == "True", queue["metadata"]["name"]


def test_a_job_runs_once_whole_on_one_worker_and_its_status_comes_back(manager_cluster, east_cluster, west_cluster):
    submitted = time.monotonic()
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
    try:
        worker = dispatched_to(manager_cluster, "Job", namespace, name)
        print(f"dispatch of one job to an idle fleet: {time.monotonic() - submitted:.1f} s from submission to admitted on {worker}")
        running, other = (east_cluster, west_cluster) if worker == "east" else (west_cluster, east_cluster)
        (pod,) = running.env.expect_job_running(namespace, name, 1)
        assert running.env.core.read_node(pod.spec.node_name).metadata.labels[GPU_POOL_KEY] == POOL
        # The other worker's copy is gone, and the manager runs nothing of it.
        wait_for(lambda: other.env.get("batch/v1", "Job", name, namespace) is None, what=f"no copy of {name} left on the other worker")
        assert manager_cluster.env.job_pods(namespace, name) == []
        # MultiKueue copies the worker's Job status to the manager's Job.
        wait_for(lambda: (manager_cluster.env.get("batch/v1", "Job", name, namespace)["status"] or {}).get("active") == 1,
                 what=f"job {name}'s status mirrored to the manager")
    finally:
        manager_cluster.env.delete_job(namespace, name)


def test_a_two_node_jobset_runs_on_the_worker_with_room_for_its_team(manager_cluster, east_cluster, west_cluster):
    # research has one GPU on east and two on west.
    namespace, name = manager_cluster.submit_group_run("JobSet", "finetune", nodes=2)
    try:
        assert dispatched_to(manager_cluster, "JobSet", namespace, name) == "west"
        pods = west_cluster.env.expect_group_running(namespace, name, 2)
        assert len({p.spec.node_name for p in pods}) == 2, "one pod per node"
        assert east_cluster.env.group_pods(namespace, name) == []
        assert manager_cluster.env.group_pods(namespace, name) == []
    finally:
        manager_cluster.env.delete_group("JobSet", namespace, name)


def test_a_job_larger_than_every_worker_waits_rather_than_splitting(manager_cluster, east_cluster, west_cluster):
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=3)
    try:
        # The manager's quota admits it: research has three GPUs there, no worker gives it more than two.
        wait_for(lambda: condition(workload_of(manager_cluster, "Job", namespace, name), "QuotaReserved").get("status") == "True",
                 what=f"the manager reserving quota for {name}")

        def waits() -> bool:
            workload = workload_of(manager_cluster, "Job", namespace, name)
            return (condition(workload, "Admitted").get("status") != "True"
                    and not any(running.env.job_pods(namespace, name) for running in (manager_cluster, east_cluster, west_cluster)))

        holds_for(waits, seconds=15, what=f"job {name} waiting with no pod on any cluster")
    finally:
        manager_cluster.env.delete_job(namespace, name)


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


def test_broken_variant_without_the_admission_check_the_manager_runs_the_job(manager_cluster, east_cluster, west_cluster):
    set_dispatch(manager_cluster, on=False)
    try:
        namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
        try:
            manager_cluster.env.expect_job_running(namespace, name, 1)
            assert east_cluster.env.get("batch/v1", "Job", name, namespace) is None
            assert west_cluster.env.get("batch/v1", "Job", name, namespace) is None
        finally:
            manager_cluster.env.delete_job(namespace, name)
    finally:
        set_dispatch(manager_cluster, on=True)


def test_a_lost_worker_fails_its_verify_row_and_its_job_runs_on_the_other_and_not_twice_once_it_is_back(fleet, manager_cluster):
    """One outage judged three ways: Kueue re-dispatches the lost worker's job, ``verify --fleet``
    fails the lost worker's row with Kueue's reason (and passes the other's), and once the worker is
    back one copy of the job is left."""
    namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
    try:
        lost = dispatched_to(manager_cluster, "Job", namespace, name)
        other = "west" if lost == "east" else "east"
        fleet[lost].env.expect_job_running(namespace, name, 1)
        lost_cluster = fleet[lost].cluster
        lost_cluster.supervisor.stop("kube-apiserver")
        stopped = time.monotonic()
        try:
            wait_for(lambda: active(manager_cluster, lost) == "False", what=f"the manager seeing worker {lost} lost", timeout=90)
            rows = fleet_rows(manager_cluster)
            said = condition(manager_cluster.env.get(KUEUE_API, "MultiKueueCluster", lost), "Active")
            row = rows[f"multikueue-worker/{lost}"]
            assert row.status == "fail", row
            assert f"not Active ({said['reason']}: {said['message']})" in row.evidence
            assert "its queues not checked: cannot reach the API server" in row.evidence
            assert rows[f"multikueue-worker/{other}"].status == "pass", rows[f"multikueue-worker/{other}"]
            assert "SomeActiveClusters" in rows["multikueue-admission-check"].evidence

            assert dispatched_to(manager_cluster, "Job", namespace, name, not_to=lost, timeout=WORKER_LOST_TIMEOUT_SECONDS + 150) == other
            fleet[other].env.expect_job_running(namespace, name, 1)
            print(f"re-dispatch: the job runs on {other} {time.monotonic() - stopped:.0f} s after {lost}'s API server stopped "
                  f"(workerLostTimeout {WORKER_LOST_TIMEOUT_SECONDS} s)")
        finally:
            restarted = back_up(lost_cluster)
        wait_for(lambda: active(manager_cluster, lost) == "True", what=f"the manager reaching worker {lost} again", timeout=120)

        # Back, one of the two copies is removed and the job runs on one worker only. Which copy stays
        # is Kueue's choice (its 0.19.2 source keeps the one admitted first, ``bestMatchByCondition``);
        # only that one stays is asserted.
        def copies() -> dict[str, str]:
            found = {}
            for worker in (lost, other):
                env = fleet[worker].env
                job = env.get("batch/v1", "Job", name, namespace)
                pods = [p.metadata.name for p in env.job_pods(namespace, name)]
                if job is not None or pods:
                    found[worker] = f"job {job is not None}, pods {pods}"
            return found

        try:
            wait_for(lambda: len(copies()) == 1, what=f"job {name} left on one worker only", timeout=150)
        except AssertionError as error:
            raise AssertionError(f"{error}; copies: {copies()}; restarted after the loss: {restarted}") from None
        holds_for(lambda: len(copies()) == 1, seconds=15, what=f"job {name} on one worker only ({copies()})")
    finally:
        manager_cluster.env.delete_job(namespace, name)


def test_switching_dispatch_on_stops_a_job_already_running_on_the_manager(manager_cluster, east_cluster, west_cluster):
    """``multiKueue.manager`` turned on in a stack whose jobs run: every ClusterQueue gains the
    AdmissionCheck, Kueue adds it to the admitted Workloads too, MultiKueue rejects it for a Job
    without ``spec.managedBy: kueue.x-k8s.io/multikueue``, and Kueue deactivates the job: its pods
    go. The change table says to turn it on with no job running (docs/operations.md)."""
    set_dispatch(manager_cluster, on=False)
    try:
        namespace, name = manager_cluster.submit_run("rl-training", parallelism=1)
        try:
            manager_cluster.env.expect_job_running(namespace, name, 1)
            dispatch(manager_cluster.kubeconfig, on=True)

            def stopped():
                workload = workload_of(manager_cluster, "Job", namespace, name)
                evicted = condition(workload, "Evicted")
                return (workload["spec"].get("active") is False and evicted.get("reason") == "DeactivatedDueToAdmissionCheck"
                        and not manager_cluster.env.job_pods(namespace, name))

            wait_for(stopped, what="Kueue deactivating the running job once its check is rejected", timeout=120)
        finally:
            manager_cluster.env.delete_job(namespace, name)
    finally:
        set_dispatch(manager_cluster, on=True)


DISPATCHED_JOB_SECONDS = 30
"""How long the job dispatched before the check comes off runs on its worker: long enough for the
check to come off first, short enough to see it end there."""


def test_switching_dispatch_off_leaves_a_dispatched_job_to_its_worker_unseen_by_the_manager(fleet, manager_cluster, east_cluster,
                                                                                           west_cluster):
    """``multiKueue.manager`` turned off while a job runs on a worker: the ClusterQueues lose the
    AdmissionCheck first (Pulumi deletes the MultiKueue objects after its updates), Kueue drops the
    check from the admitted Workload, and MultiKueue no longer follows it (Kueue 0.19.2,
    ``multikueue/workload.go``: a Workload without its check is skipped). The job runs to its end
    on the worker, but the manager never hears: its Job and Workload stay admitted, holding the
    team's quota, until deleted, and deleting them leaves the worker's copy. The change table says
    to turn it off with no job dispatched (docs/operations.md)."""
    run = submitted_run(manager_cluster.platform_object("Job", "rl-training"), unique("rl-training"), parallelism=1)
    run["spec"]["template"]["metadata"].setdefault("annotations", {})[COMPLETE_DELAY_ANNOTATION] = f"{DISPATCHED_JOB_SECONDS}s"
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    manager_cluster.env.apply(run)
    worker = None
    try:
        worker = fleet[dispatched_to(manager_cluster, "Job", namespace, name)]
        worker.env.expect_job_running(namespace, name, 1)
        set_dispatch(manager_cluster, on=False)

        def ended_on_the_worker() -> bool:
            job = worker.env.get("batch/v1", "Job", name, namespace) or {}
            return (job.get("status") or {}).get("succeeded") == 1

        wait_for(ended_on_the_worker, what=f"job {name} running to its end on {worker.stack}",
                 timeout=DISPATCHED_JOB_SECONDS + 60)

        def unseen_by_the_manager() -> bool:
            workload = workload_of(manager_cluster, "Job", namespace, name)
            job = manager_cluster.env.get("batch/v1", "Job", name, namespace)
            return (not (workload.get("status") or {}).get("admissionChecks")
                    and condition(workload, "Admitted").get("status") == "True"
                    and condition(workload, "Finished").get("status") != "True"
                    and not ((job or {}).get("status") or {}).get("succeeded")
                    and manager_cluster.env.job_pods(namespace, name) == [])

        holds_for(unseen_by_the_manager, seconds=10,
                  what=f"the manager's job {name} admitted, unfinished and without pods after its copy ended")
        manager_cluster.env.delete_job(namespace, name)
        assert worker.env.get("batch/v1", "Job", name, namespace) is not None, "the worker's copy outlives the manager's job"
    finally:
        manager_cluster.env.delete_job(namespace, name)
        if worker is not None:
            worker.env.delete_job(namespace, name)
        set_dispatch(manager_cluster, on=True)


def test_verify_fleet_passes_a_row_per_worker(manager_cluster):
    rows = fleet_rows(manager_cluster)
    assert {item: row.status for item, row in rows.items()} == {
        "multikueue-admission-check": "pass", "multikueue-worker/east": "pass", "multikueue-worker/west": "pass"}, rows
    # Read through the kubeconfig in the manager's Secret: the worker's queues are the manager's.
    assert "its ClusterQueues" in rows["multikueue-worker/east"].evidence, rows["multikueue-worker/east"].evidence


def test_simulate_fleet_reports_each_jobs_worker_its_wait_and_each_workers_use(fleet, tmp_path):
    import json

    import yaml

    from eks_gpu_training.local.local_fleet import FleetMember, FleetMembers
    from eks_gpu_training.local.simulate import simulate_fleet

    for running in fleet.values():
        running.cluster.supervisor.check()  # a controller that exited after a loss above: its log, not a replay's timeout
    members = FleetMembers("dev", FleetMember("manager", sum(WORKERS.values()), fleet["manager"].cluster.state),
                           tuple(FleetMember(name, WORKERS[name], fleet[name].cluster.state) for name in ("east", "west")))
    trace = tmp_path / "trace.yaml"
    # Four one-node jobs of ten minutes a minute apart: three run at once on research's three GPUs,
    # and research's quota of three on the manager holds the fourth until one ends.
    trace.write_text(yaml.safe_dump({"jobs": [{"name": f"fleet-{i}", "team": "research", "app": "rl-training", "kind": "Job",
                                               "nodes": 1, "duration": "10m", "submit": f"{i}m"} for i in range(4)]}))
    assert simulate_fleet(members, trace, speedup=20, out=tmp_path / "out", timeout=240) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {job["name"]: job["cluster"] in ("east", "west") for job in report["jobs"]} == {f"fleet-{i}": True for i in range(4)}
    clusters = {c["name"]: c for c in report["clusters"]}
    assert (set(clusters), sum(c["jobs"] for c in clusters.values())) == ({"east", "west"}, 4)
    assert {name: c["gpus"] for name, c in clusters.items()} == WORKERS
    assert all(0 < c["peak_gpus_used"] <= c["gpus"] for c in clusters.values())
    # The last job is admitted only once another ended (a sample, ten trace seconds apart, may see the end late).
    assert max(job["admitted"] for job in report["jobs"]) >= min(job["finished"] for job in report["jobs"]) - 30
    assert (tmp_path / "out" / "report.png").is_file()
