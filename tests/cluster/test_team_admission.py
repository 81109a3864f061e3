"""A team's namespaces as Kueue and the API server treat them (``workloads/team_admission.py``): a
job without a queue label is held, never placed; a GPU pod outside a Job is refused; a pod of a
priority class the team may not use is refused. Each with its broken variant."""

from __future__ import annotations

from typing import Any

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration
from eks_gpu_training.workloads.job_sets import JOBSET_API_VERSION
from eks_gpu_training.workloads.team_admission import (
    GPU_POD_MESSAGE,
    GPU_POD_POLICY,
    JOB_CLASS_MESSAGE,
    JOB_CLASS_POLICY,
    PRIORITY_QUOTA_NAME,
)

from tests.support.environment import expect_refused, holds_for, wait_for
from tests.support.kueue import condition, conditions
from tests.support.manifests import PAUSE_IMAGE, pod_manifest, unique
from tests.support.policy_probes import VAP, attempt, policy_refuses

RESEARCH = "research"
"""Prod's research team's namespace: it may use evaluation-normal and data-prep-low."""
UNMANAGED = "queue-probe"
"""A namespace of the tests' own, outside Kueue's managedJobsNamespaceSelector."""
DRY_RUN = "All"
SMALL = {"cpu": "100m", "memory": "64Mi"}
"""CPU and memory requests: the namespace's ResourceQuota limits both, and refuses pods without them."""


def _gpu_pool(cluster) -> tuple[str, int]:
    pool = cluster.args.gpu_node_groups[0]
    (node, *_) = cluster.env.nodes(f"{GPU_POOL_KEY}={pool.name}")
    return pool.name, int(node.status.allocatable[GPU_RESOURCE])


def _gpu_job(name: str, namespace: str, pool: str, gpus: int) -> dict[str, Any]:
    """A Job of one pod taking a whole node of ``pool``, with no queue label."""
    pod = pod_manifest(name, namespace, requests={**SMALL, GPU_RESOURCE: str(gpus)}, tolerations=[gpu_toleration()],
                       node_selector={GPU_POOL_KEY: pool}, restartPolicy="Never", terminationGracePeriodSeconds=0)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"backoffLimit": 0, "template": {"metadata": {}, "spec": pod["spec"]}}}


def _job_uid(env, namespace: str, name: str) -> str:
    return env.batch.read_namespaced_job(name, namespace).metadata.uid


def test_a_job_without_a_queue_label_in_a_team_namespace_is_held_by_kueue_and_never_placed(prod_cluster):
    """Research's GPUs sit idle, yet its unlabelled job gets none: Kueue suspends it at creation and
    its Workload names no LocalQueue, so no ClusterQueue admits it."""
    env = prod_cluster.env
    pool, gpus = _gpu_pool(prod_cluster)
    name = unique("unlabelled")
    env.apply(_gpu_job(name, RESEARCH, pool, gpus))
    try:
        uid = _job_uid(env, RESEARCH, name)
        (workload,) = wait_for(lambda: env.workloads(RESEARCH, job_uid=uid), what="Kueue making the job's Workload")
        assert workload["spec"].get("queueName", "") == "", workload["spec"]
        holds_for(lambda: env.batch.read_namespaced_job(name, RESEARCH).spec.suspend and not env.job_pods(RESEARCH, name)
                  and condition(env.workloads(RESEARCH, job_uid=uid)[0], "QuotaReserved").get("status") != "True",
                  seconds=8, what="the job suspended, with no pods and no quota reserved")
        assert not condition(env.workloads(RESEARCH, job_uid=uid)[0], "Admitted").get("status") == "True", conditions(workload)
    finally:
        env.delete_job(RESEARCH, name)


def test_broken_variant_a_job_kueue_does_not_manage_is_placed_at_once(prod_cluster):
    """The same Job where Kueue leaves unlabelled jobs alone (a namespace outside its selector, as
    every team namespace was with ``manageJobsWithoutQueueName`` off): kube-scheduler places it on a
    whole GPU node at once, counted by no ClusterQueue."""
    env = prod_cluster.env
    env.ensure_namespace(UNMANAGED)
    pool, gpus = _gpu_pool(prod_cluster)
    name = unique("unmanaged")
    env.apply(_gpu_job(name, UNMANAGED, pool, gpus))
    try:
        (pod,) = wait_for(lambda: [p for p in env.job_pods(UNMANAGED, name) if p.spec.node_name], what="the job's pod placed")
        assert pod.spec.node_name in {n.metadata.name for n in env.nodes(f"{GPU_POOL_KEY}={pool}")}
        assert not env.workloads(UNMANAGED, job_uid=_job_uid(env, UNMANAGED, name))
    finally:
        env.delete_job(UNMANAGED, name)


