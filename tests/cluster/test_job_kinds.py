"""Training apps run as JobSets and Kubeflow Trainer TrainJobs, as the real JobSet, Trainer, Kueue,
scheduler and disruption controllers treat them: admitted whole, one pod per node under one
layer-3 block, every rank restarted when one fails, torchrun's environment filled in, each rank
kept by the app's PodDisruptionBudget."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration, network_layer_key

from tests.support.clusters import submit_jobset_run
from tests.support.environment import GROUP_APIS, holds_for, wait_for
from tests.support.kueue import condition
from tests.support.manifests import pod_manifest, unique


@pytest.fixture(params=["JobSet", "TrainJob"])
def prod_group_run(request, prod_cluster):
    """A two-node run on prod's p5 pool: a JobSet of rl-training, or a run of prod's TrainJob app
    (finetune, team research); deleted afterwards."""
    kind = request.param
    if kind == "JobSet":
        namespace, name = submit_jobset_run(prod_cluster, "rl-training")
    else:
        namespace, name = prod_cluster.submit_group_run("TrainJob", "finetune")
    yield kind, namespace, name
    prod_cluster.env.delete_group(kind, namespace, name)


def _nodes(env, pods):
    return [env.core.read_node(p.spec.node_name) for p in pods]


def test_a_two_node_group_is_admitted_whole_one_pod_per_node_under_one_layer3_block(prod_cluster, prod_group_run):
    env = prod_cluster.env
    kind, namespace, name = prod_group_run
    pods = env.expect_group_running(namespace, name, 2, kind=kind)
    nodes = _nodes(env, pods)
    assert len({n.metadata.name for n in nodes}) == 2, "one pod per node"
    assert {n.metadata.labels[GPU_POOL_KEY] for n in nodes} == {"p5-training"}
    assert len({n.metadata.labels[network_layer_key(3)] for n in nodes}) == 1, "both pods under one layer-3 block"
    workload = env.expect_group_admitted(kind, namespace, name)
    (pod_set,) = workload["spec"]["podSets"]
    assert pod_set["count"] == 2, "Kueue admitted one workload of both pods"


def test_trainer_fills_in_torchruns_environment_and_the_jobset_gives_ranks_their_names(prod_cluster):
    env = prod_cluster.env
    namespace, name = prod_cluster.submit_group_run("TrainJob", "finetune")
    try:
        pods = env.expect_group_running(namespace, name, 2, kind="TrainJob")
        ranks = {}
        for pod in pods:
            (container,) = pod.spec.containers
            assert container.name == "node"
            environment = {e.name: e for e in container.env}
            assert environment["PET_NNODES"].value == "2"
            assert environment["PET_NPROC_PER_NODE"].value == "8"
            assert environment["PET_MASTER_ADDR"].value == f"{name}-node-0-0.{name}"
            assert environment["PET_MASTER_PORT"].value == "29500"
            ranks[pod.metadata.annotations["batch.kubernetes.io/job-completion-index"]] = pod
            # Rank 0's DNS name resolves through the JobSet's headless Service: the pods are its hostname and subdomain.
            assert pod.spec.subdomain == name
        assert ranks["0"].spec.hostname == f"{name}-node-0-0"
        service = env.core.read_namespaced_service(name, namespace)
        assert service.spec.cluster_ip == "None"
    finally:
        env.delete_group("TrainJob", namespace, name)


def test_broken_variant_with_one_gpu_node_taken_no_part_of_a_group_starts(prod_cluster):
    """All or nothing: one of the pool's nodes taken, Kueue admits no part of the JobSet."""
    env = prod_cluster.env
    node = env.nodes(f"{GPU_POOL_KEY}=p5-training")[0]
    holder = unique("holder")
    env.ensure_namespace("priority-probe")
    env.apply(pod_manifest(holder, "priority-probe", requests={GPU_RESOURCE: node.status.allocatable[GPU_RESOURCE]},
                           tolerations=[gpu_toleration()], node_selector={"kubernetes.io/hostname": node.metadata.name},
                           priority_class="training-critical"))
    env.expect_running("priority-probe", holder)
    namespace, name = submit_jobset_run(prod_cluster, "rl-training")
    try:
        wait_for(lambda: condition(env.workload(namespace, name, "JobSet"), "QuotaReserved"), what="Kueue considering the JobSet")
        holds_for(lambda: not env.group_pods(namespace, name)
                  and condition(env.workload(namespace, name, "JobSet"), "Admitted").get("status") != "True",
                  seconds=8, what="the JobSet held whole, no pod made")
    finally:
        env.delete_group("JobSet", namespace, name)
        env.delete_pod("priority-probe", holder)


