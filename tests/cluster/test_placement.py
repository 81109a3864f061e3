"""Every controller the charts install fits on the system nodes, every GPU DaemonSet runs on
every GPU node, the pre-flight DCGM job covers its pool, and two training pods never share a node:
the scheduler's and the controllers' verdict, with the charts' own requests, replicas, affinities and tolerations and each instance
type's allocatable."""

from __future__ import annotations

import pytest

from eks_gpu_training.config.health_settings import DcgmDiagConfig
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, GPU_TAINT_KEY
from eks_gpu_training.workloads.preflight_jobs import dcgm_diag_job

from tests.support.environment import wait_for
from tests.support.fit_probe import FIT_NAMESPACE, fit_job, prepare_fit_namespace, shorter_consolidation
from tests.support.manifests import unique

GPU_DAEMONSETS = {
    # (namespace, name) -> what it is; each must run on every GPU node of the fleet
    ("kube-system", "dcgm-server"): "the node monitoring agent's DCGM host engine",
    ("kube-system", "eks-node-monitoring-agent"): "the node monitoring agent",
    ("gpu-operator", "gpu-operator-node-feature-discovery-worker"): "NFD's worker (GPU Operator)",
}
"""DaemonSets of both stacks that belong on GPU nodes. Prod adds the EFA device plugin and the
topology labeler (``_stack_gpu_daemonsets``)."""


def _stack_gpu_daemonsets(cluster) -> dict[tuple[str, str], str]:
    expected = dict(GPU_DAEMONSETS)
    names = {(d.metadata.namespace, d.metadata.name) for d in cluster.env.apps.list_daemon_set_for_all_namespaces().items}
    if cluster.args.topology_labeler.enabled:
        labeler = [key for key in names if "topology-labeler" in key[1]]
        assert labeler, "the stack enables the topology labeler, so its DaemonSet is in the cluster"
        expected.update({key: "the topology labeler" for key in labeler})
    if any(pool.efa_enabled for pool in cluster.args.gpu_node_groups):
        efa = [key for key in names if "efa" in key[1]]
        assert efa, "the stack has EFA pools, so the EFA device plugin's DaemonSet is in the cluster"
        expected.update({key: "the EFA device plugin" for key in efa})
    return expected


