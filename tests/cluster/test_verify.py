"""``eks-gpu-training-verify`` against real Kubernetes components: on each stack's local cluster,
with the stack's training job submitted and running, every row passes or skips with its reason;
then one breakage per row makes that row fail, the exit status 1, and no other row; an API server
that does not answer gives exit status 2 and its reason. Every breakage is undone before the test
ends, and the test waits until the command sees the cluster healthy again.

The two "(3+ nodes)" rows need a pool of three nodes, which no stack file has: they run on a
variant of prod's stack file with its managed pool and its training job at three nodes. Kueue's
choice of a block on that pool runs on the same cluster.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml

from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, GPU_TAINT_KEY, network_layer_key
from eks_gpu_training.facts.quantity import parse_quantity
from eks_gpu_training.verify import EXIT_FAILED, EXIT_PASSED, EXIT_UNREADABLE, FAIL, PASS, SKIP, main, verify
from eks_gpu_training.workloads.training_spec import TOPOLOGY_ANNOTATIONS

from tests.support.clusters import stack_variant, start
from tests.support.environment import wait_for
from tests.support.kueue import QUEUE_LABEL
from tests.support.manifests import submitted_run
from tests.support.fit_probe import prepare_fit_namespace

VERIFY_TIMEOUT = 60
"""How long a breakage or its repair may take to show in the command's rows (the disruption
controller recomputes a PDB's status, the DaemonSet controller places pods)."""


# --- running the command ---------------------------------------------------------------------------


def _verify(cluster, *, stack: bool) -> tuple[int, dict[str, dict], str]:
    """``main``'s exit status, its ``--json`` rows by item, and what it printed on stderr."""
    argv = ["--kubeconfig", str(cluster.kubeconfig), "--json"] + (["--stack", str(cluster.stack_file.path)] if stack else [])
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(argv)
    rows = {row["item"]: row for row in json.loads(out.getvalue())["rows"]} if out.getvalue() else {}
    return status, rows, err.getvalue()


def _failing(rows: dict[str, dict]) -> set[str]:
    return {item for item, row in rows.items() if row["status"] == FAIL}


def _healthy(cluster, *, stack: bool):
    status, rows, _ = _verify(cluster, stack=stack)
    return status == EXIT_PASSED and not _failing(rows) and rows


def _failures(rows: dict[str, dict]) -> str:
    return "; ".join(f"{item}: {row['detail']}" for item, row in rows.items() if row["status"] == FAIL)


def _wait_healthy(cluster, *, stack: bool = True) -> dict[str, dict]:
    try:
        return wait_for(lambda: _healthy(cluster, stack=stack), what="every row of eks-gpu-training-verify passing or skipping",
                        timeout=VERIFY_TIMEOUT, interval=1)
    except AssertionError:
        status, rows, errors = _verify(cluster, stack=stack)
        raise AssertionError(f"exit {status} {errors.strip()}, failing: {_failures(rows)}") from None


def _fails_alone(cluster, item: str, *, with_stack: tuple[str, ...] = ()) -> dict[str, dict]:
    """Wait until ``item`` fails and nothing else does, without and with ``--stack`` (where the
    stack rows in ``with_stack``, which judge the same objects, fail too); the row."""
    def only(stack: bool):
        status, rows, _ = _verify(cluster, stack=stack)
        wanted = {item, *with_stack} if stack else {item}
        return (status, _failing(rows)) == (EXIT_FAILED, wanted) and rows

    try:
        rows = wait_for(lambda: only(False), what=f"only {item} failing", timeout=VERIFY_TIMEOUT, interval=1)
        wait_for(lambda: only(True), what=f"only {', '.join((item, *with_stack))} failing with --stack",
                 timeout=VERIFY_TIMEOUT, interval=1)
    except AssertionError:
        status, rows, _ = _verify(cluster, stack=True)
        raise AssertionError(f"exit {status}, failing: {_failures(rows)}") from None
    return rows[item]


# --- the training job --------------------------------------------------------------------------------


