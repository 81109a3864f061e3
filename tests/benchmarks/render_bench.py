"""Time ``render`` as a user runs it: a whole new process, imports included.

    python tests/benchmarks/render_bench.py [--runs 3]

Stacks: prod as it is, and generated stacks with 1 and 20 GPU pools (copies of prod's first pool,
in the first pool's availability zone). Each is timed with a cold cache (``XDG_CACHE_HOME`` an
empty folder for every run: every chart rendered by Helm, the picture laid out by Graphviz) and
with a warm one (the cache a previous render of the same stack filled: a user's repeated run).
Renders run the installed command (``eks-gpu-training-render``). Beside them, paired in the same
round-robin, three floors. The issue's, a new Python process running ``import pulumi_aws.ec2,
pulumi_kubernetes.core.v1, pulumi_eks`` as written. The same three modules loaded: each imported
and its ``__all__`` read, as the last floor loads its modules. pulumi-aws makes each service a lazy module, loaded
(``pulumi_aws.ec2``: its 182 modules of classes) only when a name in it is first used, which the
command as written never does, so it leaves EC2 out of the floor it names; a render must load it.
And the SDK modules prod's program loads, each imported whole (with the collector on, and off as
the render runs). Bytecode is written as in a user's environment (``PYTHONDONTWRITEBYTECODE`` is
dropped for the runs), so the first, untimed run compiles the project once. Targets (issue 34): prod
warm in at most 2x the import floor's CPU seconds, the three modules loaded (the ratio to the
command as written is printed beside it); prod cold in at most 3 s whole-process on a 2-core
machine; 20 pools in at most 1.5x the 1-pool time, warm. Prints a Markdown table of medians
(docs/benchmarks.md, "render", holds its figures) and exits 1 when a target is missed. Not
collected by pytest (its name does not start with ``test_``).
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from eks_gpu_training.platform.stack_files import locate_stack, stack_file_name

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROD_COLD_TARGET_S = 3.0
FLOOR_RATIO_TARGET = 2.0
POOL_SCALING_TARGET = 1.5
POOLS = (1, 20)
FLOOR = "import floor"
FLOOR_MODULES = ("pulumi_aws.ec2", "pulumi_kubernetes.core.v1", "pulumi_eks")
FLOOR_COMMAND = f"import {', '.join(FLOOR_MODULES)}"
LOADED_FLOOR = "import floor, modules loaded"
SDK_FLOOR = "SDK modules floor"
SDK_FLOOR_NO_GC = "SDK modules floor, collector off"
# Imports each module named on the command line; reading ``__all__`` loads one pulumi-aws left lazy.
SDK_FLOOR_COMMAND = "import importlib, sys\nfor name in sys.argv[1:]:\n    getattr(importlib.import_module(name), '__all__', None)"
# Renders a stack in-process, then prints the Pulumi SDK packages (not the core SDK) it loaded, on the last line.
SDK_MODULES_PROBE = """
import sys, types
from eks_gpu_training.offline.render.__main__ import main
main(sys.argv[1:])
print(" ".join(sorted(name for name, module in sys.modules.items() if name.startswith("pulumi_")
                      and hasattr(module, "__path__") and type(module) is types.ModuleType)))
