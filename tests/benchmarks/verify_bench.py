"""Time ``eks-gpu-training-verify`` at fleet scale (issue 34: 10 s or less on a 1,000-node cluster).

    python tests/benchmarks/verify_bench.py [--runs 3] [--nodes 1000]
    python tests/benchmarks/verify_bench.py --kubeconfig PATH [--context NAME] [--stack STACK]

Always: the judges alone (``judge``, the seed's rows and prod's stack rows with its pool sized to
the fleet) over a synthetic snapshot of ``--nodes`` p5 nodes and five pods per node (the tests'
``fleet``: four DaemonSet pods on every node and one training pod, in jobs of 8), healthy and with
many objects failing for a few reasons. The judges' target is 1 CPU second (CPU time, which other
load on a shared machine hardly moves), so that a live run's time is the API server's and the
network's. With ``--kubeconfig``: the whole command, a new process each run
(imports, every paged list call and the judges), against that cluster, run from the current folder
(where ``--stack`` names resolve). Prints a Markdown table of medians and exits 1 when a target is
missed. Not collected by pytest (its name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[2]
# The synthetic fleet is the unit tests' own (tests/support/cluster_objects.py), so the benchmark times what they check.
sys.path.insert(0, str(ROOT))

from results import record  # noqa: E402 - a sibling script, its folder first on the path
from tests.support.cluster_objects import fleet  # noqa: E402 - found on the path set above
from eks_gpu_training.verify import Snapshot, judge, load_stack_args  # noqa: E402 - after the path, with the fleet

JUDGES_TARGET_S = 1.0
COMMAND_TARGET_S = 10.0
LAYER_3 = "topology.k8s.aws/network-node-layer-3"


def broken(nodes: int) -> Snapshot:
    """The fleet with two fifths of its nodes without their layer-3 label, one in ten without its
    topology labeler pod, one in four short of a GPU, and one job in three without its PDB."""
    snapshot = Snapshot(**fleet(nodes))
    gpu_nodes = [n for n in snapshot.nodes if n["metadata"]["labels"].get("role") == "gpu-training"]
    for index, node in enumerate(gpu_nodes):
        if index < nodes * 2 // 5:
            del node["metadata"]["labels"][LAYER_3]
        if index % 4 == 0:
            node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    snapshot.pods[:] = [p for i, p in enumerate(snapshot.pods) if not (p["metadata"]["name"].startswith("topology-labeler-") and i % 10 == 0)]
    snapshot.pod_disruption_budgets[:] = snapshot.pod_disruption_budgets[::3]
    return snapshot


@dataclass(frozen=True)
class Measurement:
    label: str
    wall: float
    cpu: Optional[float]
    """This process's CPU seconds; None for the command, a process of its own."""
    target: float

    @property
    def met(self) -> bool:
        """In-process work is held to its CPU seconds (other load on a shared machine hardly moves
        them), the command to its wall seconds (what its user waits)."""
        return (self.cpu if self.cpu is not None else self.wall) <= self.target


def median_seconds(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """The medians of the wall seconds and of this process's CPU seconds ``action`` takes."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        action()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main(argv: list[str] | None = None) -> int:
    root = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root.add_argument("--runs", type=int, default=3, help="runs per measurement; the median is reported (default: 3)")
    root.add_argument("--nodes", type=int, default=1000, help="GPU nodes of the synthetic fleet (default: 1000)")
    root.add_argument("--kubeconfig", help="also time the whole command against this cluster")
    root.add_argument("--context", help="the kubeconfig's context (default: its current one)")
    root.add_argument("--stack", help="passed on to the command: a stack name of the project in the current folder, or a stack file's path")
    options = root.parse_args(argv)

    prod = load_stack_args("prod", ROOT)
    pool = prod.gpu_node_groups[0].model_copy(update={"min_size": options.nodes, "desired_size": options.nodes, "max_size": options.nodes})
    stack = prod.model_copy(update={"gpu_node_groups": [pool]})
    results = []
    for label, snapshot in (("healthy", Snapshot(**fleet(options.nodes))), ("failing", broken(options.nodes))):
        wall, cpu = median_seconds(lambda snapshot=snapshot: judge(snapshot, stack), options.runs)
        results.append(Measurement(f"judges, {options.nodes} nodes and {len(snapshot.pods)} pods, {label}", wall, cpu, JUDGES_TARGET_S))

    if options.kubeconfig:
        # The module the console script runs, so the time is the command's own: a new process, its imports included.
        command = [sys.executable, "-m", "eks_gpu_training.verify", "--kubeconfig", options.kubeconfig]
        command += ["--context", options.context] if options.context else []
        command += ["--stack", options.stack] if options.stack else []
        summary = ""

        def run() -> None:
            nonlocal summary
            finished = subprocess.run(command, capture_output=True, text=True, check=False)
            if finished.returncode not in (0, 1):  # 1: a row fails, which is a verdict, not an error
                raise SystemExit(f"eks-gpu-training-verify exited {finished.returncode}: {finished.stderr.strip()}")
            summary = finished.stdout.strip().splitlines()[-1]

        wall, _ = median_seconds(run, options.runs)
        label = f"eks-gpu-training-verify{' --stack ' + options.stack if options.stack else ''} ({summary})"
        results.append(Measurement(label, wall, None, COMMAND_TARGET_S))

    note = f"Medians of {options.runs} runs; the judges are held to their CPU seconds, the command to its wall seconds."
    columns = ["measurement", "wall s", "CPU s", "target s", "met"]
    rows = [
        [result.label, f"{result.wall:.3f}", f"{result.cpu:.3f}" if result.cpu is not None else "-", f"{result.target:g}", "yes" if result.met else "no"]
        for result in results
    ]
    print(note)
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"results: {record('verify', columns, rows, note).relative_to(ROOT)}")
    return 0 if all(result.met for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
