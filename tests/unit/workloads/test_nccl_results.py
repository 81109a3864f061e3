"""The all_reduce_perf parser and judge, on the logs AWS published and on broken ones."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from eks_gpu_training.facts.nccl_baselines import NCCL_BASELINES, nccl_baseline
from eks_gpu_training.workloads import nccl_results
from eks_gpu_training.workloads.nccl_results import judge_all_reduce, parse_all_reduce

GIB = 1024**3


def _published_logs(reference_dir: Path) -> list[str]:
    """The fenced all_reduce_perf logs of AWS's nccl-tests README, in order: 2 x p4de (Slurm),
    2 x p5 (Slurm), 2 x p5 (EKS MPIJob)."""
    readme = (reference_dir / "nccl-tests" / "README-awsome-distributed-training.md").read_text()
    blocks = re.findall(r"```(?:txt|log)\n(.*?)```", readme, flags=re.S)
    return [b for b in blocks if "busbw" in b]


@pytest.fixture(scope="module")
def published(reference_dir):
    logs = _published_logs(reference_dir)
    assert len(logs) == 3, "the README's three published logs"
    return logs


def test_reads_the_published_eks_p5_log_with_mpirun_tags(published):
    result = parse_all_reduce(published[2])
    row = result.row_at(2 * GIB)
    assert row.out_of_place.bus_bandwidth_gbps == 437.79
    assert row.in_place.bus_bandwidth_gbps == 437.89
    assert row.out_of_place.wrong == 0
    assert result.rows[0].size_bytes == 0
    assert result.out_of_bounds == 0
    assert result.average_bus_bandwidth_gbps == 52.9753
    assert result.failures == []


def test_reads_the_published_slurm_logs_with_srun_labels(published):
    p4de, p5 = parse_all_reduce(published[0]), parse_all_reduce(published[1])
    assert [r.size_bytes for r in p4de.rows] == [8 * 2**i for i in range(29)]
    assert p4de.row_at(2 * GIB).out_of_place.bus_bandwidth_gbps == 78.33
    assert p5.row_at(2 * GIB).out_of_place.bus_bandwidth_gbps == 443.72
    assert p5.row_at(16 * GIB).out_of_place.bus_bandwidth_gbps == 487.09
    assert all(r.out_of_place.wrong == 0 and r.in_place.wrong == 0 for r in p5.rows)


def test_the_published_eks_p5_run_passes_against_its_own_baseline(published):
    baseline = nccl_baseline("p5.48xlarge", 2)
    verdict = judge_all_reduce(parse_all_reduce(published[2]), at_bytes=baseline.message_bytes, min_bus_bandwidth_gbps=0.9 * baseline.bus_bandwidth_gbps)
    assert verdict.passed, verdict.problems
    assert verdict.bus_bandwidth_gbps == 437.79


def test_the_published_p5_run_fails_a_baseline_it_does_not_reach(published):
    verdict = judge_all_reduce(parse_all_reduce(published[2]), at_bytes=2 * GIB, min_bus_bandwidth_gbps=440.0)
    assert not verdict.passed
    assert verdict.problems == ("bus bandwidth 437.79 GB/s at 2147483648 bytes is below the required 440.00 GB/s",)


def test_published_excerpts_without_the_average_line_are_judged_incomplete(published):
    """The README's Slurm excerpts stop at the last row: a log cut there did not prove the run finished."""
    verdict = judge_all_reduce(parse_all_reduce(published[1]), at_bytes=2 * GIB, min_bus_bandwidth_gbps=None)
    assert not verdict.passed
    assert verdict.problems[0].startswith("incomplete: no '# Avg bus bandwidth' line")


def test_a_log_truncated_mid_run_fails_even_above_the_baseline(published):
    lines = published[2].splitlines()
    cut = next(i for i, line in enumerate(lines) if "2147483648" in line)
    verdict = judge_all_reduce(parse_all_reduce("\n".join(lines[: cut + 1])), at_bytes=2 * GIB, min_bus_bandwidth_gbps=394.0)
    assert not verdict.passed
    assert verdict.bus_bandwidth_gbps == 437.79
    assert len(verdict.problems) == 1
    assert verdict.problems[0].startswith("incomplete")


