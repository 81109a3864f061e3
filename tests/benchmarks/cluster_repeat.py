"""Run the cluster tier several times in a row, as CI runs it, and say whether every run was green.

    python tests/benchmarks/cluster_repeat.py [--runs 3] [--loaded 3]

Each run is the README's cluster-test-command (the fenced block after its
``<!-- cluster-test-command -->`` marker, as ``.ci/run`` reads it), from the checkout this file
is in. ``--loaded N`` runs the unit tier (``pytest -q -n auto``, the README's test command
without the install) beside run N, so the machine has more work than cores, as on a shared CI
machine. Prints a Markdown table (run, load, result, wall time, pytest's closing line, the
machine's load average) and exits 1 when a run was not green. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def readme_block(marker: str) -> str:
    """The fenced block right after ``<!-- marker -->`` in the README."""
    lines = (PROJECT_ROOT / "README.md").read_text().splitlines()
    start = lines.index(f"<!-- {marker} -->")
    fence = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[fence + 1:end])


def closing_line(output: str) -> str:
    """pytest's summary lines (``N passed ...``), joined."""
    return "; ".join(line.strip("= ") for line in output.splitlines() if " passed" in line or " failed" in line
                     or " error" in line) or "no summary"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loaded", type=int, default=0, help="run the unit tier beside this run (1-based; 0: none)")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep each run's output here")
    options = parser.parse_args()
    command = readme_block("cluster-test-command")
    rows, green = [], True
    for run in range(1, options.runs + 1):
        load = None
        if run == options.loaded:
            load = subprocess.Popen([str(BIN / "python"), "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider"],
                                    cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        started = time.monotonic()
        try:
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=PROJECT_ROOT,
                                    capture_output=True, text=True, env=os.environ.copy())
        finally:
            unit = ""
            if load is not None:
                unit = "unit tier beside it"
                if load.poll() is None:
                    os.killpg(load.pid, 15)
                    unit += " (stopped at the end)"
                load.wait()
        seconds = time.monotonic() - started
        output = result.stdout + result.stderr
        if options.log_dir is not None:
            options.log_dir.mkdir(parents=True, exist_ok=True)
            (options.log_dir / f"run-{run}.log").write_text(output)
        green = green and result.returncode == 0
        load1 = os.getloadavg()[0]
        rows.append((run, unit or "-", "green" if result.returncode == 0 else f"red (exit {result.returncode})",
                     f"{seconds / 60:.1f} min", closing_line(output), f"{load1:.1f}"))
    print("| run | beside it | result | wall time | pytest | load (1 min) at the end |\n|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    return 0 if green else 1


if __name__ == "__main__":
    raise SystemExit(main())