def _submitted(cluster):
    """A run of the stack's training job, submitted to Kueue's queue and running; deleted afterwards."""
    app = cluster.training_app()
    namespace, name = cluster.submit_run(app.name)
    try:
        cluster.env.expect_job_running(namespace, name, app.nodes)
        yield namespace, name
    finally:
        cluster.env.delete_job(namespace, name)


@pytest.fixture
def prod_running(prod_cluster):
    yield from _submitted(prod_cluster)


@pytest.fixture
def any_running(any_cluster):
    yield from _submitted(any_cluster)


@pytest.fixture(scope="module")
def three_node_cluster(tmp_path_factory):
    """Prod's stack file with its managed pool and its training job at three nodes."""
    def three_nodes(config):
        config["eks-gpu-training:gpuNodeGroups"][0].update(minSize=3, desiredSize=3, maxSize=3)
        config["eks-gpu-training:scheduling"]["trainingApps"][0]["nodes"] = 3
        # Pretraining's share of the third node, so its three-node job can be admitted.
        pretraining = config["eks-gpu-training:scheduling"]["teams"][0]
        next(q for q in pretraining["quotas"] if q["pool"] == "p5-training")["gpus"] = 16
        # The local network has two nodes under each layer-3 switch: a three-node job asks for one
        # layer-2 block, as verify's kueue-blocks row tells a fleet of such blocks to set.
        config.setdefault("eks-gpu-training:kueue", {})["blockNodes"] = 2

    path = stack_variant(tmp_path_factory.mktemp("stack-three-nodes"), "prod", three_nodes)
    yield from start("prod", tmp_path_factory.mktemp("local-prod-three-nodes"), stack_path=path)


@pytest.fixture
def three_node_running(three_node_cluster):
    yield from _submitted(three_node_cluster)


def test_kueue_places_a_two_node_job_in_the_block_of_the_three_node_pool_that_holds_it_whole(three_node_cluster):
    """Kueue's topology-aware admission, on the three-node pool (two nodes under one layer-3 block,
    one under another): a two-node run of the job is admitted to the block that holds it whole.
    It shares this module's three-node cluster (one such cluster per run)."""
    env = three_node_cluster.env
    blocks: dict[str, list[str]] = {}
    for node in env.nodes(f"{GPU_POOL_KEY}=p5-training"):
        blocks.setdefault(node.metadata.labels[network_layer_key(3)], []).append(node.metadata.name)
    assert sorted(len(members) for members in blocks.values()) == [1, 2], "the fleet lays out two blocks"
    whole_block = next(members for members in blocks.values() if len(members) == 2)
    namespace, name = three_node_cluster.submit_run(three_node_cluster.training_app().name, parallelism=2)
    try:
        pods = env.expect_job_running(namespace, name, 2)
        assert sorted(p.spec.node_name for p in pods) == sorted(whole_block)
    finally:
        env.delete_job(namespace, name)


# --- a healthy cluster ---------------------------------------------------------------------------------


def _assert_passes_or_skips_with_reasons(rows: dict[str, dict]) -> None:
    assert not _failing(rows), {i: r["detail"] for i, r in rows.items() if r["status"] == FAIL}
    for item, row in rows.items():
        assert row["status"] in (PASS, SKIP), (item, row)
        assert row["detail"], (item, row)


def test_with_the_training_job_running_every_row_passes_or_skips_with_its_reason(any_cluster, any_running):
    """The command and ``verify()``, with and without the stack."""
    for stack in (False, True):
        rows = _wait_healthy(any_cluster, stack=stack)
        _assert_passes_or_skips_with_reasons(rows)
        for item in ("gpu-device-plugin", "priority-classes", "pod-disruption-budgets", "gpu-taints"):
            assert rows[item]["status"] == PASS, rows[item]
    assert {"pool-nodes/" + p.name for p in any_cluster.args.gpu_node_groups} <= set(rows)
    for stack in (None, any_cluster.stack_file.path, any_cluster.args):
        from_python = verify(kubeconfig=str(any_cluster.kubeconfig), stack=stack)
        assert {row.item: row.status for row in from_python} == {
            item: row["status"] for item, row in _wait_healthy(any_cluster, stack=stack is not None).items()}