def _fail_pod(env, namespace: str, pod: str) -> None:
    """The pod's container exits with an error, as its kubelet reports it."""
    env.core.patch_namespaced_pod_status(pod, namespace, {"status": {"phase": "Failed", "reason": "Error"}})


def _group_status(env, kind: str, namespace: str, name: str) -> dict:
    # A TrainJob's JobSet carries its name.
    return (env.get(GROUP_APIS["JobSet"], "JobSet", name, namespace) or {}).get("status") or {}


def test_failing_one_rank_restarts_every_rank_once_and_the_job_runs_on(prod_cluster, prod_group_run):
    env = prod_cluster.env
    kind, namespace, name = prod_group_run
    before = env.expect_group_running(namespace, name, 2, kind=kind)
    _fail_pod(env, namespace, before[0].metadata.name)
    wait_for(lambda: _group_status(env, kind, namespace, name).get("restarts") == 1, what=f"the {kind} restarted once")
    after = env.expect_group_running(namespace, name, 2, kind=kind)
    assert not {p.metadata.uid for p in after} & {p.metadata.uid for p in before}, "every rank made again, not only the failed one"
    assert {p.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] for p in after} == {"1"}
    holds_for(lambda: not _group_status(env, kind, namespace, name).get("terminalState"), seconds=5,
              what=f"the {kind} running on after its restart")


def test_broken_variant_with_no_restarts_left_one_failed_rank_fails_the_whole_jobset(prod_cluster):
    env = prod_cluster.env
    namespace, name = submit_jobset_run(prod_cluster, "rl-training", max_restarts=0)
    try:
        pods = env.expect_group_running(namespace, name, 2)
        _fail_pod(env, namespace, pods[0].metadata.name)
        wait_for(lambda: _group_status(env, "JobSet", namespace, name).get("terminalState") == "Failed",
                 what="the JobSet failed")
        assert _group_status(env, "JobSet", namespace, name).get("restarts", 0) == 0
        wait_for(lambda: not [p for p in env.group_pods(namespace, name) if p.status.phase == "Running"],
                 what="the other rank stopped with it")
    finally:
        env.delete_group("JobSet", namespace, name)


def test_the_apps_pdb_refuses_to_evict_a_rank_of_a_running_group(prod_cluster, prod_group_run):
    env = prod_cluster.env
    kind, namespace, name = prod_group_run
    pod = env.expect_group_running(namespace, name, 2, kind=kind)[0]
    app = "finetune" if kind == "TrainJob" else "rl-training"
    wait_for(lambda: (env.policy.read_namespaced_pod_disruption_budget(app, namespace).status.current_healthy or 0) >= 2,
             what="the PDB counting both ranks healthy")
    with pytest.raises(ApiException) as refused:
        env.core.create_namespaced_pod_eviction(pod.metadata.name, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.metadata.name, "namespace": namespace}})
    assert refused.value.status == 429, refused.value.body
    assert "disruption budget" in refused.value.body


def test_devs_jobset_app_is_created_held_and_runs_once_submitted(dev_cluster):
    env = dev_cluster.env
    namespace, name = dev_cluster.submit_group_run("JobSet", "finetune")
    try:
        (pod,) = env.expect_group_running(namespace, name, 1)
        assert env.core.read_node(pod.spec.node_name).metadata.labels[GPU_POOL_KEY] == "dev-gpu"
    finally:
        env.delete_group("JobSet", namespace, name)
    held = env.get(GROUP_APIS["JobSet"], "JobSet", "finetune", "training")
    assert held["spec"]["suspend"] is True
    assert not env.group_pods("training", "finetune")
