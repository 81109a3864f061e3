"""``eks-gpu-training-local simulate``: replay a job-mix trace on a local cluster of the stack, with
the real kube-scheduler, Kueue, JobSet and Trainer deciding, and report how long each job waited,
where it ran, and how busy each pool and queue was.

The cluster comes up as ``up`` brings it (``--scale`` grows the GPU pools first), the stack's own
training jobs are deleted so the trace alone is the load, and each row is created at its submit
time, divided by ``--speedup``. KWOK's simulated kubelets complete a pod the row's duration
(divided alike) after it runs: the pod carries KWOK's delay annotation
(``pod-complete.stage.kwok.x-k8s.io/delay``), which the local cluster's timed pod-complete stage
reads (``control_plane.kwok_stages``). Nothing else is simulated: admission, preemption,
borrowing and placement are Kueue's and the scheduler's.

A sample every ``SAMPLE_SECONDS`` reads Kueue's Workloads (admitted, finished) and the trace's
pods (where they run). Times in the report are the trace's: seconds from the start of the replay,
multiplied back by the speedup, so they read as the real fleet's would, to within a sample.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..config import GpuTrainingPlatformArgs
from ..facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, KARPENTER_NODEPOOL_LABEL, network_layer_key
from ..healthgate.kube import list_items
from ..workloads.job_sets import train_job, training_jobset, training_runtime
from ..workloads.scheduling_policies import training_job_spec
from ..workloads.templates import training_job
from ..workloads.training_spec import COMPONENT_LABEL, TRAINING_COMPONENT
from .control_plane import COMPLETE_DELAY_ANNOTATION
from .errors import LocalError
from .platform import Applier

if TYPE_CHECKING:
    from .cluster import LocalCluster
from .trace import TraceJob, read_trace

TRACE_JOB_LABEL = "eks-gpu-training/trace-job"
"""The trace row a job and its pods belong to."""
MANAGED_BY_LABEL, SIMULATOR = "app.kubernetes.io/managed-by", "eks-gpu-training-simulate"
"""Who made a trace job (not Pulumi, as for the stack's own apps)."""
SAMPLE_SECONDS = 0.5
"""Seconds between reads of the cluster while the trace plays."""
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
STACK_JOB_KINDS = (("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"), ("trainer.kubeflow.org/v1alpha1", "TrainJob"))
"""What a stack's training apps run as, which the replay removes before it starts."""


class SimulationError(LocalError):
    """The replay could not run to its end."""


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
    """The layer-3 network nodes the job's pods ran under (empty on nodes without a topology)."""
    layer2_blocks: list[str] = field(default_factory=list)
    pending_after_admission_s: Optional[float] = None
    """How long after admission the last of its pods was still unbound to a node."""
    wait_reason: str = ""
    """Kueue's last word on why the job was not admitted yet (its Workload's QuotaReserved message)."""


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

    def as_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "jobs"}, "jobs": [asdict(job) for job in self.jobs]}


def job_objects(job: TraceJob, args: GpuTrainingPlatformArgs, speedup: float) -> list[dict[str, Any]]:
    """The objects that run one trace row: a copy of its app with the row's name, nodes, namespace,
    kind and priority (a TrainJob with its own TrainingRuntime), each pod completing after the
    row's duration divided by ``speedup``."""
    app = next(a for a in args.scheduling.training_apps if a.name == job.app and a.job is not None)
    assert app.job is not None  # noqa: S101 - read_trace takes only apps with a job
    # Submitted to the queue that admits (an app the stack holds with job.suspend waits in the held one).
    runs = app.job.model_copy(update={"suspend": False, "revision": 1})
    copied = app.model_copy(update={"name": job.name, "nodes": job.nodes, "namespace": job.namespace,
                                    "kind": job.kind, "priority_class": job.priority, "job": runs})
    spec = training_job_spec(copied, args)
    if job.kind == "Job":
        objects = [training_job(spec)]
    elif job.kind == "JobSet":
        objects = [training_jobset(spec)]
    else:
        objects = [training_runtime(spec), train_job(spec)]
    delay = f"{max(job.duration_s / speedup, 0.001):.3f}s"
    for obj in objects:
        labels = obj["metadata"].setdefault("labels", {})
        labels[TRACE_JOB_LABEL] = job.name
        labels[MANAGED_BY_LABEL] = SIMULATOR
        for template in _pod_templates(obj):
            metadata = template.setdefault("metadata", {})
            metadata.setdefault("labels", {})[TRACE_JOB_LABEL] = job.name
            metadata.setdefault("annotations", {})[COMPLETE_DELAY_ANNOTATION] = delay
    return objects


