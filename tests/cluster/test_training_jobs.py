"""The stacks' training jobs as Kueue, the scheduler, the disruption controller and Karpenter
treat them: admitted whole or not at all, one pod per node, close together on the network,
protected from eviction, and on Karpenter's nodes within the pool's GPU limit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration, network_layer_key

from kube import holds_for, pod_manifest, unique, wait_for
from test_priority_and_quota import _quota_gpus

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SUBMITTED_QUEUE = "gpu-queue"
"""The LocalQueue a held job is moved to to run (the README's submit step)."""
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _rendered_job(cluster, app: str) -> dict:
    for obj in cluster.cluster.platform.objects:
        if obj["kind"] == "Job" and obj["metadata"]["name"] == app:
            return copy.deepcopy(obj)
    raise AssertionError(f"the stack renders no Job {app}")


def _submit(kube, namespace: str, name: str) -> None:
    """Move a held job to its queue, as the docs tell a user to
    (``kubectl label job <job> kueue.x-k8s.io/queue-name=gpu-queue --overwrite``)."""
    kube.batch.patch_namespaced_job(name, namespace, {"metadata": {"labels": {QUEUE_LABEL: SUBMITTED_QUEUE}}})


def _copy_job(cluster, app: str, *, parallelism: int | None = None) -> tuple[str, str]:
    """A new run of the stack's job (its own name), submitted to the queue."""
    job = _rendered_job(cluster, app)
    name = unique(app)
    job["metadata"] = {"name": name, "namespace": job["metadata"]["namespace"],
                       "labels": {**job["metadata"]["labels"], QUEUE_LABEL: SUBMITTED_QUEUE}}
    job["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] = SUBMITTED_QUEUE
    if parallelism is not None:
        job["spec"]["parallelism"] = job["spec"]["completions"] = parallelism
    cluster.kube.apply(job)
    return job["metadata"]["namespace"], name


def _delete_job(kube, namespace: str, name: str) -> None:
    kube.delete_job(namespace, name)


def _job_pods(kube, namespace: str, name: str):
    return [p for p in kube.pods(namespace, f"batch.kubernetes.io/job-name={name}") if p.metadata.deletion_timestamp is None]


def _running(kube, namespace: str, name: str, count: int):
    try:
        return wait_for(lambda: len(pods := [p for p in _job_pods(kube, namespace, name) if p.status.phase == "Running"]) == count
                        and pods, what=f"{count} pods of job {name} Running", timeout=180)
    except AssertionError as error:
        workload = _workload(kube, namespace, name)
        conditions = [(c["type"], c["status"], c.get("message", "")) for c in (workload.get("status") or {}).get("conditions") or []]
        pods = [(p.metadata.name, p.status.phase, p.spec.node_name, kube.scheduling_message(namespace, p.metadata.name))
                for p in _job_pods(kube, namespace, name)]
        nodes = [kube.node_requests(n.metadata.name) for n in kube.nodes("role=gpu-training")]
        raise AssertionError(f"{error}; workload conditions {conditions}; pods {pods}; GPU nodes {nodes}") from None


def _workload(kube, namespace: str, job: str) -> dict:
    group, version = KUEUE
    items = kube.custom.list_namespaced_custom_object(group, version, namespace, "workloads")["items"]
    for item in items:
        if any(o.get("name") == job for o in item["metadata"].get("ownerReferences") or []):
            return item
    return {}


def _condition(workload: dict, kind: str) -> dict:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition["type"] == kind:
            return condition
    return {}


def _stays_suspended(kube, namespace: str, name: str, seconds: float = 8) -> dict:
    wait_for(lambda: (w := _workload(kube, namespace, name)) and _condition(w, "QuotaReserved"),
             what=f"Kueue to consider job {name}", timeout=60)
    holds_for(lambda: kube.batch.read_namespaced_job(name, namespace).spec.suspend and not _job_pods(kube, namespace, name),
              seconds=seconds, what=f"job {name} suspended with no pods")
    return _workload(kube, namespace, name)


@pytest.fixture
def prod_job(prod_cluster):
    """The prod stack's own two-node job, submitted; deleted afterwards (the platform's copy is held)."""
    namespace, name = _copy_job(prod_cluster, "rl-training")
    yield namespace, name
    _delete_job(prod_cluster.kube, namespace, name)


def test_the_prod_job_is_created_held_and_kueue_leaves_it_suspended(prod_cluster):
    kube = prod_cluster.kube
    job = kube.batch.read_namespaced_job("rl-training", "training")
    assert job.metadata.labels[QUEUE_LABEL] == "gpu-queue-held"
    holds_for(lambda: kube.batch.read_namespaced_job("rl-training", "training").spec.suspend
              and not _job_pods(kube, "training", "rl-training"), seconds=3, what="the held job suspended")


def test_relabelling_the_held_job_as_the_docs_say_starts_it(prod_cluster):
    kube = prod_cluster.kube
    _submit(kube, "training", "rl-training")
    try:
        _running(kube, "training", "rl-training", 2)
    finally:
        _delete_job(kube, "training", "rl-training")
        kube.apply(_rendered_job(prod_cluster, "rl-training"))


def test_kueue_admits_the_prod_job_whole_one_pod_per_gpu_node_under_one_layer3_block(prod_cluster, prod_job):
    kube = prod_cluster.kube
    namespace, name = prod_job
    pods = _running(kube, namespace, name, 2)
    nodes = [kube.core.read_node(p.spec.node_name) for p in pods]
    assert len({n.metadata.name for n in nodes}) == 2, "one pod per node"
    assert {n.metadata.labels[GPU_POOL_KEY] for n in nodes} == {"p5-training"}
    assert len({n.metadata.labels[network_layer_key(3)] for n in nodes}) == 1, "both pods under one layer-3 block"
    workload = _workload(kube, namespace, name)
    assert _condition(workload, "Admitted").get("status") == "True"


def test_the_running_jobs_pdb_refuses_to_evict_a_training_pod(prod_cluster, prod_job):
    kube = prod_cluster.kube
    namespace, name = prod_job
    pod = _running(kube, namespace, name, 2)[0]
    wait_for(lambda: (kube.policy.read_namespaced_pod_disruption_budget("rl-training", namespace).status.current_healthy or 0) >= 2,
             what="the PDB counting both pods healthy")
    with pytest.raises(ApiException) as refused:
        kube.core.create_namespaced_pod_eviction(pod.metadata.name, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.metadata.name, "namespace": namespace}})
    assert refused.value.status == 429, refused.value.body
    assert "disruption budget" in refused.value.body


