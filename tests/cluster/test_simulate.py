"""The job-mix simulator on the real scheduler and Kueue: prod's p5 pool grown to 20 nodes with
``--scale`` (a 16-node layer-3 block and a 4-node one under one layer-2 node), a trace of Jobs,
JobSets and a TrainJob from both teams replayed, and the report read back. What the report says
comes from the cluster: Kueue's Workloads and the pods' nodes."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.harness import PROJECT_ROOT

from eks_gpu_training.config import ConfigError
from eks_gpu_training.local.cluster import LocalCluster
from eks_gpu_training.local.simulate import simulate

# A group of its own: it starts its own clusters (prod grown to 20 nodes).
pytestmark = pytest.mark.xdist_group("simulate")

TRACE = {"jobs": [
    # Each team's quota is 80 GPUs (10 nodes). Pretraining fills its own; research's JobSet takes 4
    # nodes, its TrainJob the 6 left of its quota: every node admitted, nothing borrowed. They run
    # 18 s of wall time each, which a quiet machine overlaps.
    {"name": "big", "team": "pretraining", "app": "rl-training", "nodes": 10, "duration": "3m", "submit": 0},
    {"name": "small", "team": "research", "app": "finetune", "kind": "JobSet", "nodes": 4, "duration": "3m", "submit": 0},
    {"name": "tuned", "team": "research", "app": "finetune", "nodes": 6, "duration": "3m", "submit": "10s"},
    # Beyond research's quota, with nothing idle to borrow: it waits until a job ends, research's own
    # (its quota frees) or pretraining's (its idle quota may be lent), whichever ends first (or tuned
    # waits, should late's Workload come first).
    {"name": "late", "team": "research", "app": "finetune", "kind": "JobSet", "nodes": 4, "duration": "30s", "submit": "20s"},
    {"name": "eval", "team": "pretraining", "app": "rl-training", "kind": "JobSet", "nodes": 2, "duration": "30s", "submit": "90s"},
]}
"""Replayed at 10x: about 30 s of replay once the cluster is up."""


def _cluster(tmp_path) -> LocalCluster:
    return LocalCluster("prod", tmp_path / "state", project_root=PROJECT_ROOT, scale=20,
                        log=lambda line: print(f"[simulate] {line}"))


def test_a_trace_replays_on_a_grown_fleet_and_every_job_runs_whole_in_one_block(tmp_path):
    trace = tmp_path / "trace.yaml"
    trace.write_text(yaml.safe_dump(TRACE))
    out = tmp_path / "report"
    assert simulate(_cluster(tmp_path), trace, speedup=10, out=out, timeout=240) == 0
    report = json.loads((out / "report.json").read_text())
    jobs = {job["name"]: job for job in report["jobs"]}
    assert set(jobs) == {"big", "small", "tuned", "late", "eval"}
    for job in jobs.values():
        assert job["finished"] is not None, job
        assert job["admitted"] >= job["submitted"], job
        assert len(job["blocks"]) == 1, f"{job['name']} ran under {job['blocks']}"
        assert len(job["layer2_blocks"]) == 1, job
    # Research's three jobs need 14 nodes against its quota of 10, and pretraining's big leaves
    # nothing idle to lend: the one admitted last waited until a job ended. That is late, unless a
    # loaded machine made tuned's TrainJob (its JobSet, then its Workload) slower than late's 1 s.
    last = max((jobs[name] for name in ("small", "tuned", "late")), key=lambda job: job["admitted"])
    assert last["wait_s"] >= 15, last
    first_end = min(job["finished"] for job in jobs.values() if job["name"] != last["name"])
    assert last["admitted"] >= first_end - 5, (last, first_end)
    (pool,) = [p for p in report["pools"] if p["name"] == "p5-training"]
    assert pool["gpus"] == 160
    # Every node busy at once on a quiet machine; a loaded one may start a job's pods only once
    # another's have ended, so the peak is at least the biggest job's and at most the pool.
    assert 80 <= pool["peak_gpus_used"] <= 160
    assert {team["name"] for team in report["teams"]} == {"pretraining", "research"}
    assert (out / "report.png").stat().st_size > 10_000
    assert not (tmp_path / "state").exists()  # stopped and removed at the end


def test_a_bad_trace_is_refused_before_a_cluster_starts(tmp_path):
    trace = tmp_path / "trace.yaml"
    trace.write_text(yaml.safe_dump({"jobs": [{"team": "pretraining", "nodes": 21, "duration": "1h"}]}))
    with pytest.raises(ConfigError) as refused:
        simulate(_cluster(tmp_path), trace, speedup=10, out=tmp_path / "report", timeout=60)
    assert [(p.path, p.message) for p in refused.value.problems] == [
        (f"{trace}: jobs[0].nodes", "21 nodes exceed pool p5-training's 20")]
    assert not (tmp_path / "state").exists()