def _pod_templates(value: Any) -> list[dict[str, Any]]:
    """Every pod template in an object (a ``template`` whose ``spec`` has ``containers``)."""
    found = []
    if isinstance(value, dict):
        template = value.get("template")
        if isinstance(template, dict) and "containers" in (template.get("spec") or {}):
            found.append(template)
        for child in value.values():
            found.extend(_pod_templates(child))
    elif isinstance(value, list):
        for child in value:
            found.extend(_pod_templates(child))
    return found


def delete_stack_jobs(applier: Applier) -> list[str]:
    """Delete the stack's own training jobs (label ``app.kubernetes.io/component=training``), so the
    trace alone loads the fleet; the names deleted."""
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    deleted = []
    for api_version, kind in STACK_JOB_KINDS:
        try:
            resource = applier.resource({"apiVersion": api_version, "kind": kind})
        except ResourceNotFoundError:
            continue  # a job API the stack does not install
        found = resource.get(label_selector=f"{COMPONENT_LABEL}={TRAINING_COMPONENT}")
        for item in found.items:
            if any(ref.get("kind") in ("JobSet", "TrainJob") for ref in item.metadata.get("ownerReferences") or []):
                continue  # deleted with its owner
            resource.delete(name=item.metadata.name, namespace=item.metadata.namespace,
                            body={"propagationPolicy": "Background"})
            deleted.append(f"{kind} {item.metadata.namespace}/{item.metadata.name}")
    return deleted


@dataclass
class _Node:
    pool: str
    gpus: int
    layer3: str
    layer2: str