def test_a_run_stopped_before_the_judged_size_says_which_size_it_reached(published):
    lines = published[2].splitlines()
    cut = next(i for i, line in enumerate(lines) if " 1073741824 " in line)
    text = "\n".join(lines[: cut + 1] + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 40.1"])
    verdict = judge_all_reduce(parse_all_reduce(text), at_bytes=2 * GIB, min_bus_bandwidth_gbps=394.0)
    assert verdict.problems == ("no result at 2147483648 bytes to compare with the baseline (largest size run: 1073741824 bytes)",)


def test_wrong_elements_fail_the_run():
    text = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
  2147483648     536870912     float     sum      -1   9197.5  233.49  437.79      3   9195.2  233.54  437.89      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 437.79
"""
    verdict = judge_all_reduce(parse_all_reduce(text), at_bytes=2 * GIB, min_bus_bandwidth_gbps=394.0)
    assert verdict.problems == ("3 wrong elements at 2147483648 bytes: a GPU or link corrupts data",)


def test_an_unchecked_run_reads_wrong_as_unknown():
    row = parse_all_reduce("  8  2  float  sum  -1  69.12  0.00  0.00  N/A  72.43  0.00  0.00  N/A\n").rows[0]
    assert row.out_of_place.wrong is None
    assert row.in_place.time_us == 72.43


def test_a_failed_run_reports_the_failure_lines():
    text = """\
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 100
[1,3]<stdout>:nccl-tests-worker-1: Test NCCL failure common.cu:1005 'remote process exited or there was a network error'
[1,3]<stdout>: .. nccl-tests-worker-1 pid 42: Test failure common.cu:891
"""
    result = parse_all_reduce(text)
    verdict = judge_all_reduce(result, at_bytes=2 * GIB, min_bus_bandwidth_gbps=None)
    assert not verdict.passed
    assert verdict.problems[0].startswith("no result rows")
    assert "reported: nccl-tests-worker-1: Test NCCL failure common.cu:1005" in verdict.problems[2]
    assert len(result.failures) == 2


def test_the_module_judges_a_log_as_a_script_with_the_standard_library_only(tmp_path, published):
    """The NCCL Job runs this file alone with python3; it must not need the package."""
    log = tmp_path / "nccl.log"
    log.write_text(published[2])
    script = Path(nccl_results.__file__)
    ok = subprocess.run([sys.executable, "-I", str(script), str(log), "--min-bus-bandwidth", "394.011"], capture_output=True, text=True)
    assert (ok.returncode, ok.stdout.strip()) == (0, "PASS: bus bandwidth 437.79 GB/s")
    low = subprocess.run([sys.executable, "-I", str(script), str(log), "--min-bus-bandwidth", "500"], capture_output=True, text=True)
    assert low.returncode == 1
    assert low.stdout.startswith("FAIL: bus bandwidth 437.79 GB/s")


def test_every_baseline_matches_the_published_log_it_cites(published):
    """Each seeded figure is the 2 GiB out-of-place busbw of the log its source names."""
    by_source = {
        ("p5.48xlarge", 2): parse_all_reduce(published[2]),
        ("p4de.24xlarge", 2): parse_all_reduce(published[0]),
    }
    assert {(b.instance_type, b.nodes) for b in NCCL_BASELINES} == set(by_source)
    for baseline in NCCL_BASELINES:
        row = by_source[(baseline.instance_type, baseline.nodes)].row_at(baseline.message_bytes)
        assert row.out_of_place.bus_bandwidth_gbps == baseline.bus_bandwidth_gbps, baseline.source


def test_no_baseline_for_an_unpublished_shape():
    assert nccl_baseline("p5.48xlarge", 4) is None
    assert nccl_baseline("g6e.xlarge", 2) is None