def _chart_deployments(cluster):
    return [d for d in cluster.env.apps.list_deployment_for_all_namespaces().items
            if (d.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "Helm"]


def test_every_controller_deployment_of_the_charts_becomes_available_on_the_system_nodes(any_cluster):
    env = any_cluster.env
    deployments = _chart_deployments(any_cluster)
    names = {d.metadata.name for d in deployments}
    assert {"gpu-operator", "kueue-controller-manager", "karpenter"} <= names
    system_nodes = {n.metadata.name for n in env.nodes("role=system")}
    for deployment in deployments:
        namespace, name = deployment.metadata.namespace, deployment.metadata.name
        wanted = deployment.spec.replicas
        wait_for(lambda: (env.apps.read_namespaced_deployment_status(name, namespace).status.available_replicas or 0) >= wanted,
                 what=f"Deployment {namespace}/{name} Available with {wanted} replicas")
        selector = ",".join(f"{k}={v}" for k, v in deployment.spec.selector.match_labels.items())
        placed = {p.spec.node_name for p in env.pods(namespace, selector)}
        assert placed <= system_nodes, f"{namespace}/{name} runs on {placed - system_nodes}, not on system nodes"


def _runs_on_every_gpu_node(env, namespace: str, name: str, what: str, *, timeout: float = 60) -> None:
    """The DaemonSet controller counts every GPU node among the nodes it must run on (its own
    verdict on taints and affinity, for the DaemonSet's current template) and a Running pod of it
    stands on each."""
    gpu_nodes = {n.metadata.name for n in env.nodes("role=gpu-training")}

    def placed() -> bool:
        daemonset = env.apps.read_namespaced_daemon_set(name, namespace)
        status = daemonset.status
        if status.observed_generation != daemonset.metadata.generation:
            return False
        if (status.desired_number_scheduled or 0) < len(gpu_nodes) or (status.updated_number_scheduled or 0) < (status.desired_number_scheduled or 0):
            return False
        selector = ",".join(f"{k}={v}" for k, v in daemonset.spec.selector.match_labels.items())
        return {p.spec.node_name for p in env.pods(namespace, selector) if p.status.phase == "Running"} >= gpu_nodes

    wait_for(placed, what=f"{what} ({namespace}/{name}) running on every GPU node {sorted(gpu_nodes)}", timeout=timeout)


def test_every_gpu_daemonset_runs_on_each_gpu_node(any_cluster):
    for (namespace, name), what in _stack_gpu_daemonsets(any_cluster).items():
        _runs_on_every_gpu_node(any_cluster.env, namespace, name, what)


def test_gpu_only_daemonsets_run_on_no_system_node(any_cluster):
    """The DaemonSets that select GPU nodes (the DCGM host engine, EFA plugin, labeler) stay off the
    system nodes: their DaemonSet controller places no pod there."""
    env = any_cluster.env
    system_nodes = {n.metadata.name for n in env.nodes("role=system")}
    gpu_only = [key for key in _stack_gpu_daemonsets(any_cluster)
                if key[1] == "dcgm-server" or "efa" in key[1] or "topology-labeler" in key[1]]
    assert gpu_only
    for namespace, name in gpu_only:
        daemonset = env.apps.read_namespaced_daemon_set(name, namespace)
        selector = ",".join(f"{k}={v}" for k, v in daemonset.spec.selector.match_labels.items())
        placed = {p.spec.node_name for p in env.pods(namespace, selector)}
        assert not placed & system_nodes, f"{namespace}/{name} runs on system nodes {placed & system_nodes}"


def _tolerates_gpu_taint(toleration: dict) -> bool:
    return toleration.get("key") == GPU_TAINT_KEY or (toleration.get("key") is None and toleration.get("operator") == "Exists")


def test_broken_variant_a_daemonset_without_the_gpu_toleration_leaves_the_gpu_nodes(any_cluster):
    """The GPU toleration dropped from the DCGM DaemonSet: its controller takes it off every GPU
    node, so the check above fails."""
    env = any_cluster.env
    namespace, name = "kube-system", "dcgm-server"
    original = env.apps.read_namespaced_daemon_set(name, namespace)
    tolerations = [{k: v for k, v in t.to_dict().items() if v is not None}
                   for t in original.spec.template.spec.tolerations or []]
    kept = [t for t in tolerations if not _tolerates_gpu_taint(t)]
    assert len(kept) < len(tolerations), "the DCGM DaemonSet tolerates the GPU taint"
    try:
        env.apps.patch_namespaced_daemon_set(name, namespace, {"spec": {"template": {"spec": {"tolerations": kept}}}})
        with pytest.raises(AssertionError):
            _runs_on_every_gpu_node(env, namespace, name, "the DCGM host engine without its toleration", timeout=20)
    finally:
        env.apps.patch_namespaced_daemon_set(name, namespace, {"spec": {"template": {"spec": {"tolerations": tolerations}}}})
        _runs_on_every_gpu_node(env, namespace, name, "the DCGM host engine, restored", timeout=90)


PREFLIGHT_NAMESPACE = "preflight-probe"
"""A namespace of the tests' own, without quota or Kueue, so only the scheduler decides."""


def _preflight_dcgm_job(cluster) -> tuple[dict, set[str]]:
    """The pre-flight DCGM diagnostics Job for the stack's first managed pool, as the pre-flight
    component renders it (the stacks turn pre-flight off, so the platform holds none), and the
    pool's nodes."""
    pool = cluster.args.gpu_node_groups[0]
    nodes = cluster.env.nodes(f"{GPU_POOL_KEY}={pool.name}")
    config = DcgmDiagConfig()
    job = dcgm_diag_job(pool.name, (GPU_POOL_KEY, pool.name), len(nodes), int(nodes[0].status.allocatable[GPU_RESOURCE]),
                        config.level, config.image, PREFLIGHT_NAMESPACE, 600)
    return job, {n.metadata.name for n in nodes}


def _run_job(env, job: dict):
    env.ensure_namespace(PREFLIGHT_NAMESPACE)
    env.apply(job)
    name = job["metadata"]["name"]
    return lambda: env.pods(PREFLIGHT_NAMESPACE, f"batch.kubernetes.io/job-name={name}")


def _delete_job(env, job: dict) -> None:
    env.delete_job(PREFLIGHT_NAMESPACE, job["metadata"]["name"])


def test_the_preflight_dcgm_job_runs_one_pod_on_each_node_of_its_pool(any_cluster):
    env = any_cluster.env
    job, pool_nodes = _preflight_dcgm_job(any_cluster)
    pods = _run_job(env, job)
    try:
        running = wait_for(lambda: len(r := [p for p in pods() if p.status.phase == "Running"]) == len(pool_nodes) and r,
                           what=f"a DCGM pod Running on each of {sorted(pool_nodes)}", timeout=60)
        assert sorted(p.spec.node_name for p in running) == sorted(pool_nodes)
    finally:
        _delete_job(env, job)


def test_broken_variant_a_preflight_job_without_the_gpu_toleration_never_binds(any_cluster):
    env = any_cluster.env
    job, pool_nodes = _preflight_dcgm_job(any_cluster)
    job["spec"]["template"]["spec"]["tolerations"] = []
    pods = _run_job(env, job)
    try:
        pod = wait_for(lambda: (p := pods()) and p[0], what="the DCGM job's first pod created", timeout=30)
        message = env.expect_unschedulable(PREFLIGHT_NAMESPACE, pod.metadata.name)
        assert "untolerated taint" in message, message
        assert not any(p.spec.node_name for p in pods())
    finally:
        _delete_job(env, job)


def _training_pod(cluster, node: str, *, anti_affinity: bool = True) -> dict:
    """A pod of the stack's training Job as rendered (its labels, tolerations, affinities and spread),
    asking one GPU and little CPU and memory, so resources would let many share a node, and pinned
    to ``node`` (a node-affinity term added), so only the template's own rules can keep it off."""
    template = cluster.platform_object("Job", "rl-training")["spec"]["template"]
    spec = template["spec"]
    for container in spec["containers"]:
        container["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi", GPU_RESOURCE: "1"},
                                  "limits": {GPU_RESOURCE: "1"}}
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"].append({"key": "kubernetes.io/hostname", "operator": "In", "values": [node]})
    # The training namespace's own ServiceAccount and volume claims stay there; neither places the pod.
    spec.pop("serviceAccountName", None)
    spec["volumes"] = [{"name": v["name"], "emptyDir": {}} if "persistentVolumeClaim" in v else v for v in spec.get("volumes") or []]
    if not anti_affinity:
        spec["affinity"].pop("podAntiAffinity")
    labels = {k: v for k, v in template["metadata"]["labels"].items() if not k.startswith("kueue.x-k8s.io/")}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": unique("rl-training-pod"), "namespace": PREFLIGHT_NAMESPACE, "labels": labels},
            "spec": spec}


