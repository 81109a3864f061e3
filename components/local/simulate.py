"""``eks-gpu-training-local simulate``: replay a job-mix trace on a local cluster of the stack, with
the real kube-scheduler, Kueue, JobSet and Trainer deciding, and report how long each job waited,
where it ran, and how busy each pool and queue was.

The cluster comes up as ``up`` brings it (``--scale`` grows the GPU pools first), the stack's own
training jobs are deleted so the trace alone is the load, and each row is created at its submit
time, divided by ``--speedup``. KWOK's simulated kubelets make a pod Ready ``--pull-delay`` seconds
after it is bound (standing for the image pull) and complete it the row's duration after that, both
divided alike: the pod carries KWOK's delay annotations, which the local cluster's timed stages
read (``control_plane.kwok_stages``). Nothing else is simulated: admission, preemption, borrowing
and placement are Kueue's and the scheduler's. ``recorder`` samples the cluster as it plays;
times in the report are the trace's, multiplied back by the speedup.

``simulate_fleet`` (``simulate --fleet``) replays on the manager of a running local fleet
(``local_fleet``): MultiKueue runs each job on one worker, and the report says which, how long
each job waited to be dispatched and how busy each worker was.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..platform.stack_files import locate_stack
from ..workloads.job_sets import train_job, training_jobset, training_runtime
from ..workloads.scheduling_policies import training_job_spec
from ..workloads.templates import training_job
from ..workloads.training_spec import COMPONENT_LABEL, TRAINING_COMPONENT
from .control_plane import COMPLETE_DELAY_ANNOTATION, PULL_DELAY_ANNOTATION
from .errors import LocalError
from .platform import Applier
from .recorder import KUEUE_GROUP, KUEUE_VERSION, TRACE_JOB_LABEL, JobResult, Recorder, Report, cached_items, was_admitted
from .simulation_report import table, write_report
from .trace import TraceJob, read_trace

if TYPE_CHECKING:
    from .cluster import LocalCluster
    from .local_fleet import FleetMembers

__all__ = ["JobResult", "Recorder", "Report", "was_admitted", "table", "write_report"]

MANAGED_BY_LABEL, SIMULATOR = "app.kubernetes.io/managed-by", "eks-gpu-training-simulate"
"""Who made a trace job (not Pulumi, as for the stack's own apps)."""
SAMPLE_SECONDS = 0.5
"""Seconds between reads of the cluster while the trace plays."""
STACK_JOB_KINDS = (("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"), ("trainer.kubeflow.org/v1alpha1", "TrainJob"))
"""What a stack's training apps run as, which the replay removes before it starts."""


class SimulationError(LocalError):
    """The replay could not run to its end."""


def job_objects(job: TraceJob, args: GpuTrainingPlatformArgs, speedup: float, pull_delay_s: float = 0.0) -> list[dict[str, Any]]:
    """The objects that run one trace row: a copy of its app with the row's name, nodes, namespace,
    kind and priority (a TrainJob with its own TrainingRuntime), each pod Ready ``pull_delay_s``
    after it is bound (its image pull) and completing the row's duration after that, both divided
    by ``speedup``."""
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
            annotations = metadata.setdefault("annotations", {})
            annotations[COMPLETE_DELAY_ANNOTATION] = delay
            if pull_delay_s > 0:
                annotations[PULL_DELAY_ANNOTATION] = f"{pull_delay_s / speedup:.3f}s"
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
    return delete_jobs(applier, f"{COMPONENT_LABEL}={TRAINING_COMPONENT}")


def delete_jobs(applier: Applier, selector: str) -> list[str]:
    """Delete the Jobs, JobSets and TrainJobs the label ``selector`` selects (a JobSet's or TrainJob's
    children with their owner); the names deleted."""
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    deleted = []
    for api_version, kind in STACK_JOB_KINDS:
        try:
            resource = applier.resource({"apiVersion": api_version, "kind": kind})
        except ResourceNotFoundError:
            continue  # a job API the stack does not install
        found = resource.get(label_selector=selector)
        for item in found.items:
            if any(ref.get("kind") in ("JobSet", "TrainJob") for ref in item.metadata.get("ownerReferences") or []):
                continue  # deleted with its owner
            resource.delete(name=item.metadata.name, namespace=item.metadata.namespace,
                            body={"propagationPolicy": "Background"})
            deleted.append(f"{kind} {item.metadata.namespace}/{item.metadata.name}")
    return deleted


def replay(applier: Applier, args: GpuTrainingPlatformArgs, jobs: list[TraceJob], *, speedup: float,
           timeout: float, log: Callable[[str], None], pull_delay_s: float = 0.0,
           workers: Optional[Mapping[str, Applier]] = None) -> tuple[Recorder, bool]:
    """Create each row's objects at its submit time and sample until every job finished or
    ``timeout`` real seconds passed; the recorder and whether every job finished. ``workers``: a
    MultiKueue manager's, where the jobs run."""
    recorder = Recorder(applier, jobs, speedup, workers)
    queue = list(jobs)
    deadline = time.monotonic() + timeout
    last_log = time.monotonic()
    while time.monotonic() < deadline:
        while queue and queue[0].submit_s <= recorder.now():
            job = queue.pop(0)
            for obj in job_objects(job, args, speedup, pull_delay_s):
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

    def workloads() -> list[dict[str, Any]]:
        return cached_items(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads")

    if not _settles(lambda: not workloads(), STACK_JOBS_GONE_SECONDS):
        left = [described_workload(w) for w in workloads()]
        raise SimulationError("Kueue still holds quota for jobs a minute after their deletion: " + "; ".join(left[:5])
                              + (f" and {len(left) - 5} more" if len(left) > 5 else ""), "read Kueue's log in the state folder")


def described_workload(workload: dict[str, Any]) -> str:
    """A Workload left behind, in words: its name, owner, finalizers and true conditions."""
    meta = workload["metadata"]
    owners = ", ".join(f"{o['kind']} {o['name']}" for o in meta.get("ownerReferences") or []) or "no owner"
    true = [c["type"] for c in (workload.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return (f"Workload {meta['namespace']}/{meta['name']} of {owners}, finalizers {meta.get('finalizers') or []}, "
            f"conditions {true}" + (", being deleted" if meta.get("deletionTimestamp") else ""))


GATED_NODES_SECONDS_PER_NODE = 1.0
"""How long the replay waits, per GPU node, for the health gate to admit the fleet (at least a
minute): its checks run a few nodes at a time, and a job admitted onto a half-admitted fleet would
wait for reasons the trace does not hold."""


def wait_fleet_admitted(applier: Applier, log: Callable[[str], None], timeout: Optional[float] = None) -> None:
    """Until no GPU node carries the health gate's startup taint, for ``timeout`` seconds (default:
    ``GATED_NODES_SECONDS_PER_NODE`` per gated node, at least a minute)."""
    from kubernetes import client

    from ..facts.gpu_nodes import gpu_node_selector
    from ..healthgate.decide import has_taint
    from ..healthgate.gate_settings import STARTUP_TAINT_KEY

    core = client.CoreV1Api(applier.api_client)
    selector = ",".join(f"{key}={value}" for key, value in gpu_node_selector().items())

    def gated() -> list[str]:
        return [n["metadata"]["name"] for n in cached_items(core.list_node, label_selector=selector)
                if has_taint(n, STARTUP_TAINT_KEY)]

    waiting = gated()
    if not waiting:
        return
    log(f"waiting for the health gate to admit {len(waiting)} GPU node(s) before the replay")
    if not _settles(lambda: not gated(), timeout if timeout is not None else max(60.0, GATED_NODES_SECONDS_PER_NODE * len(waiting))):
        still = gated()
        raise SimulationError(f"the health gate has not admitted {len(still)} GPU node(s): {', '.join(still[:5])}",
                              "read the health gate's log in the state folder")


def simulate(cluster: "LocalCluster", trace: Path, *, speedup: float, out: Path, timeout: float, keep: bool = False,
             pull_delay_s: float = 0.0) -> int:
    """Replay ``trace`` on a local cluster of ``cluster``'s stack and write its report to ``out``;
    print the table. 0 when every job finished within ``timeout``, else 1."""
    _check_options(speedup, pull_delay_s)
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
        recorder, complete = replay(applier, args, jobs, speedup=speedup, timeout=timeout, log=cluster.log,
                                    pull_delay_s=pull_delay_s)
        report = recorder.report(cluster.stack, cluster.scale, trace.name, complete, pull_delay_s)
    finally:
        if not keep:
            cluster.down()
    return _publish(report, out)


def _check_options(speedup: float, pull_delay_s: float) -> None:
    problems = [Problem("--speedup", f"must be above 0; got {speedup:g}")] if not speedup > 0 else []
    if pull_delay_s < 0:
        problems.append(Problem("--pull-delay", f"must be 0 or more seconds; got {pull_delay_s:g}"))
    if problems:
        raise ConfigError(problems)


def _publish(report: Report, out: Path) -> int:
    """Print the table, write ``report.json`` and ``report.png``; 0 when every job finished, else 1."""
    for line in table(report):
        print(line)
    for written in write_report(report, out):
        print(f"wrote {written}", file=sys.stderr)
    return 0 if report.complete else 1


def manager_args(members: "FleetMembers") -> GpuTrainingPlatformArgs:
    """The manager's checked arguments, from the stack file its cluster was started with."""
    recorded = json.loads((members.manager.state / "stack.json").read_text())
    return locate_stack(Path(recorded["stackFile"])).platform_args()


def _clear(clusters: Mapping[str, Applier], selector: str, log: Callable[[str], None]) -> None:
    """Delete the jobs ``selector`` selects on each cluster in turn (the manager first: MultiKueue
    deletes its copies on the workers) and wait until each one's Kueue released their quota."""
    for name, applier in clusters.items():
        for deleted in delete_jobs(applier, selector):
            log(f"[{name}] deleted {deleted}")
        _wait_stack_jobs_gone(applier)


def simulate_fleet(members: "FleetMembers", trace: Path, *, speedup: float, out: Path, timeout: float,
                   pull_delay_s: float = 0.0, log: Callable[[str], None] = print) -> int:
    """Replay ``trace`` on the manager of a running local fleet, every job dispatched by MultiKueue
    to a worker, and write the report to ``out``; print the table. The stack's own jobs and an earlier
    replay's are deleted first, this one's at the end; the fleet keeps running. 0 when every job
    finished within ``timeout``, else 1."""
    _check_options(speedup, pull_delay_s)
    args = manager_args(members)
    jobs = read_trace(trace, args)
    manager = Applier(members.manager.kubeconfig)
    workers = {worker.name: Applier(worker.kubeconfig) for worker in members.workers}
    clusters = {members.manager.name: manager, **workers}
    _clear(clusters, f"{COMPONENT_LABEL}={TRAINING_COMPONENT}", log)
    _clear(clusters, TRACE_JOB_LABEL, log)
    for applier in workers.values():
        wait_fleet_admitted(applier, log)
    log(f"replaying {len(jobs)} jobs of {trace} on the manager at {speedup:g}x, dispatched to {', '.join(workers)}")
    try:
        recorder, complete = replay(manager, args, jobs, speedup=speedup, timeout=timeout, log=log, pull_delay_s=pull_delay_s,
                                    workers=workers)
        report = recorder.report(members.stack, None, trace.name, complete, pull_delay_s)
    finally:
        delete_jobs(manager, TRACE_JOB_LABEL)
    return _publish(report, out)