"""


def pools_stack(pools: int) -> dict:
    """prod's stack file with ``pools`` copies of its first GPU pool, all in its availability zone
    (prod's FSx for Lustre file system refuses pools in other AZs); the first keeps its name, which
    other settings (training apps) refer to."""
    stack = yaml.safe_load(locate_stack("prod", PROJECT_ROOT).path.read_text())
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


def timed_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=PROJECT_ROOT, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs per case (median reported)")
    options = parser.parse_args(argv)

    base_env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    variants = {  # column: (cache, extra arguments)
        "render, cold cache": ("cold", ()),
        "render, warm cache": ("warm", ()),
        "render --no-picture, warm cache": ("warm", ("--no-picture",)),
    }
    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        stacks = {"prod": "prod"}
        for pools in POOLS:
            path = scratch_dir / stack_file_name(f"pools-{pools}")
            path.write_text(yaml.safe_dump(pools_stack(pools), sort_keys=False))
            stacks[f"{pools} GPU pool{'s' if pools > 1 else ''}"] = str(path)
        warm_env = {**base_env, "XDG_CACHE_HOME": str(scratch_dir / "warm-cache")}
        command = str(Path(sys.executable).with_name("eks-gpu-training-render"))
        cases = {
            (label, variant): ([command, stack, str(scratch_dir / "out"), *extra], cache)
            for label, stack in stacks.items()
            for variant, (cache, extra) in variants.items()
        }
        cases[(FLOOR, FLOOR)] = ([sys.executable, "-c", FLOOR_COMMAND], "warm")
        # The same modules, each loaded as the SDK modules floor loads its own (the lazy ``pulumi_aws.ec2`` runs).
        cases[(LOADED_FLOOR, LOADED_FLOOR)] = ([sys.executable, "-c", SDK_FLOOR_COMMAND, *FLOOR_MODULES], "warm")
        probe = subprocess.run([sys.executable, "-c", SDK_MODULES_PROBE, "prod", str(scratch_dir / "out")], cwd=PROJECT_ROOT,
                               check=True, capture_output=True, text=True, env=warm_env)
        sdk_modules = probe.stdout.splitlines()[-1].split()
        cases[(SDK_FLOOR, SDK_FLOOR)] = ([sys.executable, "-c", SDK_FLOOR_COMMAND, *sdk_modules], "warm")
        # The render command runs with the collector off (``offline.commands.one_shot``); so does this floor.
        cases[(SDK_FLOOR_NO_GC, SDK_FLOOR_NO_GC)] = (
            [sys.executable, "-c", f"import gc\ngc.disable()\n{SDK_FLOOR_COMMAND}", *sdk_modules], "warm")

        def env_of(cache: str) -> dict[str, str]:
            if cache == "warm":
                return warm_env
            return {**base_env, "XDG_CACHE_HOME": tempfile.mkdtemp(dir=scratch_dir, prefix="cold-cache-")}

        for command, cache in cases.values():
            # Warms the file cache, writes the bytecode and fills the warm cache.
            subprocess.run(command, cwd=PROJECT_ROOT, check=True, capture_output=True, env=env_of(cache))
        # Round-robin, so a burst of load on the machine falls on every case alike.
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {case: [] for case in cases}
        for _ in range(options.runs):
            for case, (command, cache) in cases.items():
                samples[case].append(timed_run(command, env_of(cache)))

    wall = {case: statistics.median(w for w, _ in runs) for case, runs in samples.items()}
    cpu = {case: statistics.median(c for _, c in runs) for case, runs in samples.items()}
    print(f"Medians of {options.runs} runs, wall (CPU) seconds, whole process:")
    print()
    print(f"| stack | {' | '.join(variants)} |")
    print(f"|---|{'---|' * len(variants)}")
    for label in stacks:
        cells = [f"{wall[(label, v)]:.2f} s ({cpu[(label, v)]:.2f} s)" for v in variants]
        print(f"| {label} | {' | '.join(cells)} |")

    floor = cpu[(FLOOR, FLOOR)]
    prod_warm_cpu = cpu[("prod", "render, warm cache")]
    prod_cold = wall[("prod", "render, cold cache")]
    one, many = (f"{p} GPU pool{'s' if p > 1 else ''}" for p in POOLS)
    ratio = wall[(many, "render, warm cache")] / wall[(one, "render, warm cache")]
    literal_ratio = prod_warm_cpu / floor
    loaded_floor = cpu[(LOADED_FLOOR, LOADED_FLOOR)]
    floor_ratio = prod_warm_cpu / loaded_floor
    sdk_floor, sdk_floor_no_gc = cpu[(SDK_FLOOR, SDK_FLOOR)], cpu[(SDK_FLOOR_NO_GC, SDK_FLOOR_NO_GC)]
    print()
    print(f"import floor ({FLOOR_COMMAND}), as written: {wall[(FLOOR, FLOOR)]:.2f} s ({floor:.2f} s CPU); "
          f"the three modules loaded: {wall[(LOADED_FLOOR, LOADED_FLOOR)]:.2f} s ({loaded_floor:.2f} s CPU)")
    print(f"SDK modules floor (the {len(sdk_modules)} SDK packages prod's program loads, each whole): "
          f"{wall[(SDK_FLOOR, SDK_FLOOR)]:.2f} s ({sdk_floor:.2f} s CPU); with the collector off, as the render runs: "
          f"{wall[(SDK_FLOOR_NO_GC, SDK_FLOOR_NO_GC)]:.2f} s ({sdk_floor_no_gc:.2f} s CPU)")
    print(f"prod, warm cache: {prod_warm_cpu:.2f} s CPU = {floor_ratio:.2f}x the import floor, its modules loaded "
          f"(target <= {FLOOR_RATIO_TARGET}x): {'met' if floor_ratio <= FLOOR_RATIO_TARGET else 'MISSED'}; "
          f"{literal_ratio:.2f}x the command as written, {prod_warm_cpu / sdk_floor:.2f}x the SDK modules floor, "
          f"{prod_warm_cpu / sdk_floor_no_gc:.2f}x it with the collector off")
    print(f"prod, cold cache: {prod_cold:.2f} s (target <= {PROD_COLD_TARGET_S:.0f} s): "
          f"{'met' if prod_cold <= PROD_COLD_TARGET_S else 'MISSED'}")
    print(f"{POOLS[1]} pools / {POOLS[0]} pool, warm cache: {ratio:.2f}x (target <= {POOL_SCALING_TARGET}x): "
          f"{'met' if ratio <= POOL_SCALING_TARGET else 'MISSED'}")
    return 0 if floor_ratio <= FLOOR_RATIO_TARGET and prod_cold <= PROD_COLD_TARGET_S and ratio <= POOL_SCALING_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
