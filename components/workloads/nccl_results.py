"""Read nccl-tests ``all_reduce_perf`` output and judge it: bus bandwidth per message size, ``#wrong``,
the out-of-bounds and average lines.

Standard library only and no import of the package: the pre-flight NCCL Job mounts this very file
from a ConfigMap and runs it on the launcher's log (``python3 nccl_results.py LOG --min-bus-bandwidth
GBPS --at-bytes N``), so the cluster judges a run with the same code the tests and the
``eks-gpu-training-preflight judge`` command use.

A line of output may carry the prefix its launcher adds: Open MPI's ``--tag-output``
(``[1,0]<stdout>:``) or Slurm's ``--label`` (``0: ``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from typing import Optional

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVERAGE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
_FAILURE = re.compile(r"Test NCCL failure|Test CUDA failure|Test failure|MPI_ABORT|mpirun noticed that process")
"""Lines nccl-tests, NCCL and Open MPI print when a run breaks."""


@dataclass(frozen=True)
class Measurement:
    """One half (out-of-place or in-place) of a result row."""

    time_us: float
    algorithm_bandwidth_gbps: float
    bus_bandwidth_gbps: float
    wrong: Optional[int]
    """Elements that came back wrong; None when the run did not check (``-c 0`` prints N/A)."""


@dataclass(frozen=True)
class ResultRow:
    """One message size of an ``all_reduce_perf`` run."""

    size_bytes: int
    count: int
    data_type: str
    reduction: str
    out_of_place: Measurement
    in_place: Measurement


@dataclass
class AllReduceResult:
    """Everything a log says about one run."""

    rows: list[ResultRow] = field(default_factory=list)
    out_of_bounds: Optional[int] = None
    """The ``# Out of bounds values`` count; None when the line is missing."""
    average_bus_bandwidth_gbps: Optional[float] = None
    """The ``# Avg bus bandwidth`` figure, printed last; None when the run did not finish."""
    failures: list[str] = field(default_factory=list)
    """Lines reporting a failure of NCCL, CUDA or MPI."""

    def row_at(self, size_bytes: int) -> Optional[ResultRow]:
        return next((row for row in self.rows if row.size_bytes == size_bytes), None)


def _number(token: str) -> Optional[float]:
    try:
        return float(token)
    except ValueError:
        return None


def _measurement(tokens: list[str]) -> Optional[Measurement]:
    time_us, algbw, busbw = (_number(t) for t in tokens[:3])
    wrong_column = tokens[3]
    if time_us is None or algbw is None or busbw is None:
        return None
    if wrong_column == "N/A":
        wrong = None
    elif wrong_column.isdigit():
        wrong = int(wrong_column)
    else:
        return None
    return Measurement(time_us, algbw, busbw, wrong)


def _row(line: str) -> Optional[ResultRow]:
    tokens = line.split()
    if len(tokens) != 13 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    out_of_place, in_place = _measurement(tokens[5:9]), _measurement(tokens[9:13])
    if out_of_place is None or in_place is None:
        return None
    return ResultRow(int(tokens[0]), int(tokens[1]), tokens[2], tokens[3], out_of_place, in_place)


def parse_all_reduce(text: str) -> AllReduceResult:
    """The rows, out-of-bounds count, average and failure lines of an ``all_reduce_perf`` log."""
    result = AllReduceResult()
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw, count=1).strip()
        if _FAILURE.search(line):
            result.failures.append(line)
        elif match := _OUT_OF_BOUNDS.match(line):
            result.out_of_bounds = int(match.group(1))
        elif match := _AVERAGE.match(line):
            result.average_bus_bandwidth_gbps = float(match.group(1))
        elif not line.startswith("#") and (row := _row(line)) is not None:
            result.rows.append(row)
    return result


@dataclass(frozen=True)
class Verdict:
    """Whether a run proves the pool fit, and why not."""

    passed: bool
    problems: tuple[str, ...]
    bus_bandwidth_gbps: Optional[float]
    """Out-of-place bus bandwidth at the judged size; None when the run has no row there."""

    def summary(self) -> str:
        figure = f"{self.bus_bandwidth_gbps:.2f} GB/s" if self.bus_bandwidth_gbps is not None else "no figure"
        if self.passed:
            return f"PASS: bus bandwidth {figure}"
        return "FAIL: " + "; ".join(self.problems)


def judge_all_reduce(result: AllReduceResult, *, at_bytes: int, min_bus_bandwidth_gbps: Optional[float]) -> Verdict:
    """A run passes when it finished (average line printed), nothing came back wrong, no failure was
    reported, and (with a minimum) its out-of-place bus bandwidth at ``at_bytes`` reaches it."""
    problems: list[str] = []
    if not result.rows:
        problems.append("no result rows: all_reduce_perf printed no measurement (see the failure lines of the log)")
    if result.average_bus_bandwidth_gbps is None:
        problems.append("incomplete: no '# Avg bus bandwidth' line, so the run did not finish (log truncated or the test crashed)")
    problems.extend(f"reported: {line}" for line in result.failures[:5])
    for row in result.rows:
        wrong = [m.wrong for m in (row.out_of_place, row.in_place) if m.wrong]
        if wrong:
            problems.append(f"{max(wrong)} wrong elements at {row.size_bytes} bytes: a GPU or link corrupts data")
    if result.out_of_bounds:
        problems.append(f"{result.out_of_bounds} out-of-bounds values")
    judged = result.row_at(at_bytes)
    measured = judged.out_of_place.bus_bandwidth_gbps if judged is not None else None
    if min_bus_bandwidth_gbps is not None:
        if judged is None:
            largest = max((r.size_bytes for r in result.rows), default=0)
            problems.append(f"no result at {at_bytes} bytes to compare with the baseline (largest size run: {largest} bytes)")
        elif measured is not None and measured < min_bus_bandwidth_gbps:
            problems.append(
                f"bus bandwidth {measured:.2f} GB/s at {at_bytes} bytes is below the required {min_bus_bandwidth_gbps:.2f} GB/s"
            )
    return Verdict(passed=not problems, problems=tuple(problems), bus_bandwidth_gbps=measured)


def main(argv: Optional[list[str]] = None) -> int:
    """Judge a log file (``-`` for standard input); exit 0 on a pass, 1 on a failure."""
    parser = argparse.ArgumentParser(description="Judge an nccl-tests all_reduce_perf log.")
    parser.add_argument("log", help="the log file, or - for standard input")
    parser.add_argument("--at-bytes", type=int, default=2 * 1024**3, help="message size to judge (default 2 GiB)")
    parser.add_argument("--min-bus-bandwidth", type=float, default=None, help="GB/s the bus bandwidth must reach")
    options = parser.parse_args(argv)
    text = sys.stdin.read() if options.log == "-" else open(options.log, encoding="utf-8", errors="replace").read()
    verdict = judge_all_reduce(parse_all_reduce(text), at_bytes=options.at_bytes, min_bus_bandwidth_gbps=options.min_bus_bandwidth)
    print(verdict.summary())
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