class Recorder:
    """What the cluster shows of the trace, sample by sample."""

    def __init__(self, applier: Applier, jobs: list[TraceJob], speedup: float):
        from kubernetes import client

        self.applier, self.speedup = applier, speedup
        self.custom = client.CustomObjectsApi(applier.api_client)
        self.jobs = {job.name: job for job in jobs}
        self.results = {job.name: JobResult(job.name, job.team, job.namespace, job.kind, job.pool, job.nodes, job.gpus)
                        for job in jobs}
        self.nodes: dict[str, _Node] = {}
        self.pool_samples: dict[str, list[list[float]]] = {}
        self.team_samples: dict[str, list[list[float]]] = {}
        self.started = time.monotonic()
        self._nodes_read = -math.inf

    def now(self) -> float:
        """Trace seconds since the replay started."""
        return (time.monotonic() - self.started) * self.speedup

    def _read_nodes(self) -> None:
        for node in _items(self.applier.core.list_node):
            labels = node["metadata"].get("labels") or {}
            pool = labels.get(GPU_POOL_KEY) or labels.get(KARPENTER_NODEPOOL_LABEL)
            gpus = int((node.get("status") or {}).get("allocatable", {}).get(GPU_RESOURCE, 0) or 0)
            if pool and gpus:
                self.nodes[node["metadata"]["name"]] = _Node(pool, gpus, labels.get(network_layer_key(3), ""),
                                                             labels.get(network_layer_key(2), ""))
        self._nodes_read = time.monotonic()

    def submitted(self, name: str) -> None:
        self.results[name].submitted = self.now()

    def sample(self) -> None:
        if time.monotonic() - self._nodes_read > 5:
            self._read_nodes()
        now = self.now()
        workloads = _items(self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads")
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
            if result.admitted is None and _was_admitted(found):
                # Admitted by now at the latest. A workload can end with its reservation unset as it
                # finishes (Kueue 0.19), and the samples may never have caught it Admitted.
                result.admitted = now
                result.wait_s = max(0.0, now - (result.submitted or 0.0))
            if conditions.get("Finished") == "True" and result.finished is None:
                result.finished = now
        pods = _items(self.applier.core.list_pod_for_all_namespaces, label_selector=TRACE_JOB_LABEL)
        used: dict[str, int] = {}
        running_gpus: dict[str, int] = {}
        unbound: set[str] = set()
        for pod in pods:
            name = (pod["metadata"].get("labels") or {}).get(TRACE_JOB_LABEL, "")
            found = self.results.get(name)
            if found is None:
                continue
            node_name, phase = pod["spec"].get("nodeName"), (pod.get("status") or {}).get("phase")
            if not node_name:
                if phase == "Pending":
                    unbound.add(name)
                continue
            node = self.nodes.get(node_name)
            if node is None:
                self._read_nodes()
                node = self.nodes.get(node_name)
            if node is not None:
                if node.layer3 and node.layer3 not in found.blocks:
                    found.blocks.append(node.layer3)
                if node.layer2 and node.layer2 not in found.layer2_blocks:
                    found.layer2_blocks.append(node.layer2)
                if phase in ("Pending", "Running"):
                    gpus = self.jobs[name].gpus_per_node
                    used[node.pool] = used.get(node.pool, 0) + gpus
                    key = self.jobs[name].team or self.jobs[name].namespace
                    running_gpus[key] = running_gpus.get(key, 0) + gpus
        for name in admitted:
            result = self.results[name]
            if name in unbound and result.admitted is not None:
                result.pending_after_admission_s = now - result.admitted
        for pool in {node.pool for node in self.nodes.values()} | set(used):
            self.pool_samples.setdefault(pool, []).append([round(now, 1), used.get(pool, 0), self._pool_gpus(pool)])
        for key in {job.team or job.namespace for job in self.jobs.values()}:
            queued = sum(1 for job in self.jobs.values() if (job.team or job.namespace) == key
                         and self.results[job.name].submitted is not None and self.results[job.name].admitted is None)
            self.team_samples.setdefault(key, []).append([round(now, 1), queued, running_gpus.get(key, 0)])

    def _pool_gpus(self, pool: str) -> int:
        return sum(node.gpus for node in self.nodes.values() if node.pool == pool)

    def done(self) -> bool:
        return all(result.finished is not None for result in self.results.values())

    def report(self, stack: str, scale: Optional[int], trace: str, complete: bool) -> Report:
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
                      round(time.monotonic() - self.started, 1), complete)


