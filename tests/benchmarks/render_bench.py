"""Time ``render`` as a user runs it: a whole new process, imports included.

    python tests/benchmarks/render_bench.py [--runs 7]

Stacks: prod as it is, and generated stacks with 1 and 10 GPU pools (copies of prod's first pool,
in the first pool's availability zone). Targets (issue 7): prod under 3 s whole-process on a
2-core machine; 10 pools under 1.5x the 1-pool time. Prints a Markdown table of medians (the
README's "Performance" section quotes it) and exits 1 when a target is missed. Not collected by
pytest (its name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import copy
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROD_TARGET_S = 3.0
POOL_SCALING_TARGET = 1.5


def pools_stack(pools: int) -> dict:
    """prod's stack file with ``pools`` copies of its first GPU pool, all in its availability zone
    (prod's FSx for Lustre file system refuses pools in other AZs); the first keeps its name, which
    other settings (training apps) refer to."""
    stack = yaml.safe_load((PROJECT_ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    config = stack["config"]
    template = config["eks-gpu-training:gpuNodeGroups"][0]
    config["eks-gpu-training:gpuNodeGroups"] = [
        {
            **copy.deepcopy(template),
            "name": template["name"] if i == 0 else f"{template['name']}-{i:02d}",
            # One AZ for all: prod's FSx for Lustre file system serves its pools from their AZ.
            "availabilityZone": template["availabilityZone"],
        }
        for i in range(pools)
    ]
    return stack


def timed_run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=PROJECT_ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per case (median reported)")
    options = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        stacks = {"prod": "prod"}
        for pools in (1, 10):
            path = scratch_dir / f"Pulumi.pools-{pools}.yaml"
            path.write_text(yaml.safe_dump(pools_stack(pools), sort_keys=False))
            stacks[f"{pools} GPU pool{'s' if pools > 1 else ''}"] = str(path)
        cases = {
            (label, variant): [sys.executable, "-m", "eks_gpu_training.offline.render", stack, str(scratch_dir / "out"), *extra]
            for label, stack in stacks.items()
            for variant, extra in (("picture", ()), ("no-picture", ("--no-picture",)))
        }
        for command in cases.values():
            subprocess.run(command, cwd=PROJECT_ROOT, check=True, capture_output=True)  # warm the file cache
        # Round-robin, so a burst of load on the machine falls on every case alike.
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {case: [] for case in cases}
        for _ in range(options.runs):
            for case, command in cases.items():
                samples[case].append(timed_run(command))

    wall = {case: statistics.median(w for w, _ in runs) for case, runs in samples.items()}
    cpu = {case: statistics.median(c for _, c in runs) for case, runs in samples.items()}
    print(f"Medians of {options.runs} runs, wall (CPU) seconds, whole process:")
    print()
    print("| stack | render | render --no-picture |")
    print("|---|---|---|")
    for label in stacks:
        cells = [f"{wall[(label, v)]:.2f} s ({cpu[(label, v)]:.2f} s)" for v in ("picture", "no-picture")]
        print(f"| {label} | {' | '.join(cells)} |")

    prod = wall[("prod", "picture")]
    ratio = wall[("10 GPU pools", "picture")] / wall[("1 GPU pool", "picture")]
    print()
    print(f"prod: {prod:.2f} s (target < {PROD_TARGET_S:.0f} s): {'met' if prod < PROD_TARGET_S else 'MISSED'}")
    print(
        f"10 pools / 1 pool: {ratio:.2f}x (target < {POOL_SCALING_TARGET}x): "
        f"{'met' if ratio < POOL_SCALING_TARGET else 'MISSED'}"
    )
    return 0 if prod < PROD_TARGET_S and ratio < POOL_SCALING_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
