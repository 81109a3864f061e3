"""The simulator's traces: the shipped examples hold for their stacks, bad rows are refused with the
row and the field, and each row becomes a copy of its app that KWOK completes after its duration."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.harness import stack_config

from eks_gpu_training.config import ConfigError
from eks_gpu_training.local.control_plane import COMPLETE_DELAY_ANNOTATION, PULL_DELAY_ANNOTATION, kwok_stages
from eks_gpu_training.local.scale import scaled_stack
from eks_gpu_training.local.recorder import admissions_per_second, wait_reasons
from eks_gpu_training.local.simulate import TRACE_JOB_LABEL, Report, JobResult, was_admitted, job_objects, table, write_report
from eks_gpu_training.local.trace import check_rows, parse_duration, read_trace
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.stack_files import locate_stack
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TRACES = PROJECT_ROOT / "examples" / "traces"


@pytest.fixture(scope="module")
def prod64():
    return scaled_stack(locate_stack("prod"), 64).platform_args()


@pytest.mark.parametrize(("stack", "scale"), [("prod", 64), ("dev", None)])
def test_each_shipped_trace_holds_for_its_stack(stack, scale):
    located = locate_stack(stack)
    args = (scaled_stack(located, scale) if scale else located).platform_args()
    jobs = read_trace(TRACES / f"{stack}.yaml", args)
    assert len(jobs) >= 8
    assert [j.submit_s for j in jobs] == sorted(j.submit_s for j in jobs)
    assert {j.team for j in jobs} == {t.name for t in args.scheduling.teams}


@pytest.mark.parametrize(("text", "seconds"), [(90, 90.0), ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("1h30m", 5400.0),
                                           ("0.5h", 1800.0), ("soon", None), ("", None), (True, None), ("5d", None)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_bad_rows_are_refused_together_each_with_its_row_and_field(prod64):
    rows = [
        {"team": "pretraining", "nodes": 2, "duration": "1h", "color": "red"},
        {"team": "nobody", "nodes": 2, "duration": "1h"},
        {"team": "research", "app": "finetune", "nodes": 65, "duration": "1h"},
        {"team": "research", "nodes": 0, "duration": "never", "submit": -5},
        {"name": "Big_Job", "team": "research", "nodes": 2, "duration": 60, "kind": "CronJob", "priority": "urgent"},
        {"name": "twice", "team": "research", "nodes": 2, "duration": 60},
        {"name": "twice", "team": "research", "nodes": 2, "duration": 60},
        "a job",
    ]
    with pytest.raises(ConfigError) as refused:
        check_rows(rows, prod64, "t.yaml")
    found = {(p.path, p.message) for p in refused.value.problems}
    assert ("t.yaml: jobs[0].color", "is not a field of a trace row; allowed: name, team, namespace, app, kind, nodes, "
            "duration, submit, priority") in found
    assert ("t.yaml: jobs[1].team", "must be one of the stack's teams: pretraining, research; got 'nobody'") in found
    assert ("t.yaml: jobs[2].nodes", "65 nodes exceed pool p5-training's 64") in found
    assert ("t.yaml: jobs[3].nodes", "must be a whole number of nodes, 1 or more; got 0") in found
    assert ("t.yaml: jobs[3].duration", "must be a duration above 0 (90, 90s, 15m, 2h, 1h30m); got 'never'") in found
    assert ("t.yaml: jobs[3].submit", "must be a duration from the start, 0 or more (0, 90s, 15m); got -5") in found
    assert ("t.yaml: jobs[4].name", "'Big_Job' must be a DNS label (a-z, 0-9, '-') of at most 40 characters") in found
    assert ("t.yaml: jobs[4].kind", "must be one of Job, JobSet, TrainJob; got 'CronJob'") in found
    assert ("t.yaml: jobs[4].priority", "must be one of the stack's priority classes: training-critical, "
            "evaluation-normal, data-prep-low") in found
    assert ("t.yaml: jobs[6].name", "'twice' is the name of jobs[5] too") in found
    assert ("t.yaml: jobs[7]", "must be a mapping of name, team, namespace, app, kind, nodes, duration, submit, priority") in found


def test_a_job_beyond_what_its_team_can_ever_reach_is_refused():
    config = stack_config("prod")
    scheduling = config["eks-gpu-training:scheduling"]
    research = next(team for team in scheduling["teams"] if team["name"] == "research")
    research["quotas"][0]["borrowingLimit"] = 0
    scheduling["trainingApps"][1]["nodes"] = 1  # the stack's own finetune fits research's 8 GPUs
    args = platform_args_from_settings(config, "eks-gpu-training")
    with pytest.raises(ConfigError) as refused:
        check_rows([{"team": "research", "app": "finetune", "nodes": 2, "duration": 60}], args)
    (problem,) = refused.value.problems
    assert problem.path == "trace: jobs[0].nodes"
    assert problem.message.startswith("2 nodes needs 16 GPUs on p5-training at once, but team research reaches 8 there")


def test_a_trace_file_that_is_not_a_list_of_jobs_is_refused(tmp_path, prod64):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"job": []}))
    with pytest.raises(ConfigError) as refused:
        read_trace(path, prod64)
    assert refused.value.problems[0].message == "must be a non-empty list of jobs"
    with pytest.raises(ConfigError):
        read_trace(tmp_path / "missing.yaml", prod64)


@pytest.mark.parametrize(("kind", "kinds"), [("Job", ["Job"]), ("JobSet", ["JobSet"]), ("TrainJob", ["TrainingRuntime", "TrainJob"])])
def test_a_row_is_its_app_with_the_rows_size_queue_and_a_completion_delay(prod64, kind, kinds):
    (job,) = check_rows([{"name": "ft", "team": "research", "app": "finetune", "kind": kind, "nodes": 4,
                          "duration": "30m", "priority": "data-prep-low"}], prod64)
    objects = job_objects(job, prod64, speedup=60)
    assert [o["kind"] for o in objects] == kinds
    main = objects[-1]
    assert main["metadata"]["name"] == "ft"
    assert main["metadata"]["namespace"] == "research"
    # The stack holds finetune with job.suspend; a trace job goes to the queue that admits.
    assert main["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == LOCAL_QUEUE != HELD_LOCAL_QUEUE
    text = yaml.safe_dump(objects)
    assert f"{COMPLETE_DELAY_ANNOTATION}: 30.000s" in text
    assert "priorityClassName: data-prep-low" in text
    assert f"{TRACE_JOB_LABEL}: ft" in text
    assert PULL_DELAY_ANNOTATION not in text
    pulled = yaml.safe_dump(job_objects(job, prod64, speedup=60, pull_delay_s=120))
    assert f"{PULL_DELAY_ANNOTATION}: 2.000s" in pulled


COMPLETED_TEMPLATE = ("containerStatuses:\n{{ $origin := index $root.status.containerStatuses $index }}\n- state:\n"
                      "    terminated:\n      exitCode: 0\n      reason: Completed\nphase: Succeeded\n")
"""The shape of KWOK's own pod-complete template (kustomize/stage/pod/fast/pod-complete.yaml), shortened."""


