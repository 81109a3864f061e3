"""The stacks' training jobs as Kueue, the scheduler and the disruption controller treat them:
admitted whole or not at all, one pod per node, close together on the network, protected from
eviction, and waiting in Kueue beyond a namespace's cap. Karpenter's side is ``test_karpenter``."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration, network_layer_key
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE

from tests.support.clusters import stack_variant, start
from tests.support.environment import holds_for, wait_for
from tests.support.kueue import KUEUE_API, QUEUE_LABEL, condition
from tests.support.manifests import pod_manifest, unique


def _submit(env, namespace: str, name: str) -> None:
    """Move a held job to its queue, as the docs tell a user to
    (``kubectl label job <job> kueue.x-k8s.io/queue-name=gpu-queue --overwrite``)."""
    env.batch.patch_namespaced_job(name, namespace, {"metadata": {"labels": {QUEUE_LABEL: LOCAL_QUEUE}}})


@pytest.fixture
def prod_job(prod_cluster):
    """The prod stack's own two-node job, submitted; deleted afterwards (the platform's copy is held)."""
    namespace, name = prod_cluster.submit_run("rl-training")
    yield namespace, name
    prod_cluster.env.delete_job(namespace, name)


def test_the_prod_job_is_created_held_and_kueue_leaves_it_suspended(prod_cluster):
    env = prod_cluster.env
    job = env.batch.read_namespaced_job("rl-training", "training")
    assert job.metadata.labels[QUEUE_LABEL] == HELD_LOCAL_QUEUE
    holds_for(lambda: env.batch.read_namespaced_job("rl-training", "training").spec.suspend
              and not env.job_pods("training", "rl-training"), seconds=3, what="the held job suspended")


def test_relabelling_the_held_job_as_the_docs_say_starts_it(prod_cluster):
    env = prod_cluster.env
    _submit(env, "training", "rl-training")
    try:
        env.expect_job_running("training", "rl-training", 2)
    finally:
        env.delete_job("training", "rl-training")
        env.apply(prod_cluster.platform_object("Job", "rl-training"))


def test_kueue_admits_the_prod_job_whole_one_pod_per_gpu_node_under_one_layer3_block(prod_cluster, prod_job):
    env = prod_cluster.env
    namespace, name = prod_job
    pods = env.expect_job_running(namespace, name, 2)
    nodes = [env.core.read_node(p.spec.node_name) for p in pods]
    assert len({n.metadata.name for n in nodes}) == 2, "one pod per node"
    assert {n.metadata.labels[GPU_POOL_KEY] for n in nodes} == {"p5-training"}
    assert len({n.metadata.labels[network_layer_key(3)] for n in nodes}) == 1, "both pods under one layer-3 block"
    env.expect_admitted(namespace, name)


def test_the_running_jobs_pdb_refuses_to_evict_a_training_pod(prod_cluster, prod_job):
    env = prod_cluster.env
    namespace, name = prod_job
    pod = env.expect_job_running(namespace, name, 2)[0]
    wait_for(lambda: (env.policy.read_namespaced_pod_disruption_budget("rl-training", namespace).status.current_healthy or 0) >= 2,
             what="the PDB counting both pods healthy")
    with pytest.raises(ApiException) as refused:
        env.core.create_namespaced_pod_eviction(pod.metadata.name, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.metadata.name, "namespace": namespace}})
    assert refused.value.status == 429, refused.value.body
    assert "disruption budget" in refused.value.body


def test_broken_variant_a_pdb_selecting_other_pods_lets_the_eviction_through(prod_cluster, prod_job):
    env = prod_cluster.env
    namespace, name = prod_job
    pod = env.expect_job_running(namespace, name, 2)[0]
    original = env.policy.read_namespaced_pod_disruption_budget("rl-training", namespace)
    selector = original.spec.selector.match_labels
    env.policy.patch_namespaced_pod_disruption_budget("rl-training", namespace, {"spec": {"selector": {
        "matchLabels": {**selector, "app": "something-else"}}}})
    try:
        wait_for(lambda: _evicted(env, namespace, pod.metadata.name), what="the eviction allowed", timeout=30)
    finally:
        env.policy.patch_namespaced_pod_disruption_budget("rl-training", namespace, {"spec": {"selector": {
            "matchLabels": selector}}})


def _evicted(env, namespace: str, pod: str) -> bool:
    try:
        env.core.create_namespaced_pod_eviction(pod, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
        return True
    except ApiException as error:
        if error.status == 429:
            return False
        raise


def test_with_one_gpu_node_free_the_two_node_job_stays_suspended(prod_cluster):
    """All or nothing: one of the pool's nodes taken, Kueue admits no part of the job."""
    env = prod_cluster.env
    node = env.nodes(f"{GPU_POOL_KEY}=p5-training")[0]
    gpus = node.status.allocatable[GPU_RESOURCE]
    holder = unique("holder")
    env.ensure_namespace("priority-probe")
    env.apply(pod_manifest(holder, "priority-probe", requests={GPU_RESOURCE: gpus}, tolerations=[gpu_toleration()],
                           node_selector={"kubernetes.io/hostname": node.metadata.name}, priority_class="training-critical"))
    env.expect_running("priority-probe", holder)
    namespace, name = prod_cluster.submit_run("rl-training")
    try:
        workload = env.expect_suspended(namespace, name)
        assert condition(workload, "Admitted").get("status") != "True"
    finally:
        env.delete_job(namespace, name)
        env.delete_pod("priority-probe", holder)


