"""The recorder on a MultiKueue fleet: the jobs' Workloads read on the manager, their pods and nodes
on the workers, so each job's worker, its wait to dispatch and each worker's GPU use are recorded
and reported (table, JSON and picture). The API servers here are stand-ins answering list calls
with the JSON Kueue and the scheduler wrote; the real dispatch is the cluster tier's."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE
from eks_gpu_training.local.recorder import TRACE_JOB_LABEL, Recorder
from eks_gpu_training.local.simulation_report import table, write_report
from eks_gpu_training.local.trace import TraceJob


def answering(items: list[dict]):
    """A list call of the kubernetes client, answering ``items`` as the API server's JSON."""
    def call(*args: Any, **kwargs: Any) -> SimpleNamespace:
        assert kwargs["_preload_content"] is False
        return SimpleNamespace(data=json.dumps({"items": items}).encode())
    return call


def cluster(nodes: list[dict] | None = None, pods: list[dict] | None = None) -> SimpleNamespace:
    core = SimpleNamespace(list_node=answering(nodes or []), list_pod_for_all_namespaces=answering(pods or []))
    return SimpleNamespace(api_client=None, core=core)


def gpu_node(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {GPU_POOL_KEY: "dev-gpu"}}, "status": {"allocatable": {GPU_RESOURCE: "1"}}}


def running_pod(job: str, node: str) -> dict:
    return {"metadata": {"name": f"{job}-0", "labels": {TRACE_JOB_LABEL: job}}, "spec": {"nodeName": node},
            "status": {"phase": "Running"}}


def workload(job: str, worker: str = "", admitted: bool = True) -> dict:
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                  {"type": "Admitted", "status": "True" if admitted else "False", "reason": "Admitted" if admitted else "Pending"}]
    status: dict[str, Any] = {"conditions": conditions} | ({"clusterName": worker} if worker else {})
    return {"metadata": {"name": f"job-{job}", "ownerReferences": [{"kind": "Job", "name": job}]}, "status": status}


def trace_job(name: str) -> TraceJob:
    return TraceJob(name=name, team="research", namespace="training", app="rl-training", kind="Job", nodes=1, duration_s=600,
                    submit_s=0, priority="training-standard", pool="dev-gpu", gpus_per_node=1)


def fleet_recorder() -> Recorder:
    """A manager whose jobs a and b run on east and west, each on a node named dev-gpu-0, and c waits."""
    east = cluster([gpu_node("dev-gpu-0")], [running_pod("a", "dev-gpu-0")])
    west = cluster([gpu_node("dev-gpu-0"), gpu_node("dev-gpu-1")], [running_pod("b", "dev-gpu-0")])
    recorder = Recorder(cluster(), [trace_job(name) for name in "abc"], 60.0, {"east": east, "west": west})
    recorder.custom = SimpleNamespace(list_cluster_custom_object=answering([workload("a", "east"), workload("b", "west"),
                                                                            workload("c", admitted=False)]))
    for name in "abc":
        recorder.submitted(name)
    return recorder


def test_each_job_is_recorded_on_the_worker_the_manager_dispatched_it_to_and_nodes_are_told_apart_by_worker():
    recorder = fleet_recorder()
    recorder.sample()
    assert {name: (r.cluster, r.admitted is not None) for name, r in recorder.results.items()} == {
        "a": ("east", True), "b": ("west", True), "c": ("", False)}
    assert sorted(recorder.nodes) == ["east/dev-gpu-0", "west/dev-gpu-0", "west/dev-gpu-1"]
    assert {pool: samples[-1][1:] for pool, samples in recorder.pool_samples.items()} == {"east/dev-gpu": [1, 1], "west/dev-gpu": [1, 2]}
    assert {worker: samples[-1][1:] for worker, samples in recorder.cluster_samples.items()} == {"east": [1, 1], "west": [1, 2]}


def test_the_report_has_a_line_per_worker_and_the_worker_of_each_job(tmp_path):
    recorder = fleet_recorder()
    recorder.sample()
    report = recorder.report("dev", None, "t.yaml", complete=False)
    assert [(c["name"], c["jobs"], c["gpus"], c["peak_gpus_used"], c["mean_utilization"]) for c in report.clusters] == [
        ("east", 1, 1, 1, 1.0), ("west", 1, 2, 1, 0.5)]
    lines = table(report)
    assert lines[3].split()[-3:] == ["worker", "blocks", "(min)"]
    assert [line.split()[-2] for line in lines[4:7]] == ["east", "west", "-"]
    (east,) = [line for line in lines if line.startswith("east ")]
    assert (east.split()[1], east.split()[-3:]) == ("1", ["1", "100%", "1"])
    write_report(report, tmp_path)
    document = json.loads((tmp_path / "report.json").read_text())
    assert [job["cluster"] for job in document["jobs"]] == ["east", "west", ""]
    assert document["clusters"][1]["samples"][-1][1:] == [1, 2]
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_off_a_fleet_the_report_has_no_worker_column_or_lines():
    single = cluster([gpu_node("dev-gpu-0")], [running_pod("a", "dev-gpu-0")])
    recorder = Recorder(single, [trace_job("a")], 60.0)
    recorder.custom = SimpleNamespace(list_cluster_custom_object=answering([workload("a")]))
    recorder.submitted("a")
    recorder.sample()
    report = recorder.report("dev", None, "t.yaml", complete=False)
    assert (report.clusters, list(recorder.pool_samples), report.jobs[0].cluster) == ([], ["dev-gpu"], "")
    assert "worker" not in table(report)[3]