def test_on_prod_the_rows_judge_the_two_node_job_and_the_stack(prod_cluster, prod_running):
    rows = _wait_healthy(prod_cluster)
    namespace, name = prod_running
    statuses = {item: row["status"] for item, row in rows.items()}
    assert statuses == {
        "gpu-device-plugin": PASS, "efa-device-plugin": PASS, "priority-classes": PASS, "pod-disruption-budgets": PASS,
        "gpu-taints": PASS, "one-pod-per-node": PASS, "topology-labels": SKIP, "topology-aware-spread": SKIP,
        "health-gate": PASS, "health-gate-configuration": PASS, "accelerated-hardware": PASS, "replacement-wait": PASS,
        "pool-nodes/p5-training": PASS, "priority-class-values": PASS, "resource-quota/training": PASS,
        "resource-quota/research": PASS, "kueue-queues/training": PASS, "kueue-queues/research": PASS,
        "kueue-blocks/p5-training": PASS, "team/pretraining": PASS, "team/research": PASS, "team-members/pretraining": PASS, "team-members/research": PASS,
        "team-queue/pretraining": PASS, "team-queue/research": PASS, "team-priorities/pretraining": PASS,
        "team-priorities/research": PASS, "topology-labeler": PASS, "node-monitoring-agent": PASS,
        "fsx-claim/training": PASS, "fsx-claim/research": PASS, "team-data/pretraining": PASS, "team-data/research": PASS,
    }
    assert rows["one-pod-per-node"]["detail"] == "job training/rl-training-multi: 2 running pods on 2 nodes."
    assert "2 × p5.48xlarge: 8 each" in rows["gpu-device-plugin"]["detail"]
    assert "2 × p5.48xlarge: 32 each" in rows["efa-device-plugin"]["detail"]
    assert "2 pods kept by rl-training (minAvailable 2, disruptionsAllowed 0)" in rows["pod-disruption-budgets"]["detail"]
    assert rows["topology-labels"]["detail"] == "no GPU pool has 3 or more nodes (the largest, pool p5-training, has 2)"
    assert rows["topology-aware-spread"]["detail"] == "no training job runs on 3 or more nodes"


def test_a_running_trainjob_counts_for_the_job_rows_and_its_teams_row_shows_what_it_borrows(prod_cluster):
    env = prod_cluster.env
    namespace, name = prod_cluster.submit_group_run("TrainJob", "finetune")
    try:
        env.expect_group_running(namespace, name, 2, kind="TrainJob")

        def borrowed():
            rows = _healthy(prod_cluster, stack=True)
            return rows and "8 borrowed" in rows["team/research"]["detail"] and rows

        rows = wait_for(borrowed, what="the research team's row showing its borrowed GPUs", timeout=VERIFY_TIMEOUT, interval=1)
        assert rows["one-pod-per-node"]["detail"] == "job research/finetune-multi: 2 running pods on 2 nodes."
        assert "2 pods kept by finetune (minAvailable 2, disruptionsAllowed 0)" in rows["pod-disruption-budgets"]["detail"]
        assert "p5-training: quota 8, using 16 (8 borrowed), lending 0" in rows["team/research"]["detail"]
        assert "p5-training: quota 8, using 0 (0 borrowed), lending 8" in rows["team/pretraining"]["detail"]
    finally:
        env.delete_group("TrainJob", namespace, name)