def _scheduled(env, name: str) -> str:
    """The scheduler's decision on a pod: the node it bound it to, or its message why it could not."""
    return wait_for(lambda: env.node_of(PREFLIGHT_NAMESPACE, name) or env.scheduling_message(PREFLIGHT_NAMESPACE, name),
                    what=f"the scheduler deciding on {name}")


def _second_pod_on_one_node(cluster, *, anti_affinity: bool) -> tuple[str, str]:
    """Two pods of the training app pinned to one GPU node: (the second's node or '', the scheduler's message)."""
    env = cluster.env
    node = env.nodes(f"{GPU_POOL_KEY}={cluster.args.gpu_node_groups[0].name}")[0].metadata.name
    env.ensure_namespace(PREFLIGHT_NAMESPACE)
    first, second = (_training_pod(cluster, node, anti_affinity=anti_affinity) for _ in range(2))
    try:
        env.apply(first)
        assert _scheduled(env, first["metadata"]["name"]) == node
        env.apply(second)
        outcome = _scheduled(env, second["metadata"]["name"])
        return (outcome, "") if outcome == node else ("", outcome)
    finally:
        for pod in (first, second):
            env.delete_pod(PREFLIGHT_NAMESPACE, pod["metadata"]["name"])


# Prod's app runs on its managed pool's nodes; dev's on Karpenter's, which has none until a job asks.
def test_two_pods_of_one_training_app_never_share_a_node_even_when_resources_would_allow_it(prod_cluster):
    node, message = _second_pod_on_one_node(prod_cluster, anti_affinity=True)
    assert node == "", "the second pod was bound beside the first"
    assert "anti-affinity" in message, message


def test_broken_variant_without_the_anti_affinity_two_training_pods_share_a_node(prod_cluster):
    node, message = _second_pod_on_one_node(prod_cluster, anti_affinity=False)
    assert node, f"the second pod should have been bound beside the first: {message}"