def test_broken_variant_a_pdb_selecting_other_pods_lets_the_eviction_through(prod_cluster, prod_job):
    kube = prod_cluster.kube
    namespace, name = prod_job
    pod = _running(kube, namespace, name, 2)[0]
    original = kube.policy.read_namespaced_pod_disruption_budget("rl-training", namespace)
    selector = original.spec.selector.match_labels
    kube.policy.patch_namespaced_pod_disruption_budget("rl-training", namespace, {"spec": {"selector": {
        "matchLabels": {**selector, "app": "something-else"}}}})
    try:
        wait_for(lambda: _evicted(kube, namespace, pod.metadata.name), what="the eviction allowed", timeout=30)
    finally:
        kube.policy.patch_namespaced_pod_disruption_budget("rl-training", namespace, {"spec": {"selector": {
            "matchLabels": selector}}})


def _evicted(kube, namespace: str, pod: str) -> bool:
    try:
        kube.core.create_namespaced_pod_eviction(pod, namespace, {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
        return True
    except ApiException as error:
        if error.status == 429:
            return False
        raise


def test_with_one_gpu_node_free_the_two_node_job_stays_suspended(prod_cluster):
    """All or nothing: one of the pool's nodes taken, Kueue admits no part of the job."""
    kube = prod_cluster.kube
    node = kube.nodes(f"{GPU_POOL_KEY}=p5-training")[0]
    gpus = node.status.allocatable[GPU_RESOURCE]
    holder = unique("holder")
    kube.ensure_namespace("priority-probe")
    kube.apply(pod_manifest(holder, "priority-probe", requests={GPU_RESOURCE: gpus}, tolerations=[gpu_toleration()],
                            node_selector={"kubernetes.io/hostname": node.metadata.name}, priority_class="training-critical"))
    kube.wait_running("priority-probe", holder)
    namespace, name = _copy_job(prod_cluster, "rl-training")
    try:
        workload = _stays_suspended(kube, namespace, name)
        assert _condition(workload, "Admitted").get("status") != "True"
    finally:
        _delete_job(kube, namespace, name)
        kube.delete_pod("priority-probe", holder)


def test_a_job_beyond_the_cluster_queues_quota_stays_pending(prod_cluster):
    kube = prod_cluster.kube
    group, version = KUEUE
    queue = kube.custom.get_cluster_custom_object(group, version, "clusterqueues", "training")
    gpus = sum(int(r["nominalQuota"]) for g in queue["spec"]["resourceGroups"] for f in g["flavors"]
               for r in f["resources"] if r["name"] == GPU_RESOURCE)
    _waits_for_quota(prod_cluster, parallelism=gpus // _gpus_per_pod(prod_cluster, "rl-training") + 1)


def _gpus_per_pod(cluster, app: str) -> int:
    container = _rendered_job(cluster, app)["spec"]["template"]["spec"]["containers"][0]
    return int(container["resources"]["requests"][GPU_RESOURCE])


def _waits_for_quota(cluster, *, parallelism: int) -> None:
    """A run of the stack's job at ``parallelism`` pods stays suspended, Kueue reserving no quota for it."""
    kube = cluster.kube
    namespace, name = _copy_job(cluster, "rl-training", parallelism=parallelism)
    try:
        workload = _stays_suspended(kube, namespace, name)
        reserved = _condition(workload, "QuotaReserved")
        assert reserved.get("status") == "False", reserved
        assert "insufficient" in reserved.get("message", "").lower(), reserved
    finally:
        _delete_job(kube, namespace, name)


@pytest.fixture
def karpenter_pool(dev_cluster):
    """Dev's Karpenter NodePool with consolidateAfter shortened to seconds (dev's own 10m would
    make the test wait ten minutes); restored afterwards."""
    kube = dev_cluster.kube
    nodepool = kube.get("karpenter.sh/v1", "NodePool", "gpu-training")
    original = nodepool["spec"]["disruption"]["consolidateAfter"]
    kube.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                            {"spec": {"disruption": {"consolidateAfter": "10s"}}})
    # Nodes an earlier test's jobs left (dev's own 10m would keep them) go first.
    wait_for(lambda: not _karpenter_nodes(kube), what="the Karpenter pool empty before the test", timeout=120)
    yield nodepool
    kube.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                            {"spec": {"disruption": {"consolidateAfter": original}}})


def _karpenter_nodes(kube):
    return kube.nodes("karpenter.sh/nodepool=gpu-training")


def test_karpenter_launches_a_node_for_devs_job_and_removes_it_after_consolidate_after(dev_cluster, karpenter_pool):
    kube = dev_cluster.kube
    assert not _karpenter_nodes(kube), "the Karpenter pool starts empty"
    namespace, name = _copy_job(dev_cluster, "rl-training")
    try:
        pods = _running(kube, namespace, name, 1)
        node = kube.core.read_node(pods[0].spec.node_name)
        labels = node.metadata.labels
        assert labels["karpenter.sh/nodepool"] == "gpu-training"
        assert labels["node.kubernetes.io/instance-type"] == "g6e.xlarge"
        assert labels["role"] == "gpu-training"
        assert ("nvidia.com/gpu", "true", "NoSchedule") in [(t.key, t.value, t.effect) for t in node.spec.taints]
    finally:
        _delete_job(kube, namespace, name)
    wait_for(lambda: not _karpenter_nodes(kube), what="Karpenter removing the empty node", timeout=120)


def test_karpenter_never_launches_past_the_pools_gpu_limit(dev_cluster, karpenter_pool):
    kube = dev_cluster.kube
    limit = int(karpenter_pool["spec"]["limits"][GPU_RESOURCE])
    kube.ensure_namespace("karpenter-probe")
    names = [unique("gpu-demand") for _ in range(limit + 1)]
    for pod in names:
        kube.apply(pod_manifest(pod, "karpenter-probe", requests={GPU_RESOURCE: "1"}, tolerations=[gpu_toleration()],
                                node_selector={"karpenter.sh/nodepool": "gpu-training"}))
    try:
        wait_for(lambda: len([p for p in kube.pods("karpenter-probe") if p.spec.node_name]) == limit,
                 what=f"{limit} pods placed on Karpenter nodes", timeout=120)
        holds_for(lambda: len(_karpenter_nodes(kube)) == limit and
                  len([p for p in kube.pods("karpenter-probe") if not p.spec.node_name]) == 1,
                  seconds=15, what=f"Karpenter holding at {limit} GPUs with one pod waiting")
    finally:
        for pod in names:
            kube.delete_pod("karpenter-probe", pod)
    wait_for(lambda: not _karpenter_nodes(kube), what="Karpenter removing the empty nodes", timeout=120)


def _prod_variant(tmp_path_factory, label: str, change) -> Path:
    import yaml

    from harness import PROJECT_ROOT

    stack = yaml.safe_load((PROJECT_ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    change(stack["config"])
    folder = tmp_path_factory.mktemp(label)
    (folder / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    return folder


@pytest.fixture(scope="module")
def prod_capped_cluster(tmp_path_factory):
    """Prod with the training namespace capped at its job's 16 GPUs, below the fleet's 32."""
    from conftest import start

    def cap(config):
        config["eks-gpu-training:scheduling"]["namespaces"][0]["quota"]["gpus"] = 16

    folder = _prod_variant(tmp_path_factory, "prod-capped", cap)
    yield from start("prod", folder / "state", stack_path=folder / "Pulumi.prod.yaml")


def test_a_job_beyond_an_explicit_namespace_cap_waits_in_kueue_instead_of_being_refused(prod_capped_cluster):
    assert _quota_gpus(prod_capped_cluster.kube, "training") == 16
    # Three nodes' worth: within the fleet (two managed nodes and Karpenter's 16 GPUs), beyond the cap.
    _waits_for_quota(prod_capped_cluster, parallelism=3)


def test_broken_variant_a_raised_gpu_limit_lets_karpenter_launch_for_every_pod(dev_cluster, karpenter_pool):
    """The limit is what holds Karpenter back: raised by one, the pod that waited gets its node."""
    kube = dev_cluster.kube
    limit = int(karpenter_pool["spec"]["limits"][GPU_RESOURCE])
    kube.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                            {"spec": {"limits": {GPU_RESOURCE: str(limit + 1)}}})
    kube.ensure_namespace("karpenter-probe")
    names = [unique("gpu-demand") for _ in range(limit + 1)]
    try:
        for pod in names:
            kube.apply(pod_manifest(pod, "karpenter-probe", requests={GPU_RESOURCE: "1"}, tolerations=[gpu_toleration()],
                                    node_selector={"karpenter.sh/nodepool": "gpu-training"}))
        wait_for(lambda: len([p for p in kube.pods("karpenter-probe") if p.spec.node_name]) == limit + 1,
                 what=f"all {limit + 1} pods placed on Karpenter nodes", timeout=120)
    finally:
        for pod in names:
            kube.delete_pod("karpenter-probe", pod)
        kube.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-training",
                                                {"spec": {"limits": {GPU_RESOURCE: str(limit)}}})
    wait_for(lambda: not _karpenter_nodes(kube), what="Karpenter removing the empty nodes", timeout=120)