def test_a_teams_quota_edited_by_hand_fails_its_row(prod_cluster):
    env = prod_cluster.env
    queue = env.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "research")
    shipped = queue["spec"]["resourceGroups"]
    edited = json.loads(json.dumps(shipped))
    for flavor in edited[0]["flavors"]:
        for resource in flavor["resources"]:
            if flavor["name"] == "p5-training-tas" and resource["name"] == GPU_RESOURCE:
                resource["nominalQuota"] = "4"
    env.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "research", {"spec": {"resourceGroups": edited}})
    try:
        def failing():
            status, rows, _ = _verify(prod_cluster, stack=True)
            return status == EXIT_FAILED and _failing(rows) == {"team/research"} and rows

        rows = wait_for(failing, what="team/research failing alone", timeout=VERIFY_TIMEOUT, interval=1)
        assert rows["team/research"]["detail"].startswith("p5-training: quota 4, the stack declares 8. Fix: ")
    finally:
        env.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "research",
                                               {"spec": {"resourceGroups": shipped}})
    _wait_healthy(prod_cluster)


def test_with_no_training_job_running_the_job_rows_skip_saying_so(prod_cluster):
    rows = _wait_healthy(prod_cluster)
    for item in ("pod-disruption-budgets", "one-pod-per-node", "topology-aware-spread"):
        assert rows[item]["status"] == SKIP, rows[item]
        assert rows[item]["detail"].startswith("no training job runs"), rows[item]


def test_on_a_three_node_pool_the_topology_rows_pass(three_node_cluster, three_node_running):
    rows = _wait_healthy(three_node_cluster)
    _assert_passes_or_skips_with_reasons(rows)
    assert rows["topology-labels"]["status"] == PASS, rows["topology-labels"]
    assert rows["topology-labels"]["detail"].startswith("3 GPU nodes of 1 pools with 3+ nodes carry network-node-layer-1, -2 and -3.")
    assert rows["topology-aware-spread"]["status"] == PASS, rows["topology-aware-spread"]
    assert "3 running pods, Kueue required topology topology.k8s.aws/network-node-layer-2, under one" in rows["topology-aware-spread"]["detail"]
    assert rows["one-pod-per-node"]["detail"] == "job training/rl-training-multi: 3 running pods on 3 nodes."


# --- one breakage per row --------------------------------------------------------------------------------


def _gpu_node(cluster, index: int = 0):
    return sorted(cluster.env.nodes(f"{GPU_POOL_KEY}=p5-training"), key=lambda n: n.metadata.name)[index]


def _taints(node) -> list[dict]:
    return [{k: v for k, v in t.to_dict().items() if v is not None and k != "time_added"} for t in node.spec.taints or []]


