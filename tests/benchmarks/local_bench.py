"""Time the local control plane as a user meets it: the cold build, ``eks-gpu-training-local up``
per stack (warm, to every pod placed), and the cluster tier; and the engine tests' tools (Pulumi CLI
and Kubernetes provider, ``eks-gpu-training-local tools``) cold, and the engine tests warm.

    python tests/benchmarks/local_bench.py [--cold] [--runs 3] [--no-tier | --engine-only]

``--cold`` builds every component into a fresh cache with an empty Go build cache (the module
cache is kept: downloads are the proxy's speed, not ours) and reports its wall time and the peak
memory of the largest process it ran (the Go linker's, for kube-apiserver). Targets on a 2-core
machine (issue 19): warm ``up prod`` at most 60 s, cluster tier at most 5 min warm, cold build at
most 45 min, peak memory at most 8 GiB; engine tests at most 5 min warm, and the two cold builds
together at most 90 min less the rest of CI (issue 23 gives no figure of their own). Prints a Markdown table and exits 1 when a target is
missed. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TARGETS = {"up prod": 60.0, "cluster tier": 300.0, "cold build": 45 * 60.0, "engine tests": 300.0}
PEAK_MEMORY_TARGET_BYTES = 8 * 2**30


ENGINE_FILES = ("tests/cluster/test_engine.py", "tests/cluster/test_engine_in_cluster.py")
"""The engine tests: two modules of the cluster tier, each an xdist group with a cluster of its own."""


def readme_pytest_command() -> list[str]:
    """The pytest run of the README's cluster-test-command, as CI runs it: the whole cluster tier,
    the engine tests among its groups."""
    from cluster_repeat import readme_block

    (tier,) = [shlex.split(part) for part in readme_block("cluster-test-command").split(" && ") if " -m pytest " in part]
    return [str(BIN / "python"), *tier[1:]]


def engine_only(tier: list[str]) -> list[str]:
    """The same run over the engine modules alone."""
    return [argument for argument in tier if argument != "tests/cluster"] + list(ENGINE_FILES)


def _run(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    subprocess.run(command, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def cold_build(command: str = "build") -> tuple[float, int]:
    """Wall time of ``eks-gpu-training-local COMMAND`` into a fresh cache with an empty Go build
    cache, and the peak memory of the largest process run so far."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as gocache:
        seconds = _run([str(BIN / "eks-gpu-training-local"), command],
                       env={"EKS_GPU_TRAINING_CACHE": cache, "GOCACHE": gocache})
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, peak_kib * 1024


def warm_up(stack: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        state = Path(tempfile.mkdtemp(prefix=f"local-{stack}-"))
        try:
            times.append(_run([str(BIN / "eks-gpu-training-local"), "up", stack, "--state-dir", str(state)]))
        finally:
            subprocess.run([str(BIN / "eks-gpu-training-local"), "down", stack, "--state-dir", str(state)],
                           cwd=PROJECT_ROOT, check=False, stdout=subprocess.DEVNULL)
            shutil.rmtree(state, ignore_errors=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true", help="also time a cold build (tens of minutes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-tier", action="store_true", help="skip timing the cluster tier (the engine tests among it)")
    parser.add_argument("--engine-only", action="store_true", help="time the engine tests only (tools built if missing)")
    options = parser.parse_args()

    rows: list[tuple[str, str, str, bool]] = []
    if options.cold:
        seconds, peak = cold_build()
        rows.append(("cold build", f"{seconds / 60:.1f} min", "45 min", seconds <= TARGETS["cold build"]))
        rows.append(("peak memory of one build process", f"{peak / 2**30:.1f} GiB", "8 GiB", peak <= PEAK_MEMORY_TARGET_BYTES))
        tools_seconds, peak = cold_build("tools")
        rows.append(("cold tools build (Pulumi CLI, Kubernetes provider)", f"{tools_seconds / 60:.1f} min", "-", True))
        rows.append(("peak memory of one build process, tools included", f"{peak / 2**30:.1f} GiB", "8 GiB",
                     peak <= PEAK_MEMORY_TARGET_BYTES))
    for command in ("build", "tools"):
        subprocess.run([str(BIN / "eks-gpu-training-local"), command], cwd=PROJECT_ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    for stack in () if options.engine_only else ("dev", "prod"):
        times = warm_up(stack, options.runs)
        target = TARGETS.get(f"up {stack}")
        rows.append((f"warm `local up {stack}` (median of {options.runs})", f"{statistics.median(times):.1f} s",
                     f"{target:.0f} s" if target else "-", target is None or statistics.median(times) <= target))
    tier = readme_pytest_command()
    if options.engine_only:
        seconds = _run(engine_only(tier))
        rows.append(("engine tests alone (one run, tools built)", f"{seconds / 60:.1f} min", "5 min", seconds <= TARGETS["engine tests"]))
    elif not options.no_tier:
        seconds = _run(tier)
        rows.append(("cluster tier, the engine tests among it (one run)", f"{seconds / 60:.1f} min", "5 min",
                     seconds <= TARGETS["cluster tier"]))
    print("| measure | figure | target | met |\n|---|---|---|---|")
    for measure, figure, target, met in rows:
        print(f"| {measure} | {figure} | {target} | {'yes' if met else 'no'} |")
    return 0 if all(row[3] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