def _bare_gpu_pod(name: str, pool: str, gpus: int, **metadata: Any) -> dict[str, Any]:
    pod = pod_manifest(name, RESEARCH, requests={**SMALL, GPU_RESOURCE: str(gpus)}, tolerations=[gpu_toleration()],
                       node_selector={GPU_POOL_KEY: pool}, terminationGracePeriodSeconds=0)
    pod["metadata"].update(metadata)
    return pod


def _dry_run_pod(env, pod: dict[str, Any]) -> Any:
    return env.core.create_namespaced_pod(pod["metadata"]["namespace"], pod, dry_run=DRY_RUN)


def test_a_gpu_pod_outside_a_job_is_refused_in_a_team_namespace_and_a_jobs_is_not(prod_cluster):
    env = prod_cluster.env
    pool, gpus = _gpu_pool(prod_cluster)
    owner = {"name": "probe", "uid": "00000000-0000-4000-8000-000000000000", "controller": True}
    policy_refuses(GPU_POD_POLICY, GPU_POD_MESSAGE, lambda: _dry_run_pod(env, _bare_gpu_pod(unique("bare"), pool, gpus)))
    # A Deployment's pod (its ReplicaSet's), and one asking for the GPU in an init container only.
    replica_set = {**owner, "apiVersion": "apps/v1", "kind": "ReplicaSet"}
    policy_refuses(GPU_POD_POLICY, GPU_POD_MESSAGE, lambda: _dry_run_pod(
        env, _bare_gpu_pod(unique("deployment"), pool, gpus, ownerReferences=[replica_set])))
    init = pod_manifest(unique("init"), RESEARCH, requests=SMALL)
    init["spec"]["initContainers"] = [{"name": "init", "image": PAUSE_IMAGE, "resources": {
        "requests": {**SMALL, GPU_RESOURCE: "1"}, "limits": {GPU_RESOURCE: "1"}}}]
    policy_refuses(GPU_POD_POLICY, GPU_POD_MESSAGE, lambda: _dry_run_pod(env, init))
    # A Job's pod, and a pod asking for no GPU, pass.
    job = {**owner, "apiVersion": "batch/v1", "kind": "Job"}
    _dry_run_pod(env, _bare_gpu_pod(unique("job-pod"), pool, gpus, ownerReferences=[job]))
    _dry_run_pod(env, pod_manifest(unique("cpu"), RESEARCH, requests=SMALL))


def test_broken_variant_the_policy_unbound_a_bare_gpu_pod_is_placed(prod_cluster):
    env = prod_cluster.env
    binding = next(o for o in prod_cluster.cluster.platform.objects
                   if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == GPU_POD_POLICY)
    pool, gpus = _gpu_pool(prod_cluster)
    name = unique("bare")
    env.delete(VAP, "ValidatingAdmissionPolicyBinding", GPU_POD_POLICY)
    try:
        wait_for(lambda: attempt(lambda: _dry_run_pod(env, _bare_gpu_pod(unique("bare"), pool, gpus))) is not None,
                 what="the bare pod admitted once the binding is gone")
        env.apply(_bare_gpu_pod(name, pool, gpus))
        env.expect_bound(RESEARCH, name)
    finally:
        env.delete_pod(RESEARCH, name)
        env.apply(binding)
        wait_for(lambda: attempt(lambda: _dry_run_pod(env, _bare_gpu_pod(unique("bare"), pool, gpus))) is None,
                 what="the binding back in force")


def _pod_of_class(namespace: str, priority_class: str | None) -> dict[str, Any]:
    return pod_manifest(unique("priority"), namespace, requests=SMALL, priority_class=priority_class)


