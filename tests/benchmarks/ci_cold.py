"""Time ``.ci/run`` as CI meets it cold: a fresh clone, every cache empty, on this machine.

    python3 tests/benchmarks/ci_cold.py [--keep]

Clones the checkout this file is in (its committed HEAD) into a temporary folder and runs
``bash .ci/run`` there with CI=true and no standard input, with empty caches: ``XDG_CACHE_HOME``
(pip's and uv's downloads and wheels, Go's build cache, the built components) and ``GOMODCACHE`` (Go's
module downloads) point into the same temporary folder. Prints each step of ``.ci/run`` (its
``+ `` lines) with the minute it started at, the background builds' per-component figures, the
exit status, the wall time and the machine's load average over the run (sampled every 30 s), so a
figure says what the machine was doing. CI's limit is 90 min; the target for a cold run is 75.
Needs nothing but Python's standard library, git and what ``.ci/run`` itself needs. Not collected
by pytest.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TARGET_MINUTES = 75


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the clone, its caches and the log")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ci-cold-"))
    clone, cache, modules = work / "clone", work / "cache", work / "go-mod"
    subprocess.run(["git", "clone", "-q", str(PROJECT_ROOT), str(clone)], check=True)
    env = {**os.environ, "CI": "true", "XDG_CACHE_HOME": str(cache), "GOMODCACHE": str(modules)}
    env.pop("EKS_GPU_TRAINING_CACHE", None)
    env.pop("GOCACHE", None)
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(30):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    steps: list[tuple[float, str]] = []
    log = work / "ci.log"
    with open(log, "w") as out:
        process = subprocess.Popen(["bash", ".ci/run"], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if line.startswith("+ ") or re.match(r"\s*built \S+ \S+ in \d+ s", line):
                steps.append((time.monotonic() - started, line.strip()))
        status = process.wait()
    seconds = time.monotonic() - started
    done.set()
    print("| minute | step |\n|---|---|")
    for at, step in steps:
        print(f"| {at / 60:.1f} | {step[:160]} |")
    load = f"median {statistics.median(loads):.1f}, max {max(loads):.1f}" if loads else "not sampled"
    print(f"\n.ci/run exited {status} after {seconds / 60:.1f} min (target {TARGET_MINUTES} min); "
          f"load average (1 min) {load}; log {log if options.keep else 'removed'}")
    if not options.keep:
        # Go writes its module cache read-only; its own command removes it.
        subprocess.run(["go", "clean", "-modcache"], env={**os.environ, "GOMODCACHE": str(modules)}, check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0 if status == 0 and seconds <= TARGET_MINUTES * 60 else 1


if __name__ == "__main__":
    raise SystemExit(main())
