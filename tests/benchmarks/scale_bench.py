"""A fleet on the local control plane: prod's p5 pool grown to 1,000 nodes (8,000 GPUs), and 200
queued training jobs of 2 to 32 nodes admitted by the real Kueue and placed by the real scheduler.

    python tests/benchmarks/scale_bench.py [--nodes 1000] [--jobs 200] [--seed 7] [--stack prod]
        [--pull-delay 120] [--compare-ungated] [--results FILE]

It runs ``eks-gpu-training-local up prod --scale N`` (through ``LocalCluster``, its processes ended
with this one), waits for the health gate to admit every GPU node, deletes the stack's own training
jobs and submits every job at once (the two teams in turn, JobSets and Jobs mixed, each pod Ready
``--pull-delay`` s after it is bound, standing for its image pull, and completing 20 to 90 s after
that), sampling the cluster as ``simulate`` does. With ``--compare-ungated`` it then clears the
trace, restarts Kueue without ``waitForPodsReady`` (no readiness gating at all) and plays the same
trace on the same fleet again: ``ratio`` is the stack's admissions per second over that run's.
Goals: every job whole, one pod per node, in one layer-2 block, and in one layer-3 block when it
fits one (16 nodes); none admitted twice; the ratio at least 0.8; ``up`` within 2 min, verify within
10 s, peak memory of the cluster and the benchmark within 8 GiB. Prints a Markdown table, then one
JSON line of the figures (also written to ``--results``), and exits 1 when a goal is missed. Not
collected by pytest; needs the README's cluster test environment (Go builds cached, charts from a
mirror: ``EKS_GPU_TRAINING_CHARTS_MIRROR``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from eks_gpu_training.local.cluster import LocalCluster
from eks_gpu_training.local.platform import Applier
from eks_gpu_training.local.scale import SCALED_TOPOLOGY
from eks_gpu_training.local.simulate import TRACE_JOB_LABEL, Recorder, delete_jobs, delete_stack_jobs, job_objects, wait_fleet_admitted
from eks_gpu_training.local.trace import check_rows
from eks_gpu_training.platform.stack_files import locate_stack

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import record  # a sibling script, its folder first on the path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UP_GOAL_S, MEMORY_GOAL_BYTES, VERIFY_GOAL_S, RATIO_GOAL = 120.0, 8 * 2**30, 10.0, 0.8
CLEAR_TIMEOUT_S = 1800.0
PLACE_TIMEOUT_S = 120.0
STACK = "prod"
"""The stack whose p5 pool is grown (``--stack`` names another, or a variant's file, for a what-if)."""


def job_rows(count: int, seed: int) -> list[dict]:
    """``count`` jobs of 2 to 32 nodes, mostly small (as a fleet's mix is), the teams in turn."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible job mix, not a secret
    sizes = [2, 2, 4, 4, 4, 8, 8, 8, 16, 16, 24, 32]
    rows = []
    for i in range(count):
        team, app = (("pretraining", "rl-training"), ("research", "finetune"))[i % 2]
        rows.append({"name": f"job-{i:03d}", "team": team, "app": app, "kind": "JobSet" if i % 3 == 0 else "Job",
                     "nodes": rng.choice(sizes), "duration": rng.randint(20, 90), "submit": 0})
    return rows


class MemoryWatch(threading.Thread):
    """The largest sum of resident memory of the cluster's processes and this one, sampled."""

    def __init__(self, state: Path):
        super().__init__(daemon=True)
        self.state, self.peak, self.stopped = state, 0, threading.Event()

    def _pids(self) -> list[int]:
        import json

        pids = [os.getpid()]
        path = self.state / "pids.json"
        if path.is_file():
            try:
                pids += [int(entry["pid"]) for entry in json.loads(path.read_text()).values()]
            except (ValueError, KeyError):
                pass
        return pids

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            total = 0
            for pid in self._pids():
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
                except OSError:
                    continue
            self.peak = max(self.peak, total)


def preempted(result) -> bool:
    """Kueue evicted the job by its preemption policy: a team reclaiming the quota it lent, or a job
    of higher priority. The trace's teams borrow, so that is the teams' policy at work
    (docs/teams.md), not admission failing; the benchmark counts these apart."""
    return "Preempted" in result.eviction


def trace_pods(applier: Applier) -> dict[str, list]:
    """The trace's pods by job."""
    by_job: dict[str, list] = {}
    for pod in applier.core.list_pod_for_all_namespaces(label_selector=TRACE_JOB_LABEL).items:
        by_job.setdefault(pod.metadata.labels[TRACE_JOB_LABEL], []).append(pod)
    return by_job


def settled_pods(recorder: Recorder, applier: Applier, timeout: float = PLACE_TIMEOUT_S) -> dict[str, list]:
    """The trace's pods once every admitted job has a pod bound per node, or ``timeout`` passed:
    the last jobs admitted still had their pods behind Kueue's scheduling gates when the last
    admission was seen."""
    deadline = time.monotonic() + timeout
    while True:
        recorder.sample()
        by_job = trace_pods(applier)
        short = [name for name, result in recorder.results.items() if result.admitted is not None
                 and sum(1 for pod in by_job.get(name, []) if pod.spec.node_name) < result.nodes]
        if not short or time.monotonic() > deadline:
            return by_job
        time.sleep(2.0)


def check_jobs(recorder: Recorder, applier: Applier) -> list[str]:
    """What a job's placement got wrong: not whole, two pods on a node, beyond one block."""
    problems = []
    by_job = settled_pods(recorder, applier)
    for name, result in recorder.results.items():
        mine = by_job.get(name, [])
        nodes = [pod.spec.node_name for pod in mine if pod.spec.node_name]
        if result.admitted is None:
            problems.append(f"{name}: never admitted")
            continue
        if len(nodes) < result.nodes:
            problems.append(f"{name}: {len(nodes)} of {result.nodes} pods placed")
        if len(set(nodes)) != len(nodes):
            problems.append(f"{name}: two pods on one node")
        if len(result.layer2_blocks) > 1:
            problems.append(f"{name}: {result.nodes} nodes over {len(result.layer2_blocks)} layer-2 blocks")
        if result.nodes <= SCALED_TOPOLOGY.nodes_per_block and len(result.blocks) > 1:
            problems.append(f"{name}: {result.nodes} nodes over {len(result.blocks)} layer-3 blocks")
        if result.evicted and not preempted(result):
            problems.append(f"{name}: evicted after admission, admitted again ({result.eviction or 'no reason given'})")
    return problems


def time_verify(kubeconfig: Path) -> float:
    started = time.monotonic()
    subprocess.run([str(Path(sys.executable).parent / "eks-gpu-training-verify"), "--kubeconfig", str(kubeconfig)],
                   cwd=PROJECT_ROOT, check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def unreachable_nodes(applier: Applier) -> int:
    """Nodes the node lifecycle controller has tainted unreachable: their leases lapsed. On the
    simulator that is KWOK falling behind, and Kueue evicts the jobs on them."""
    from eks_gpu_training.local.recorder import cached_items

    return sum(1 for node in cached_items(applier.core.list_node)
               if any(t.get("key") == "node.kubernetes.io/unreachable" for t in node["spec"].get("taints") or []))


def play(applier: Applier, args, jobs, *, pull_delay: float, timeout: float, log) -> tuple[Recorder, float, int]:
    """Submit every job at once and sample until each is admitted or ``timeout`` passed; the
    recorder, the seconds from the first submission to the last admission and the most nodes seen
    unreachable at once."""
    recorder = Recorder(applier, jobs, speedup=1.0)
    unreachable = 0
    for job in jobs:
        for obj in job_objects(job, args, speedup=1.0, pull_delay_s=pull_delay):
            applier.apply(obj)
        recorder.submitted(job.name)
    submitted_s = recorder.now()
    log(f"{len(jobs)} jobs submitted")
    deadline = time.monotonic() + timeout
    said = time.monotonic()
    while time.monotonic() < deadline and any(r.admitted is None for r in recorder.results.values()):
        recorder.sample()
        if time.monotonic() - said >= 60:
            unreachable = max(unreachable, unreachable_nodes(applier))
            waiting = [r.name for r in recorder.results.values() if r.admitted is None]
            log(f"{len(jobs) - len(waiting)} of {len(jobs)} jobs admitted; waiting for {', '.join(waiting[:3])}"
                + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""))
            said = time.monotonic()
        time.sleep(1.0)
    recorder.sample()
    admitted = [r.admitted for r in recorder.results.values() if r.admitted is not None]
    unreachable = max(unreachable, unreachable_nodes(applier))
    return recorder, (max(admitted) - submitted_s) if admitted else 0.0, unreachable


def clear_trace(applier: Applier, log) -> None:
    """Delete the trace's jobs and wait until their pods and Kueue's Workloads are gone."""
    from kubernetes import client

    from eks_gpu_training.local.recorder import KUEUE_GROUP, KUEUE_VERSION, cached_items

    delete_jobs(applier, TRACE_JOB_LABEL)
    custom = client.CustomObjectsApi(applier.api_client)
    deadline = time.monotonic() + CLEAR_TIMEOUT_S
    said = time.monotonic()
    while True:
        pods = cached_items(applier.core.list_pod_for_all_namespaces, label_selector=TRACE_JOB_LABEL)
        workloads = cached_items(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads")
        if not pods and not workloads:
            log("trace cleared")
            return
        if time.monotonic() > deadline:
            left = [f"pod {p['metadata']['name']} {p['status'].get('phase')} {p['metadata'].get('finalizers')}" for p in pods[:3]]
            left += [f"workload {w['metadata']['name']} {w['metadata'].get('finalizers')} {w['metadata'].get('ownerReferences')}"
                     for w in workloads[:3]]
            raise RuntimeError(f"{len(pods)} pods and {len(workloads)} Workloads of the trace "
                               f"{CLEAR_TIMEOUT_S:.0f} s after their jobs' deletion: {left}")
        if time.monotonic() - said >= 60:
            log(f"clearing the trace: {len(pods)} pods and {len(workloads)} Workloads left")
            said = time.monotonic()
        time.sleep(2.0)


def ungate_kueue(cluster: LocalCluster) -> None:
    """Kueue restarted without ``waitForPodsReady``: admission with no readiness gating at all."""
    assert cluster.layout is not None
    configuration = yaml.safe_load(cluster.layout.kueue_config.read_text())
    configuration.pop("waitForPodsReady", None)
    cluster.layout.kueue_config.write_text(yaml.safe_dump(configuration, sort_keys=False))
    cluster.restart("kueue")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--stack", default=STACK, help="a stack name or stack file (default prod); its first GPU pool is grown")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up on admissions after this many seconds")
    parser.add_argument("--pull-delay", type=float, default=0.0, help="seconds from a pod's binding to its Ready (its image pull)")
    parser.add_argument("--compare-ungated", action="store_true", help="play the trace again with Kueue's readiness gating off")
    parser.add_argument("--results", type=Path, default=None, help="also write the JSON line's figures to this file")
    options = parser.parse_args()

    state = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    begun = time.monotonic()

    def log(line: str) -> None:
        """Each line with the seconds since the start, so the phases of ``up`` can be read off."""
        print(f"{time.monotonic() - begun:6.1f} s  {line}", file=sys.stderr)

    stack, located = options.stack, locate_stack(options.stack)
    cluster = LocalCluster(stack, state / "cluster", project_root=located.project_dir, scale=options.nodes,
                           attached=True, log=log)
    args = cluster.stack_args()
    jobs = check_rows(job_rows(options.jobs, options.seed), args, "scale_bench")
    memory = MemoryWatch(cluster.state)
    memory.start()
    load_before = os.getloadavg()
    started = time.monotonic()
    kubeconfig = cluster.up()
    up_s = time.monotonic() - started
    ungated_rate, ungated_problems = None, []
    try:
        applier = Applier(kubeconfig)
        # As simulate does: jobs submitted onto a half-checked fleet would find each block's nodes
        # coming free a few at a time.
        wait_fleet_admitted(applier, log, timeout=options.timeout)
        gated_s = time.monotonic() - started
        delete_stack_jobs(applier)
        recorder, span, unreachable = play(applier, args, jobs, pull_delay=options.pull_delay, timeout=options.timeout, log=log)
        admitted = [r for r in recorder.results.values() if r.admitted is not None]
        log(f"{len(admitted)} of {len(jobs)} jobs admitted; checking their placement, then timing verify")
        problems = check_jobs(recorder, applier)
        verify_s = time_verify(kubeconfig)
        rate = len(admitted) / max(span, 1e-9) if admitted else 0.0
        log(f"gated: {rate:.3f} admissions a second, verify {verify_s:.1f} s, {unreachable} nodes unreachable at "
            f"most, {len(problems)} placement problems: {'; '.join(problems[:10])}")
        for name, result in recorder.results.items():
            if result.refused:
                log(f"{name}: a pod waited for its assigned node ({result.refused})")
        if options.compare_ungated:
            clear_trace(applier, log)
            ungate_kueue(cluster)
            log("Kueue restarted without waitForPodsReady; the same trace again")
            ungated, ungated_span, _ = play(applier, args, jobs, pull_delay=options.pull_delay, timeout=options.timeout, log=log)
            ungated_admitted = [r for r in ungated.results.values() if r.admitted is not None]
            ungated_rate = len(ungated_admitted) / max(ungated_span, 1e-9) if ungated_admitted else 0.0
            ungated_problems = check_jobs(ungated, applier)
    finally:
        memory.stopped.set()
        cluster.down()
    load = os.getloadavg()
    all_admitted_s = span if len(admitted) == len(jobs) else None
    ratio = rate / ungated_rate if ungated_rate else None
    figures = {
        "nodes": options.nodes, "jobs": len(jobs), "pull_delay_s": options.pull_delay, "up_s": round(up_s, 1),
        "gated_s": round(gated_s, 1), "all_admitted_s": round(all_admitted_s, 1) if all_admitted_s is not None else None,
        "admissions_per_second": round(rate, 3),
        "ungated_admissions_per_second": round(ungated_rate, 3) if ungated_rate is not None else None,
        "ratio": round(ratio, 3) if ratio is not None else None,
        "jobs_split": sum(1 for r in recorder.results.values() if len(r.layer2_blocks) > 1
                          or (r.nodes <= SCALED_TOPOLOGY.nodes_per_block and len(r.blocks) > 1)),
        "jobs_admitted_twice": sum(1 for r in recorder.results.values() if r.evicted and not preempted(r)),
        "jobs_preempted": sum(1 for r in recorder.results.values() if preempted(r)),
        "jobs_waited_for_node": sum(1 for r in recorder.results.values() if r.refused),
        "pods_bound_max_s": round(max((r.pending_after_admission_s or 0.0 for r in recorder.results.values()), default=0.0), 1),
        "nodes_unreachable_peak": unreachable, "problems": len(problems), "ungated_problems": len(ungated_problems) if options.compare_ungated else None,
        "peak_memory_gib": round(memory.peak / 2**30, 2), "verify_s": round(verify_s, 1),
        "load_before": round(load_before[0], 1), "load_after": round(load[0], 1), "cores": os.cpu_count(),
    }
    rows = [
        (f"`up {located.name} --scale {options.nodes}` to every pod placed", f"{up_s:.0f} s", f"{UP_GOAL_S:.0f} s", up_s <= UP_GOAL_S),
        (f"all {len(jobs)} jobs admitted (as capacity frees)",
         f"{all_admitted_s:.0f} s" if all_admitted_s is not None else f"{len(admitted)} of {len(jobs)}",
         "-", all_admitted_s is not None),
        ("every GPU node through the health gate (from the start of `up`)", f"{gated_s:.0f} s", "-", True),
        (f"admissions per second, {options.pull_delay:g} s image pull", f"{rate:.2f}", "-", True),
        ("the same without readiness gating", f"{ungated_rate:.2f}" if ungated_rate is not None else "not run", "-", True),
        ("ratio", f"{ratio:.2f}" if ratio is not None else "-", f"{RATIO_GOAL}", ratio is None or ratio >= RATIO_GOAL),
        ("jobs whole, one pod per node, in one block, admitted once (preemptions apart)",
         "all" if not problems else f"{len(problems)} problems: " + "; ".join(problems[:5]), "all", not problems),
        ("longest wait from a job's admission to its last pod bound (Kueue's topology ungating, then the scheduler)",
         f"{figures['pods_bound_max_s']:.0f} s", "-", True),
        ("jobs with a pod that waited for its assigned node to be freed (kueue#10076), then bound there",
         f"{figures['jobs_waited_for_node']}", "-", True),
        ("jobs Kueue preempted for a team's reclaim or a higher priority, then admitted again",
         f"{sum(1 for r in recorder.results.values() if preempted(r))}", "-", True),
        ("peak memory, cluster and bench together", f"{memory.peak / 2**30:.1f} GiB", "8 GiB", memory.peak <= MEMORY_GOAL_BYTES),
        ("`eks-gpu-training-verify` on the fleet", f"{verify_s:.1f} s", f"{VERIFY_GOAL_S:.0f} s", verify_s <= VERIFY_GOAL_S),
    ]
    print(f"load average before {load_before[0]:.1f}, after {load[0]:.1f} (1 min), {os.cpu_count()} cores")
    print("| measure | figure | goal | met |\n|---|---|---|---|")
    for measure, figure, goal, met in rows:
        print(f"| {measure} | {figure} | {goal} | {'yes' if met else 'no'} |")
    line = json.dumps(figures)
    if options.results is not None:
        options.results.write_text(json.dumps(figures, indent=1) + "\n")
    columns = ["measure", "figure", "goal", "met"]
    note = f"{options.nodes} nodes, {len(jobs)} jobs, {options.pull_delay:g} s image pull per pod; the JSON line: {line}"
    print(f"results: {record('scale', columns, [[m, f, g, 'yes' if ok else 'no'] for m, f, g, ok in rows], note)}", file=sys.stderr)
    print(line)
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