# A whole-node training job on every shipped pool, beside every DaemonSet of its nodes.

def _pools(cluster):
    """(pool config, Karpenter pool or not) for every GPU pool of the stack."""
    pools = [(pool, False) for pool in cluster.args.gpu_node_groups]
    if cluster.args.karpenter.enabled:
        pools += [(pool, True) for pool in cluster.args.karpenter.gpu_node_pools]
    return pools


def _daemon_pods_missing(env, node: str, daemonsets: dict[tuple[str, str], str]) -> list[str]:
    running = set()
    for pod in env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        for owner in pod.metadata.owner_references or []:
            if owner.kind == "DaemonSet" and pod.status.phase == "Running":
                running.add((pod.metadata.namespace, owner.name))
    return [f"{what} ({namespace}/{name})" for (namespace, name), what in daemonsets.items() if (namespace, name) not in running]


def test_a_whole_node_training_job_fits_every_shipped_pools_nodes_beside_all_their_daemonsets(any_cluster):
    """On every pool of the stack, managed or Karpenter's, a training job with the library's default
    requests binds one pod to each empty node, and every GPU DaemonSet still runs beside it: the
    scheduler's verdict on the sizing of ``workloads/node_fit.py``. A pod that does not fit fails the
    test with the scheduler's message and what each node already holds."""
    env = any_cluster.env
    daemonsets = _stack_gpu_daemonsets(any_cluster)
    for pool, karpenter in _pools(any_cluster):
        selector = f"karpenter.sh/nodepool={pool.name}" if karpenter else f"{GPU_POOL_KEY}={pool.name}"
        nodes = [] if karpenter else [n.metadata.name for n in env.nodes(selector)]
        if not karpenter:
            assert nodes, f"pool {pool.name} has no node in the local cluster"
            for namespace, name in daemonsets:
                _runs_on_every_gpu_node(env, namespace, name, daemonsets[(namespace, name)])
        restore = shorter_consolidation(env, pool.name) if karpenter else None
        prepare_fit_namespace(any_cluster)
        job = fit_job(any_cluster, pool, karpenter=karpenter, nodes=1 if karpenter else len(nodes))
        name = job["metadata"]["name"]
        env.apply(job)
        try:
            def pods():
                return env.pods(FIT_NAMESPACE, f"batch.kubernetes.io/job-name={name}")

            def bound():
                found = pods()
                return len(found) == job["spec"]["parallelism"] and all(p.spec.node_name for p in found) and found

            try:
                placed = wait_for(bound, what=f"every pod of the fit job on pool {pool.name} bound", timeout=150)
            except AssertionError as error:
                messages = [f"{p.metadata.name}: {env.scheduling_message(FIT_NAMESPACE, p.metadata.name)}" for p in pods()]
                held = [env.node_requests(n) for n in nodes or [n.metadata.name for n in env.nodes(selector)]]
                raise AssertionError(f"{error}; scheduler: {messages}; nodes: {held}") from None
            on = sorted(p.spec.node_name for p in placed)
            assert len(set(on)) == len(on), f"two pods of the job on one node: {on}"
            if nodes:
                assert on == sorted(nodes)
            for node in on:
                try:
                    wait_for(lambda: not _daemon_pods_missing(env, node, daemonsets), timeout=120,
                             what=f"every GPU DaemonSet running beside the training pod on {node}")
                except AssertionError as error:
                    raise AssertionError(f"{error}; missing: {_daemon_pods_missing(env, node, daemonsets)}; "
                                         f"{env.node_requests(node)}") from None
        finally:
            env.delete_job(FIT_NAMESPACE, name)
            if restore is not None:
                wait_for(lambda: not env.nodes(selector), what=f"Karpenter removing pool {pool.name}'s emptied node",
                         timeout=150)
                restore()


def test_up_keeps_the_api_clients_discovery_cache_in_the_clusters_state_folder(prod_cluster):
    # The dynamic client's default is a file per API server address in the temporary folder, which
    # every cluster, on new ports, would leave behind; in the state folder `down` removes it.
    from eks_gpu_training.local.platform import discovery_cache

    cache = discovery_cache(prod_cluster.kubeconfig)
    assert cache.is_file()
    assert cache.parent == prod_cluster.cluster.state
