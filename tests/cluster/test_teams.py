"""Teams sharing the fleet as Kueue's cohort treats them: a team borrows what another leaves idle,
the owner gets it back by preemption, and no team runs beyond its quota plus its borrowing limit."""

from __future__ import annotations

import copy

from eks_gpu_training import parse_platform_args
from eks_gpu_training.facts.gpu_nodes import GPU_RESOURCE
from eks_gpu_training.workloads.kueue_queues import pool_flavors, team_cluster_queue, team_queues
from eks_gpu_training.workloads.teams import namespace_quota

from tests.support.environment import holds_for, wait_for
from tests.support.kueue import KUEUE_API, condition


def _usage(env, queue: str, flavor: str) -> dict[str, str]:
    """The ClusterQueue's GPUs in use on ``flavor``: its total and what of it is borrowed."""
    status = env.get(KUEUE_API, "ClusterQueue", queue).get("status") or {}
    for used in status.get("flavorsUsage") or []:
        if used["name"] == flavor:
            gpu = next(r for r in used["resources"] if r["name"] == GPU_RESOURCE)
            return {"total": str(gpu.get("total", "0")), "borrowed": str(gpu.get("borrowed", "0"))}
    return {"total": "0", "borrowed": "0"}


def _patch_queue(env, name: str, spec: dict) -> None:
    env.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name, {"spec": spec})


def test_an_idle_teams_gpus_are_borrowed_and_reclaimed_by_preemption_when_it_submits(dev_cluster):
    """The README's try-out: evaluation's two-node sweep runs on its own GPU and one of research's;
    research's job then takes its GPU back, and the sweep is preempted and waits."""
    env = dev_cluster.env
    flavor = "karpenter-gpu-training"
    assert (dev_cluster.cluster_queue_of("evaluation"), dev_cluster.cluster_queue_of("training")) == ("evaluation", "research")
    sweep_namespace, sweep = dev_cluster.submit_run("eval-sweep")
    try:
        env.expect_job_running(sweep_namespace, sweep, 2)
        # Kueue writes a ClusterQueue's usage shortly after it admits.
        wait_for(lambda: _usage(env, "evaluation", flavor) == {"total": "2", "borrowed": "1"},
                 what="evaluation using one GPU of its own and one of research's")
        namespace, name = dev_cluster.submit_run("rl-training")
        try:
            env.expect_job_running(namespace, name, 1)
            preempted = wait_for(lambda: condition(w := env.workload(sweep_namespace, sweep), "Preempted").get("status") == "True" and w,
                                 what="the sweep preempted")
            assert condition(preempted, "Preempted")["reason"] == "InCohortReclamation"
            assert condition(preempted, "QuotaReserved").get("status") != "True", "the sweep waits for its GPU"
            wait_for(lambda: not env.job_pods(sweep_namespace, sweep), what="the sweep's pods gone")
            wait_for(lambda: _usage(env, "research", flavor) == {"total": "1", "borrowed": "0"},
                     what="research using its own GPU, borrowing none")
        finally:
            env.delete_job(namespace, name)
    finally:
        env.delete_job(sweep_namespace, sweep)


def test_broken_variant_without_reclaim_the_owner_waits_while_the_borrower_runs_on(dev_cluster):
    env = dev_cluster.env
    preemption = copy.deepcopy(env.get(KUEUE_API, "ClusterQueue", "research")["spec"]["preemption"])
    _patch_queue(env, "research", {"preemption": {**preemption, "reclaimWithinCohort": "Never"}})
    sweep_namespace, sweep = dev_cluster.submit_run("eval-sweep")
    try:
        env.expect_job_running(sweep_namespace, sweep, 2)
        namespace, name = dev_cluster.submit_run("rl-training")
        try:
            wait_for(lambda: condition(env.workload(namespace, name), "QuotaReserved"), what="Kueue considering research's job")
            holds_for(lambda: len(env.job_pods(sweep_namespace, sweep)) == 2 and not env.job_pods(namespace, name),
                      seconds=10, what="the borrower running on, the owner waiting")
        finally:
            env.delete_job(namespace, name)
    finally:
        env.delete_job(sweep_namespace, sweep)
        _patch_queue(env, "research", {"preemption": preemption})


def _with_research_borrowing_limit(cluster, gpus: int):
    """The stack's arguments with research limited to borrowing ``gpus`` on p5-training."""
    settings = copy.deepcopy(cluster.stack_file.settings())
    values = {k.split(":", 1)[1]: v for k, v in settings.items() if k.startswith("eks-gpu-training:")}
    teams = values["scheduling"]["teams"]
    research = next(t for t in teams if t["name"] == "research")
    next(q for q in research["quotas"] if q["pool"] == "p5-training")["borrowingLimit"] = gpus
    # Research's two-node app could no longer be admitted, which the stack refuses: this variant is Kueue's view only.
    values["scheduling"]["trainingApps"] = [a for a in values["scheduling"]["trainingApps"] if a["name"] != "finetune"]
    return parse_platform_args({**values, "region": settings["aws:region"]})


def test_no_team_runs_beyond_its_quota_plus_its_borrowing_limit(prod_cluster):
    """Research limited to borrowing nothing on p5-training (its ClusterQueue as the stack makes it
    for that setting): its two-node TrainJob needs 8 GPUs beyond its 8, and waits while
    pretraining's sit idle. Its namespace's ResourceQuota, as the stack sizes it, holds the same cap."""
    env = prod_cluster.env
    limited = _with_research_borrowing_limit(prod_cluster, 0)
    (research,) = [team_cluster_queue(q) for q in team_queues(limited, pool_flavors(limited)) if q.name == "research"]
    shipped = copy.deepcopy(env.get(KUEUE_API, "ClusterQueue", "research")["spec"]["resourceGroups"])
    research_namespace = next(ns for ns in limited.scheduling.namespaces if ns.name == "research")
    assert namespace_quota(research_namespace, limited).gpus == 8 + 8 + 8, "p5: 8 of its own; the Karpenter pool: 8 + 8 borrowed"
    _patch_queue(env, "research", {"resourceGroups": research["spec"]["resourceGroups"]})
    try:
        namespace, name = prod_cluster.submit_group_run("TrainJob", "finetune")
        try:
            reserved = wait_for(lambda: condition(env.workload(namespace, name, "TrainJob"), "QuotaReserved"),
                                what="Kueue considering the TrainJob")
            assert reserved["status"] == "False", reserved
            holds_for(lambda: not env.group_pods(namespace, name), seconds=8, what="the TrainJob waiting")
            # Broken variant: the limit lifted (as shipped), the same TrainJob borrows pretraining's idle GPUs and runs.
            _patch_queue(env, "research", {"resourceGroups": shipped})
            env.expect_group_running(namespace, name, 2, kind="TrainJob")
            wait_for(lambda: _usage(env, "research", "p5-training-tas") == {"total": "16", "borrowed": "8"},
                     what="research using its 8 GPUs and 8 of pretraining's")
        finally:
            env.delete_group("TrainJob", namespace, name)
    finally:
        _patch_queue(env, "research", {"resourceGroups": shipped})


def test_each_teams_namespace_quota_is_its_quota_plus_what_it_may_borrow(any_cluster):
    for namespace in any_cluster.args.scheduling.namespaces:
        assert any_cluster.gpu_quota(namespace.name) == namespace_quota(namespace, any_cluster.args).gpus