def test_a_gpu_node_without_the_gpu_taint_fails_gpu_taints(prod_cluster, prod_running):
    env = prod_cluster.env
    node = _gpu_node(prod_cluster)
    name, taints = node.metadata.name, _taints(node)
    before = {(p.metadata.namespace, p.metadata.name) for p in env.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={name}").items}
    env.core.patch_node(name, {"spec": {"taints": [t for t in taints if t["key"] != GPU_TAINT_KEY]}})
    try:
        row = _fails_alone(prod_cluster, "gpu-taints")
        assert f"1 GPU node without the {GPU_TAINT_KEY} NoSchedule taint ({name})." in row["detail"]
    finally:
        env.core.patch_node(name, {"spec": {"taints": taints}})
        # Pods placed while the taint was gone stay (NoSchedule evicts nothing): remove them, as
        # their controllers no longer place them there.
        for pod in env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items:
            if (pod.metadata.namespace, pod.metadata.name) not in before:
                env.delete_pod(pod.metadata.namespace, pod.metadata.name)
        _wait_healthy(prod_cluster)


def test_a_gpu_node_short_of_gpus_fails_gpu_device_plugin(prod_cluster, prod_running):
    env = prod_cluster.env
    node = _gpu_node(prod_cluster, 1)
    name, gpus = node.metadata.name, node.status.allocatable[GPU_RESOURCE]
    env.core.patch_node_status(name, {"status": {"allocatable": {GPU_RESOURCE: str(int(gpus) - 1)}}})
    try:
        row = _fails_alone(prod_cluster, "gpu-device-plugin")
        assert f"1 node of type p5.48xlarge offering {int(gpus) - 1} {GPU_RESOURCE} of the type's {gpus} ({name})" in row["detail"]
    finally:
        env.core.patch_node_status(name, {"status": {"allocatable": {GPU_RESOURCE: gpus}}})
        _wait_healthy(prod_cluster)


def test_the_jobs_pdb_deleted_fails_pod_disruption_budgets(prod_cluster, prod_running):
    env = prod_cluster.env
    namespace, _ = prod_running
    pdb = prod_cluster.platform_object("PodDisruptionBudget", "rl-training")
    env.delete("policy/v1", "PodDisruptionBudget", "rl-training", namespace)
    try:
        row = _fails_alone(prod_cluster, "pod-disruption-budgets")
        assert "1 training job with pods no PDB selects" in row["detail"]
    finally:
        env.apply(pdb)
        _wait_healthy(prod_cluster)


def test_the_jobs_priority_class_deleted_fails_priority_classes(prod_cluster, prod_running):
    env = prod_cluster.env
    priority_class = prod_cluster.platform_object("PriorityClass", "training-critical")
    env.delete("scheduling.k8s.io/v1", "PriorityClass", "training-critical")
    try:
        row = _fails_alone(prod_cluster, "priority-classes", with_stack=("priority-class-values",))
        assert "missing PriorityClasses of the library's default" in row["detail"]
        assert "classes: training-critical;" in row["detail"]
        assert "training pods naming PriorityClass 'training-critical', which does not exist" in row["detail"]
    finally:
        env.apply(priority_class)
        _wait_healthy(prod_cluster)


def _halved(resources: dict[str, str]) -> dict[str, str]:
    """Half of each quantity (whole units; CPU in millicores)."""
    halved = {}
    for resource, value in resources.items():
        quantity = parse_quantity(str(value))
        halved[resource] = f"{int(quantity * 1000) // 2}m" if resource == "cpu" else str(int(quantity) // 2)
    return halved


def test_two_pods_of_the_job_on_one_node_fail_one_pod_per_node(prod_cluster):
    """A run of the job with its anti-affinity and hostname spread stripped and both pods forced
    onto one node by a nodeSelector (each asking for half the node, so that the scheduler, not
    only KWOK, accepts them there)."""
    env = prod_cluster.env
    app = prod_cluster.training_app()
    node = _gpu_node(prod_cluster).metadata.name
    job = prod_cluster.platform_object("Job", app.name)
    pod = job["spec"]["template"]["spec"]
    pod["affinity"].pop("podAntiAffinity")
    pod.pop("topologySpreadConstraints", None)
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), "kubernetes.io/hostname": node}
    for container in pod["containers"]:
        container["resources"] = {key: _halved(values) for key, values in container["resources"].items()}
    namespace = job["metadata"]["namespace"]
    name = "rl-training-one-node"
    env.apply(submitted_run(job, name))
    try:
        pods = env.expect_job_running(namespace, name, app.nodes)
        assert {p.spec.node_name for p in pods} == {node}
        row = _fails_alone(prod_cluster, "one-pod-per-node")
        assert row["detail"].startswith(f"1 training job with two or more running pods on one node (training/rl-training-multi on {node}).")
    finally:
        env.delete_job(namespace, name)
        _wait_healthy(prod_cluster)


LAYER_KEYS = [network_layer_key(layer) for layer in (1, 2, 3)]
UNSPREAD_NAMESPACE = "unspread-probe"
"""Where the job stripped of its topology request runs: a namespace Kueue does not manage."""


