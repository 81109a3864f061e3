"""A fleet on the local control plane: prod's p5 pool grown to 1,000 nodes (8,000 GPUs), and 200
queued training jobs of 2 to 32 nodes admitted by the real Kueue and placed by the real scheduler.

    python tests/benchmarks/scale_bench.py [--nodes 1000] [--jobs 200] [--seed 7] [--stack prod]

It runs ``eks-gpu-training-local up prod --scale N`` (through ``LocalCluster``, its processes ended
with this one), waits for the health gate to admit every GPU node (as ``simulate`` does), deletes
the stack's own training jobs, submits every job at once (the two teams in turn, JobSets and Jobs
mixed, each pod completing 20 to 90 s after it runs, so capacity frees as jobs end) and samples
the cluster as ``simulate`` does. Then it times ``eks-gpu-training-verify`` against the fleet. It
reports:

- the time ``up`` takes to every platform pod placed (goal: 2 min);
- the time until every job has been admitted, and admissions per second (goal: 10 min);
- every job admitted whole: as many pods as nodes, on as many distinct nodes, all bound within
  ``PENDING_BOUND_S`` of admission (no pod Pending past its admission);
- every job under one layer-2 block, and under one layer-3 block when it fits one (16 nodes);
- the peak memory of the cluster's processes together, this one included (goal: 8 GiB);
- verify's wall time (goal: 10 s);
- the load average while it ran (the machine is not idle if other work ran beside it).

Prints a Markdown table and exits 1 when a goal is missed. Not collected by pytest. Needs the
README's cluster test environment (Go builds cached, charts from a mirror:
``EKS_GPU_TRAINING_CHARTS_MIRROR``).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eks_gpu_training.local.cluster import LocalCluster
from eks_gpu_training.local.platform import Applier
from eks_gpu_training.local.scale import SCALED_TOPOLOGY
from eks_gpu_training.local.simulate import Recorder, delete_stack_jobs, job_objects, wait_fleet_admitted
from eks_gpu_training.local.trace import check_rows
from eks_gpu_training.platform.stack_files import locate_stack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UP_GOAL_S, ADMITTED_GOAL_S, MEMORY_GOAL_BYTES, VERIFY_GOAL_S = 120.0, 600.0, 8 * 2**30, 10.0
PENDING_BOUND_S = 30.0
"""How long after its admission a job's pods may wait for the scheduler: Kueue admits onto nodes
it has counted free, so a pod still Pending past this is one the scheduler refused."""
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


def check_jobs(recorder: Recorder, applier: Applier) -> list[str]:
    """What a job's placement got wrong: not whole, two pods on a node, beyond one block."""
    problems = []
    pods = applier.core.list_pod_for_all_namespaces(label_selector="eks-gpu-training/trace-job").items
    by_job: dict[str, list] = {}
    for pod in pods:
        by_job.setdefault(pod.metadata.labels["eks-gpu-training/trace-job"], []).append(pod)
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
        if (result.pending_after_admission_s or 0) > PENDING_BOUND_S:
            problems.append(f"{name}: a pod still Pending {result.pending_after_admission_s:.0f} s after admission")
    return problems


def time_verify(kubeconfig: Path) -> float:
    started = time.monotonic()
    subprocess.run([str(Path(sys.executable).parent / "eks-gpu-training-verify"), "--kubeconfig", str(kubeconfig)],
                   cwd=PROJECT_ROOT, check=False, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--stack", default=STACK, help="a stack name or stack file (default prod); its first GPU pool is grown")
    parser.add_argument("--timeout", type=float, default=1200.0, help="give up on admissions after this many seconds")
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
    try:
        applier = Applier(kubeconfig)
        # As simulate does: jobs submitted onto a half-checked fleet would find each block's nodes
        # coming free a few at a time, and a preferred topology request spreads rather than waits.
        wait_fleet_admitted(applier, log)
        gated_s = time.monotonic() - started
        delete_stack_jobs(applier)
        recorder = Recorder(applier, jobs, speedup=1.0)
        for job in jobs:
            for obj in job_objects(job, args, speedup=1.0):
                applier.apply(obj)
            recorder.submitted(job.name)
        submitted_s = recorder.now()
        log(f"{len(jobs)} jobs submitted")
        deadline = time.monotonic() + options.timeout
        said = time.monotonic()
        while time.monotonic() < deadline and any(r.admitted is None for r in recorder.results.values()):
            recorder.sample()
            if time.monotonic() - said >= 60:
                waiting = [r.name for r in recorder.results.values() if r.admitted is None]
                log(f"{len(jobs) - len(waiting)} of {len(jobs)} jobs admitted; waiting for {', '.join(waiting[:3])}"
                    + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""))
                said = time.monotonic()
            time.sleep(1.0)
        recorder.sample()
        admitted = [r.admitted for r in recorder.results.values() if r.admitted is not None]
        all_admitted_s = max(admitted) if len(admitted) == len(jobs) else None
        log(f"{len(admitted)} of {len(jobs)} jobs admitted; checking their placement, then timing verify")
        problems = check_jobs(recorder, applier)
        verify_s = time_verify(kubeconfig)
    finally:
        memory.stopped.set()
        cluster.down()
    load = os.getloadavg()
    throughput = len(admitted) / max(1e-9, (max(admitted) if admitted else 0) - submitted_s) if admitted else 0.0
    rows = [
        (f"`up {located.name} --scale {options.nodes}` to every pod placed", f"{up_s:.0f} s", f"{UP_GOAL_S:.0f} s", up_s <= UP_GOAL_S),
        (f"all {len(jobs)} jobs admitted (as capacity frees)",
         f"{all_admitted_s:.0f} s" if all_admitted_s is not None else f"{len(admitted)} of {len(jobs)}",
         f"{ADMITTED_GOAL_S:.0f} s", all_admitted_s is not None and all_admitted_s <= ADMITTED_GOAL_S),
        ("every GPU node through the health gate (from the start of `up`)", f"{gated_s:.0f} s", "-", True),
        ("admissions per second", f"{throughput:.2f}", "-", True),
        ("jobs whole, one pod per node, in one block, bound at admission",
         "all" if not problems else f"{len(problems)} problems: " + "; ".join(problems[:5]), "all", not problems),
        ("peak memory, cluster and bench together", f"{memory.peak / 2**30:.1f} GiB", "8 GiB", memory.peak <= MEMORY_GOAL_BYTES),
        ("`eks-gpu-training-verify` on the fleet", f"{verify_s:.1f} s", f"{VERIFY_GOAL_S:.0f} s", verify_s <= VERIFY_GOAL_S),
    ]
    print(f"load average before {load_before[0]:.1f}, after {load[0]:.1f} (1 min), {os.cpu_count()} cores")
    print("| measure | figure | goal | met |\n|---|---|---|---|")
    for measure, figure, goal, met in rows:
        print(f"| {measure} | {figure} | {goal} | {'yes' if met else 'no'} |")
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