def test_a_job_beyond_what_its_team_can_reach_on_its_pool_stays_pending(prod_cluster):
    """Prod's teams share a cohort: on the job's pool its team reaches its own quota and what the
    other teams lend, the cohort's whole quota there; one pod more waits in Kueue."""
    env = prod_cluster.env
    team = env.get(KUEUE_API, "ClusterQueue", prod_cluster.cluster_queue_of("training"))
    flavor = "p5-training-tas"
    cohort = [q for q in env.list(KUEUE_API, "ClusterQueue") if q["spec"].get("cohortName") == team["spec"]["cohortName"]]
    gpus = sum(int(r["nominalQuota"]) for q in cohort for g in q["spec"]["resourceGroups"] for f in g["flavors"]
               if f["name"] == flavor for r in f["resources"] if r["name"] == GPU_RESOURCE)
    assert gpus == 16, "both teams' halves of p5-training"
    _waits_for_quota(prod_cluster, parallelism=gpus // _gpus_per_pod(prod_cluster, "rl-training") + 1)


def _gpus_per_pod(cluster, app: str) -> int:
    container = cluster.platform_object("Job", app)["spec"]["template"]["spec"]["containers"][0]
    return int(container["resources"]["requests"][GPU_RESOURCE])


def _waits_for_quota(cluster, *, parallelism: int) -> None:
    """A run of the stack's job at ``parallelism`` pods stays suspended, Kueue reserving no quota for it."""
    namespace, name = cluster.submit_run("rl-training", parallelism=parallelism)
    try:
        reserved = condition(cluster.env.expect_suspended(namespace, name), "QuotaReserved")
        assert reserved.get("status") == "False", reserved
        assert "insufficient" in reserved.get("message", "").lower(), reserved
    finally:
        cluster.env.delete_job(namespace, name)


@pytest.fixture(scope="module")
def prod_capped_cluster(tmp_path_factory):
    """Prod without teams (the training namespace and its Job app alone, a ClusterQueue of its own),
    the namespace capped at its job's 16 GPUs, below the fleet's 32."""
    def cap(config):
        scheduling = config["eks-gpu-training:scheduling"]
        scheduling["teams"] = []
        scheduling["namespaces"] = scheduling["namespaces"][:1]
        scheduling["trainingApps"] = scheduling["trainingApps"][:1]
        scheduling["namespaces"][0]["quota"]["gpus"] = 16

    folder = tmp_path_factory.mktemp("prod-capped")
    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", cap))


def test_a_job_beyond_an_explicit_namespace_cap_waits_in_kueue_instead_of_being_refused(prod_capped_cluster):
    assert prod_capped_cluster.gpu_quota("training") == 16
    # Three nodes' worth: within the fleet (two managed nodes and Karpenter's 16 GPUs), beyond the cap.
    _waits_for_quota(prod_capped_cluster, parallelism=3)