def test_a_team_namespace_refuses_pods_of_classes_its_team_may_not_use(prod_cluster):
    env = prod_cluster.env
    for refused in ("training-critical", "system-node-critical", "system-cluster-critical"):
        message = expect_refused(lambda: _dry_run_pod(env, _pod_of_class(RESEARCH, refused)))
        assert f"exceeded quota: {PRIORITY_QUOTA_NAME}" in message, message
        assert "limited: pods=0" in message, message
    for allowed in ("evaluation-normal", "data-prep-low", None):
        _dry_run_pod(env, _pod_of_class(RESEARCH, allowed))
    # Pretraining may use training-critical in its namespace.
    _dry_run_pod(env, _pod_of_class("training", "training-critical"))


def test_broken_variant_without_the_priority_quota_research_runs_training_critical(prod_cluster):
    env = prod_cluster.env
    quota = next(o for o in prod_cluster.cluster.platform.objects if o["kind"] == "ResourceQuota"
                 and o["metadata"]["name"] == PRIORITY_QUOTA_NAME and o["metadata"]["namespace"] == RESEARCH)
    env.delete("v1", "ResourceQuota", PRIORITY_QUOTA_NAME, RESEARCH)
    try:
        wait_for(lambda: attempt(lambda: _dry_run_pod(env, _pod_of_class(RESEARCH, "training-critical"))) is not None,
                 what="a training-critical pod admitted in research")
    finally:
        env.apply(quota)
        wait_for(lambda: env.core.read_namespaced_resource_quota(PRIORITY_QUOTA_NAME, RESEARCH).status.hard,
                 what="the quota counted again")


def test_verify_reads_each_teams_queue_enforced_and_priorities_limited_from_the_cluster(prod_cluster):
    from eks_gpu_training.verify.snapshot import read_snapshot
    from eks_gpu_training.verify.team_isolation import team_admission

    rows = team_admission(read_snapshot(str(prod_cluster.kubeconfig), with_stack=True), prod_cluster.args)
    assert {r.item: r.status for r in rows} == {
        "team-queue/pretraining": "pass", "team-priorities/pretraining": "pass",
        "team-queue/research": "pass", "team-priorities/research": "pass"}, rows


def _job_of_class(namespace: str, priority_class: str) -> dict[str, Any]:
    pod = pod_manifest("main", namespace, requests=SMALL, priority_class=priority_class, restartPolicy="Never")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": unique("class"), "namespace": namespace},
            "spec": {"template": {"spec": pod["spec"]}}}


def _dry_run_job(env, job: dict[str, Any]) -> Any:
    return env.batch.create_namespaced_job(job["metadata"]["namespace"], job, dry_run=DRY_RUN)


def test_a_job_or_jobset_of_a_class_its_team_may_not_use_is_refused_before_kueue_admits_it(prod_cluster):
    """Its pods would be refused by the quota only once Kueue had admitted it, holding the team's
    quota (and with blockAdmission every admission) until the requeue."""
    env = prod_cluster.env
    policy_refuses(JOB_CLASS_POLICY, JOB_CLASS_MESSAGE, lambda: _dry_run_job(env, _job_of_class(RESEARCH, "training-critical")))
    job = _job_of_class(RESEARCH, "training-critical")
    group, version = JOBSET_API_VERSION.split("/")
    jobset = {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": {"name": unique("class"), "namespace": RESEARCH},
              "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "template": {"spec": job["spec"]}}]}}
    policy_refuses(JOB_CLASS_POLICY, JOB_CLASS_MESSAGE, lambda: env.custom.create_namespaced_custom_object(
        group, version, RESEARCH, "jobsets", jobset, dry_run=DRY_RUN))
    _dry_run_job(env, _job_of_class(RESEARCH, "evaluation-normal"))
    _dry_run_job(env, _job_of_class("training", "training-critical"))


def test_broken_variant_the_job_class_policy_unbound_research_submits_a_training_critical_job(prod_cluster):
    env = prod_cluster.env
    binding = next(o for o in prod_cluster.cluster.platform.objects
                   if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == JOB_CLASS_POLICY)
    env.delete(VAP, "ValidatingAdmissionPolicyBinding", JOB_CLASS_POLICY)
    try:
        wait_for(lambda: attempt(lambda: _dry_run_job(env, _job_of_class(RESEARCH, "training-critical"))) is not None,
                 what="the training-critical Job admitted once the binding is gone")
    finally:
        env.apply(binding)
        wait_for(lambda: attempt(lambda: _dry_run_job(env, _job_of_class(RESEARCH, "training-critical"))) is None,
                 what="the binding back in force")