def test_a_node_of_a_three_node_pool_without_layer_labels_fails_topology_labels(three_node_cluster, three_node_running):
    env = three_node_cluster.env
    node = _gpu_node(three_node_cluster, 2)
    name, labels = node.metadata.name, {key: node.metadata.labels[key] for key in LAYER_KEYS}
    env.core.patch_node(name, {"metadata": {"labels": {key: None for key in LAYER_KEYS}}})
    try:
        # With --stack, kueue-blocks fails too: unlabelled, the node is under no block, and the
        # three-node job's layer-2 block is left two nodes.
        row = _fails_alone(three_node_cluster, "topology-labels", with_stack=("kueue-blocks/p5-training",))
        assert row["detail"].startswith(f"1 node of pool p5-training without network-node-layer-1, -2, -3 ({name}).")
    finally:
        env.core.patch_node(name, {"metadata": {"labels": labels}})
        _wait_healthy(three_node_cluster)


def test_the_jobs_topology_request_stripped_fails_topology_aware_spread(three_node_cluster):
    """A run of the three-node job whose pods carry neither Kueue's topology request nor a spread
    over a network layer. Kueue refuses such a job the pool's topology-aware flavor, so it is
    submitted past Kueue, as a job created by hand would be: in a namespace Kueue does not manage
    (it holds every job of the training namespaces), with no claim there to mount. The scheduler
    places its pods one per node, over both of the pool's layer-3 blocks."""
    env = three_node_cluster.env
    app = three_node_cluster.training_app()
    job = three_node_cluster.platform_object("Job", app.name)
    template = job["spec"]["template"]
    for annotation in TOPOLOGY_ANNOTATIONS.values():
        (template["metadata"].get("annotations") or {}).pop(annotation, None)
    template["spec"]["topologySpreadConstraints"] = [
        c for c in template["spec"].get("topologySpreadConstraints") or [] if c["topologyKey"] not in LAYER_KEYS]
    template["metadata"]["labels"].pop(QUEUE_LABEL, None)
    claims = {v["name"] for v in template["spec"].get("volumes") or [] if "persistentVolumeClaim" in v}
    template["spec"]["volumes"] = [v for v in template["spec"].get("volumes") or [] if v["name"] not in claims]
    for container in template["spec"]["containers"]:
        container["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] not in claims]
    namespace = UNSPREAD_NAMESPACE
    prepare_fit_namespace(three_node_cluster, namespace)
    budget = three_node_cluster.platform_object("PodDisruptionBudget", app.name)
    budget["metadata"] = {"name": app.name, "namespace": namespace}
    env.apply(budget)  # the job's own budget, in its namespace, as the stack makes it
    name = "rl-training-unspread"
    job["metadata"] = {"name": name, "namespace": namespace,
                       "labels": {k: v for k, v in job["metadata"]["labels"].items() if k != QUEUE_LABEL}}
    job["spec"]["suspend"] = False
    env.apply(job)
    try:
        pods = env.expect_job_running(namespace, name, app.nodes)
        assert not any(set(TOPOLOGY_ANNOTATIONS.values()) & set(p.metadata.annotations or {}) for p in pods)
        row = _fails_alone(three_node_cluster, "topology-aware-spread")
        assert "with pods carrying neither a topology spread constraint nor a Kueue topology request" in row["detail"]
    finally:
        env.delete_job(namespace, name)
        _wait_healthy(three_node_cluster)


# --- a cluster that does not answer -----------------------------------------------------------------


def test_an_api_server_that_does_not_answer_gives_exit_2_and_its_reason(prod_cluster, tmp_path):
    from eks_gpu_training.local.processes import free_port

    kubeconfig = yaml.safe_load(prod_cluster.kubeconfig.read_text())
    address = f"https://127.0.0.1:{free_port()}"
    for entry in kubeconfig["clusters"]:
        entry["cluster"]["server"] = address
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(yaml.safe_dump(kubeconfig))
    for extra in ([], ["--stack", str(prod_cluster.stack_file.path)]):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = main(["--kubeconfig", str(unreachable), *extra])
        assert status == EXIT_UNREADABLE
        assert out.getvalue() == ""
        message = err.getvalue()
        assert message.count("\n") == 1
        assert "Traceback" not in message
        assert message.startswith(f"eks-gpu-training-verify: cannot read the cluster: cannot reach the API server at {address}: ")
        assert "Connection refused" in message, message
