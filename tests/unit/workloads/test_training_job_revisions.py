"""A running training job is never deleted by a change: each revision is a Job of its own, whose spec
``pulumi up`` leaves alone, and a Job that leaves the program is retained (mock engine registrations)."""

from __future__ import annotations

import pytest

from eks_gpu_training import TrainingJob, TrainingJobArgs
from eks_gpu_training.workloads.templates import rendezvous_service, training_job
from eks_gpu_training.config import TrainingJobConfig
from tests.support.harness import run_main, run_program, stack_config
from tests.support.builders import p5_job

JOB = "kubernetes:batch/v1:Job"
SCHEDULING = "eks-gpu-training:scheduling"


def job_registration(spec):
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=spec)))
    assert graph.error is None, graph.error
    (job,) = graph.of_type(JOB)
    return job


def test_a_jobs_spec_is_never_changed_so_no_change_replaces_and_kills_the_run():
    # Kubernetes refuses changes to a Job's pod template, so Pulumi would replace (delete) the Job.
    job = job_registration(p5_job())
    # And the queue label, which moves a held Job to Kueue's open queue.
    assert job.ignore_changes == ["spec", 'metadata.labels["kueue.x-k8s.io/queue-name"]']
    assert job.delete_before_replace is False


def test_a_job_that_leaves_the_program_is_retained_to_finish_its_run():
    assert job_registration(p5_job()).retain_on_delete is True


def test_revision_one_keeps_the_apps_name_so_existing_jobs_are_untouched():
    job = job_registration(p5_job())
    assert (job.name, job.inputs["metadata"]["name"]) == ("rl-job", "rl-training")


def test_a_new_revision_is_a_new_resource_and_a_new_job_beside_the_previous_one():
    job = job_registration(p5_job(revision=2))
    # A resource of its own: the engine would fill an ignored spec of a replacement from the old state.
    assert (job.name, job.inputs["metadata"]["name"]) == ("rl-job-r2", "rl-training-r2")


def test_a_new_revisions_ranks_find_their_own_rank_zero_through_the_apps_service():
    spec = p5_job(revision=3)
    service = rendezvous_service(spec)
    pod = training_job(spec)["spec"]["template"]
    assert spec.master_address == "rl-training-r3-0.rl-training"
    assert pod["spec"]["subdomain"] == service["metadata"]["name"] == "rl-training"
    # The Service selects every revision's pods, so a previous revision still running keeps its names.
    assert all(pod["metadata"]["labels"][key] == value for key, value in service["spec"]["selector"].items())


def test_the_stack_passes_the_configured_revision_to_the_job():
    config = stack_config("dev")
    app = config[SCHEDULING]["trainingApps"][0]
    config[SCHEDULING]["trainingApps"][0] = {**app, "job": {**app["job"], "revision": 2}}
    graph = run_main(config)
    assert graph.error is None, graph.error
    (job,) = [r for r in graph.of_type(JOB) if r.inputs["metadata"]["name"].startswith("rl-training")]
    assert job.inputs["metadata"]["name"] == "rl-training-r2"
    assert job.retain_on_delete is True


@pytest.mark.parametrize("revision", [0, 10000])
def test_rejects_a_revision_outside_one_to_9999(revision):
    with pytest.raises(ValueError, match="revision"):
        TrainingJobConfig.model_validate({"image": "x", "revision": revision})
