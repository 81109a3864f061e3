"""Time the whole test suite as CI runs it: a new ``pytest`` process, imports and fixtures included.

    python tests/benchmarks/suite_time.py [--runs 3]

Prints each run's wall and CPU seconds and their medians, and exits 1 when the median wall time
passes the target (60 s on a 2-core machine). A script, not a test: a timed test would fail on a
busy machine for reasons that are not the code's. Not collected by pytest (its name does not start
with ``test_``).
"""

from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 60.0
"""Longest median wall time of the whole suite on the 2-core CI machine."""


def readme_pytest_arguments() -> list[str]:
    """The arguments the README's test command (which CI runs) passes to pytest."""
    from cluster_repeat import readme_block

    command = readme_block("test-command")
    return shlex.split(command[command.index("-m pytest") + len("-m pytest") :])


def run_once() -> tuple[float, float, str]:
    """Wall and CPU seconds of one whole-suite run, and pytest's summary line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *readme_pytest_arguments(), "-p", "no:cacheprovider"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    if result.returncode != 0:
        sys.exit(f"the suite failed: {summary}")
    return wall, cpu, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    walls, cpus = [], []
    for i in range(runs):
        wall, cpu, summary = run_once()
        walls.append(wall)
        cpus.append(cpu)
        print(f"run {i + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU ({summary})")
    median = statistics.median(walls)
    print(f"median: {median:.1f} s wall, {statistics.median(cpus):.1f} s CPU; target {TARGET_S:.0f} s")
    return 0 if median <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