def _items(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as the API server's JSON: a thousand nodes read in a fraction of the
    time the client's models take to build. Served from the API server's watch cache
    (``resourceVersion`` 0), as a controller's informer would read: each sample a moment old
    at most, and no read of etcd every second beside the fleet being measured."""
    return list_items(call, *args, resource_version="0", **kwargs)


def _was_admitted(found: list[dict[str, Any]]) -> bool:
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


def replay(applier: Applier, args: GpuTrainingPlatformArgs, jobs: list[TraceJob], *, speedup: float,
           timeout: float, log: Callable[[str], None]) -> tuple[Recorder, bool]:
    """Create each row's objects at its submit time and sample until every job finished or
    ``timeout`` real seconds passed; the recorder and whether every job finished."""
    recorder = Recorder(applier, jobs, speedup)
    queue = list(jobs)
    deadline = time.monotonic() + timeout
    last_log = time.monotonic()
    while time.monotonic() < deadline:
        while queue and queue[0].submit_s <= recorder.now():
            job = queue.pop(0)
            for obj in job_objects(job, args, speedup):
                applier.apply(obj)
            recorder.submitted(job.name)
        recorder.sample()
        if not queue and recorder.done():
            return recorder, True
        if time.monotonic() - last_log > 15:
            finished = sum(1 for r in recorder.results.values() if r.finished is not None)
            admitted = sum(1 for r in recorder.results.values() if r.admitted is not None)
            log(f"trace at {recorder.now() / 60:.0f} min: {len(jobs) - len(queue)} submitted, {admitted} admitted, {finished} finished")
            last_log = time.monotonic()
        time.sleep(SAMPLE_SECONDS)
    return recorder, False


def table(report: Report) -> list[str]:
    """The report as text: a row per job, then per pool and per team."""
    def minutes(value: Optional[float]) -> str:
        return "-" if value is None else f"{value / 60:.1f}"

    lines = [f"trace {report.trace} on stack {report.stack}" + (f" at --scale {report.scale}" if report.scale else "")
             + f", {report.speedup:g}x speed, {report.wall_s:.0f} s wall" + ("" if report.complete else ", NOT every job finished"),
             "", f"{'job':<28} {'team':<14} {'kind':<8} {'nodes':>5} {'submit':>7} {'admit':>7} {'wait':>7} {'end':>7} blocks (min)"]
    for job in report.jobs:
        blocks = f"{len(job.blocks)} L3" + (f" / {len(job.layer2_blocks)} L2" if job.layer2_blocks else "") if job.blocks else "-"
        lines.append(f"{job.name:<28} {(job.team or job.namespace):<14} {job.kind:<8} {job.nodes:>5} {minutes(job.submitted):>7} "
                     f"{minutes(job.admitted):>7} {minutes(job.wait_s):>7} {minutes(job.finished):>7} {blocks}")
    lines += ["", f"{'pool':<20} {'GPUs':>6} {'mean use':>9} {'peak used':>10}"]
    for pool in report.pools:
        lines.append(f"{pool['name']:<20} {pool['gpus']:>6} {pool['mean_utilization']:>9.0%} {pool['peak_gpus_used']:>10}")
    lines += ["", f"{'team':<20} {'jobs':>5} {'mean wait':>10} {'max wait':>9} {'max queued':>11} (min)"]
    for team in report.teams:
        lines.append(f"{team['name']:<20} {team['jobs']:>5} {minutes(team['mean_wait_s']):>10} {minutes(team['max_wait_s']):>9} {team['max_queued']:>11}")
    return lines


def write_report(report: Report, out: Path) -> list[Path]:
    """``report.json`` and ``report.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "report.json"
    json_path.write_text(json.dumps(report.as_json(), indent=1) + "\n")
    png_path = out / "report.png"
    plot(report, png_path)
    return [json_path, png_path]


def plot(report: Report, path: Path) -> None:
    """Three panels over trace time: each pool's GPUs in use (of its nodes present: a Karpenter
    pool's come and go), each team's queued jobs, and each job's wait against its submit time."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import MaxNLocator

    figure, (use, queued, waits) = pyplot.subplots(3, 1, figsize=(9, 9), sharex=True, constrained_layout=True)
    for pool in report.pools:
        samples = pool["samples"]
        use.step([s[0] / 60 for s in samples], [100 * s[1] / s[2] if s[2] else 0 for s in samples], where="post",
                 label=f"{pool['name']} ({pool['gpus']} GPUs, mean {pool['mean_utilization']:.0%})")
    use.set_ylabel("GPUs in use (%)")
    use.set_ylim(0, 105)
    use.legend(loc="lower right", fontsize="small")
    for team in report.teams:
        samples = team["samples"]
        queued.step([s[0] / 60 for s in samples], [s[1] for s in samples], where="post", label=team["name"])
    queued.set_ylabel("jobs queued")
    queued.yaxis.set_major_locator(MaxNLocator(integer=True))
    queued.legend(loc="upper right", fontsize="small")
    keys = sorted({job.team or job.namespace for job in report.jobs})
    for key in keys:
        mine = [job for job in report.jobs if (job.team or job.namespace) == key and job.submitted is not None and job.wait_s is not None]
        waits.scatter([job.submitted / 60 for job in mine if job.submitted is not None],
                      [(job.wait_s or 0) / 60 for job in mine], s=[8 + 2 * job.nodes for job in mine], label=key, alpha=0.7)
    waits.set_ylabel("wait (min)")
    waits.set_xlabel("trace time (min); marker size: nodes")
    waits.legend(loc="best", fontsize="small")
    title = f"{report.trace} on {report.stack}" + (f", --scale {report.scale}" if report.scale else "")
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


STACK_JOBS_GONE_SECONDS = 60
"""How long the replay waits for Kueue to release the quota of the stack's own deleted jobs."""


def _settles(done: Callable[[], bool], seconds: float) -> bool:
    """Whether ``done`` holds within ``seconds``, asked every ``SAMPLE_SECONDS``."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(SAMPLE_SECONDS)
    return True


def _wait_stack_jobs_gone(applier: Applier) -> None:
    from kubernetes import client

    custom = client.CustomObjectsApi(applier.api_client)
    if not _settles(lambda: not _items(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads"),
                    STACK_JOBS_GONE_SECONDS):
        raise SimulationError("the stack's own training jobs still hold Kueue quota a minute after their deletion",
                              "read Kueue's log in the state folder")


GATED_NODES_SECONDS_PER_NODE = 1.0
"""How long the replay waits, per GPU node, for the health gate to admit the fleet (at least a
minute): its checks run a few nodes at a time, and a job admitted onto a half-admitted fleet would
wait for reasons the trace does not hold."""


def wait_fleet_admitted(applier: Applier, log: Callable[[str], None]) -> None:
    """Until no GPU node carries the health gate's startup taint."""
    from kubernetes import client

    from ..facts.gpu_nodes import gpu_node_selector
    from ..healthgate.decide import has_taint
    from ..healthgate.settings import STARTUP_TAINT_KEY

    core = client.CoreV1Api(applier.api_client)
    selector = ",".join(f"{key}={value}" for key, value in gpu_node_selector().items())

    def gated() -> list[str]:
        return [n["metadata"]["name"] for n in _items(core.list_node, label_selector=selector)
                if has_taint(n, STARTUP_TAINT_KEY)]

    waiting = gated()
    if not waiting:
        return
    log(f"waiting for the health gate to admit {len(waiting)} GPU node(s) before the replay")
    if not _settles(lambda: not gated(), max(60.0, GATED_NODES_SECONDS_PER_NODE * len(waiting))):
        still = gated()
        raise SimulationError(f"the health gate has not admitted {len(still)} GPU node(s): {', '.join(still[:5])}",
                              "read the health gate's log in the state folder")


def simulate(cluster: "LocalCluster", trace: Path, *, speedup: float, out: Path, timeout: float, keep: bool = False) -> int:
    """Replay ``trace`` on a local cluster of ``cluster``'s stack and write its report to ``out``;
    print the table. 0 when every job finished within ``timeout``, else 1."""
    import sys

    if not speedup > 0:
        from ..config import ConfigError, Problem

        raise ConfigError([Problem("--speedup", f"must be above 0; got {speedup:g}")])
    # The trace is checked against the (scaled) stack before anything starts.
    args = cluster.stack_args()
    jobs = read_trace(trace, args)
    cluster.attached = not keep
    kubeconfig = cluster.up()
    try:
        applier = Applier(kubeconfig)
        for deleted in delete_stack_jobs(applier):
            cluster.log(f"deleted the stack's own {deleted}: the trace alone loads the fleet")
        _wait_stack_jobs_gone(applier)
        wait_fleet_admitted(applier, cluster.log)
        cluster.log(f"replaying {len(jobs)} jobs of {trace} at {speedup:g}x")
        recorder, complete = replay(applier, args, jobs, speedup=speedup, timeout=timeout, log=cluster.log)
        report = recorder.report(cluster.stack, cluster.scale, trace.name, complete)
    finally:
        if not keep:
            cluster.down()
    for line in table(report):
        print(line)
    for written in write_report(report, out):
        print(f"wrote {written}", file=sys.stderr)
    return 0 if complete else 1