def kwok_stage_folder(folder: Path) -> Path:
    from eks_gpu_training.local.build import KWOK

    fast = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-complete"},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                     "selector": {"matchExpressions": [{"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]}]},
                     "next": {"statusTemplate": COMPLETED_TEMPLATE}}}
    delete = {"metadata": {"name": "pod-delete"}, "spec": {"selector": {"matchExpressions": [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"}]}, "next": {"delete": True}}}
    ready = {"metadata": {"name": "pod-ready"}, "spec": {"selector": {"matchExpressions": [
        {"key": ".status.phase", "operator": "In", "values": ["Pending"]}]}, "next": {"statusTemplate": "phase: Running"}}}
    given = {"pod-complete.yaml": fast, "pod-delete.yaml": delete, "pod-ready.yaml": ready}
    for name in KWOK.data:
        stage = given.get(Path(name).name, {"metadata": {"name": Path(name).stem}, "spec": {}})
        (folder / Path(name).name).write_text(yaml.safe_dump(stage))
    return folder


def test_a_deleted_running_pod_ends_failed_before_it_is_removed_as_a_kubelet_reports_it(tmp_path):
    # A Job's pod keeps the Job controller's tracking finalizer until it is terminal: removed while
    # Running, an evicted rank would stay Terminating for ever.
    stages = {s["metadata"]["name"]: s for s in kwok_stages(kwok_stage_folder(tmp_path))}
    terminate = stages["pod-terminate"]["spec"]
    assert terminate["selector"]["matchExpressions"] == [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
        {"key": ".status.phase", "operator": "In", "values": ["Running", "Pending"]}]
    assert "phase: Failed" in terminate["next"]["statusTemplate"]
    assert "exitCode: 137" in terminate["next"]["statusTemplate"]
    # A pod deleted while its image pulls has no container statuses for the template to index.
    assert "containerStatuses $index" not in terminate["next"]["statusTemplate"]
    assert {"key": ".status.phase", "operator": "NotIn", "values": ["Running", "Pending"]} in \
        stages["pod-delete"]["spec"]["selector"]["matchExpressions"]


def test_kwok_completes_only_pods_that_say_when(tmp_path):
    kwok_dir = kwok_stage_folder(tmp_path)
    stages = {s["metadata"]["name"]: s for s in kwok_stages(kwok_dir)}
    assert "pod-complete" not in stages
    timed = stages["timed-pod-complete"]["spec"]
    assert {"key": f'.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]', "operator": "Exists"} in timed["selector"]["matchExpressions"]
    assert timed["delay"]["durationFrom"] == {"expressionFrom": f'.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]'}
    helm = stages["helm-job-pod-complete"]["spec"]["selector"]["matchExpressions"]
    assert not any("annotations" in e["key"] for e in helm)


def test_a_pod_that_names_its_image_pull_runs_that_long_after_it_is_bound(tmp_path):
    """The simulator's image pull: KWOK's pod-ready stage split in two, the pods with KWOK's
    pod-ready delay annotation made Ready that long after binding, every other pod at once."""
    stages = {s["metadata"]["name"]: s for s in kwok_stages(kwok_stage_folder(tmp_path))}
    pulled = stages["pulled-pod-ready"]["spec"]
    assert {"key": f'.metadata.annotations["{PULL_DELAY_ANNOTATION}"]', "operator": "Exists"} in pulled["selector"]["matchExpressions"]
    assert pulled["delay"]["durationFrom"] == {"expressionFrom": f'.metadata.annotations["{PULL_DELAY_ANNOTATION}"]'}
    at_once = stages["pod-ready"]["spec"]["selector"]["matchExpressions"]
    assert {"key": f'.metadata.annotations["{PULL_DELAY_ANNOTATION}"]', "operator": "DoesNotExist"} in at_once
    assert "delay" not in stages["pod-ready"]["spec"]


def test_the_report_is_a_table_json_and_a_plot(tmp_path):
    jobs = [JobResult("a", "research", "research", "Job", "p5-training", 2, 16, submitted=0.0, admitted=60.0,
                      finished=600.0, wait_s=60.0, blocks=["nn-1"], layer2_blocks=["nn-2"],
                      wait_reason="couldn't assign flavors to pod set main: topology \"aws-network\" allows to fit only 3 out of 4 pod(s)")]
    samples = [[0.0, 0, 32], [60.0, 16, 32], [600.0, 0, 32]]
    report = Report("prod", 4, 60.0, "t.yaml", jobs,
                    [{"name": "p5-training", "gpus": 32, "mean_utilization": 0.33, "peak_gpus_used": 16, "samples": samples}],
                    [{"name": "research", "jobs": 1, "mean_wait_s": 60.0, "max_wait_s": 60.0, "max_queued": 1,
                      "samples": [[0.0, 1, 0], [60.0, 0, 16]]}], 12.0, True)
    lines = table(report)
    assert any(line.startswith("a ") and "1 L3 / 1 L2" in line for line in lines)
    assert report.admissions_per_second == 0.0  # given, not measured: Recorder.report fills it
    assert any("allows to fit only N out of N pod(s)" in line for line in table(
        Report(**{**report.__dict__, "wait_reasons": wait_reasons(jobs), "admissions_per_second": admissions_per_second(jobs)})))
    assert admissions_per_second(jobs) == 1 / 60
    written = write_report(report, tmp_path)
    import json

    document = json.loads((tmp_path / "report.json").read_text())
    assert {"name", "team", "nodes", "submitted", "admitted", "finished", "wait_s", "blocks"} <= set(document["jobs"][0])
    assert document["pools"][0]["name"] == "p5-training"
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written == [tmp_path / "report.json", tmp_path / "report.png"]


@pytest.mark.parametrize(("conditions", "admitted"), [
    ([("Admitted", "True", "Admitted")], True),
    # Admitted, ran and lost its reservation as it finished, all between two samples (seen with Kueue 0.19).
    ([("Admitted", "False", "NoReservation"), ("PodsReady", "True", "Started"), ("Finished", "True", "Succeeded")], True),
    ([("Admitted", "False", "NoReservation"), ("Finished", "True", "Succeeded")], True),
    ([("QuotaReserved", "False", "Pending")], False),
    ([("Finished", "True", "Failed")], False),
])
def test_a_workload_counts_as_admitted_once_its_conditions_show_it_was(conditions, admitted):
    found = [{"type": kind, "status": status, "reason": reason} for kind, status, reason in conditions]
    assert was_admitted(found) is admitted
