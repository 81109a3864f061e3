"""A GPU node fails under a running job, and a node joins sick: on prod's pool grown to three nodes
(a spare in the job's layer-3 block), faults are injected as ``eks-gpu-training-local fault``
injects them (real API writes), and Kubernetes, Kueue and the health gate decide the rest.

Simulated: a deleted node's replacement joining (the managed node group launching an instance) is
a Node created as a kubelet registers it, with the node group's taints; the check containers'
verdict (pass unless a ``fail-checks`` fault says otherwise) and the node monitoring agent's
condition are the local cluster's (``local.node_health``). The gate itself runs its own program as
its ServiceAccount; eviction, the Job controller and Kueue's node replacement are the real ones.

The recovery bounds asserted here are the ones docs/health.md ("When a node fails during a job")
documents; each test prints what it measured.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import gpu_nodes
from clusters import RunningCluster, stack_variant, start, submit_jobset_run
from environment import GROUP_APIS, JOB_NAME_LABEL, holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, network_layer_key
from eks_gpu_training.healthgate.settings import CONDITION_TYPE, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY
from eks_gpu_training.local.cluster import _create_node
from eks_gpu_training.local.faults import STOPPED_KUBELET
from eks_gpu_training.local.node_repair import REPAIRED_BY
from gpu_nodes import REPAIR_WAIT_SECONDS
from eks_gpu_training.verify import FAIL, judge, read_snapshot
from eks_gpu_training.workloads.training_spec import CHECKPOINT_ENV

POOL = "p5-training"
DELETED_NODE_BOUND_SECONDS = 150
"""A deleted node's rank runs again on the spare within this: the pod garbage collector's 40 s
quarantine of pods on a missing node, then Kueue's replacement and the scheduler."""
QUARANTINED_NODE_BOUND_SECONDS = 90
"""A node whose GPUs fail: the agent's condition, the gate's quarantine taint (a round of 5 s), the
taint manager's eviction, Kueue's replacement."""
UNREACHABLE_NODE_BOUND_SECONDS = 300
"""A node that stops answering: the node lifecycle controller's 50 s grace period before the
unreachable taint, the training pods' 60 s toleration of it (``kueue.unreachableNodeSeconds``), the
pod's 30 s termination grace period and Kueue's minute after it before Kueue fails the rank stuck
terminating there (200 s so far), then the Job, Kueue's replacement and the scheduler."""
GATE_BOUND_SECONDS = 60
"""A joining node's check: a gate round, the check Job's pod placed and run (3 s simulated), the
next round lifting the taint."""


@pytest.fixture(scope="module")
def prod_faults_cluster(tmp_path_factory):
    """Prod's stack with its GPU pool grown to three nodes (``up --scale 3``), and the pool's node
    auto repair off: its simulation would replace a node these tests fail and then clear
    (``test_node_repair`` follows the repair)."""
    folder = tmp_path_factory.mktemp("local-prod-faults")

    def change(config):
        config["eks-gpu-training:gpuNodeGroups"][0]["nodeRepair"] = {"enabled": False}

    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", change), scale=3)


class _Unset:
    status = None


def _join(running: RunningCluster, name: str) -> None:
    """The node ``name`` joins again as it first did (the node group's labels and taints, the
    startup taint among them), as an instance the node group launches registers."""
    manifest = next(node.manifest() for node in running.cluster.nodes if node.name == name)
    _create_node(running.env, manifest)


def _replace(running: RunningCluster, name: str) -> None:
    """The node goes and a new one of the same name joins: the pool back to three admitted nodes."""
    if gpu_nodes.node(running, name) is not None:
        running.cluster.faults().delete(name)
        wait_for(lambda: gpu_nodes.node(running, name) is None, what=f"node {name} gone")
    _join(running, name)
    wait_for(lambda: gpu_nodes.admitted(running, name), what=f"node {name} admitted by the health gate", timeout=GATE_BOUND_SECONDS)


def _training_pods_on(running: RunningCluster, name: str) -> list[str]:
    pods = running.env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods
            if (p.metadata.labels or {}).get("app.kubernetes.io/component") == "training"]


def _blocks(running: RunningCluster, pods: list[Any]) -> set[str]:
    layer = network_layer_key(3)
    return {gpu_nodes.node(running, p.spec.node_name).metadata.labels[layer] for p in pods}


def _recovered(running: RunningCluster, namespace: str, name: str, lost: str):
    def check():
        pods = [p for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]
        return len(pods) == 2 and all(p.spec.node_name != lost for p in pods) and pods
    return check


def _all_admitted(running: RunningCluster) -> None:
    for node in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"):
        wait_for(lambda: gpu_nodes.admitted(running, node.metadata.name), what=f"{node.metadata.name} admitted before the test",
                 timeout=GATE_BOUND_SECONDS)


def _restore_pool(running: RunningCluster) -> None:
    """Every fault cleared and every node of the pool admitted again, for the next test."""
    faults = running.cluster.faults()
    faults.clear(pool=POOL)
    for simulated in running.cluster.nodes:
        if simulated.pool != POOL:
            continue
        node = gpu_nodes.node(running, simulated.name)
        if node is not None and (faults.recorded().get(f"node.{simulated.name}") or QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(node)
                                 or _stopped(running, simulated.name)):
            faults.clear(node=simulated.name)
        if node is None or not gpu_nodes.admitted(running, simulated.name) or not _ready(running, simulated.name):
            _replace(running, simulated.name)


def _ready(running: RunningCluster, name: str) -> bool:
    node = gpu_nodes.node(running, name)
    return node is not None and (gpu_nodes.condition(node, "Ready") or _Unset).status == "True"


def _stopped(running: RunningCluster, name: str) -> bool:
    if gpu_nodes.node(running, name) is None:
        return False
    lease = running.cluster.faults().coordination.read_namespaced_lease(name, "kube-node-lease")
    return lease.spec.holder_identity == STOPPED_KUBELET


@pytest.fixture
def running_job(prod_faults_cluster):
    """A two-node run of prod's job, Running; every node of the pool admitted again afterwards."""
    running = prod_faults_cluster
    _all_admitted(running)
    namespace, name = running.submit_run(running.training_app().name, parallelism=2)
    try:
        pods = running.env.expect_job_running(namespace, name, 2)
        yield namespace, name, pods
    finally:
        running.env.delete_job(namespace, name)
        _restore_pool(running)


@pytest.fixture(params=["JobSet", "TrainJob"])
def running_group(request, prod_faults_cluster):
    """A two-node JobSet of prod's rl-training, or a run of its TrainJob app finetune, Running; every
    node of the pool admitted again afterwards."""
    running = prod_faults_cluster
    _all_admitted(running)
    kind = request.param
    namespace, name = (submit_jobset_run(running, "rl-training") if kind == "JobSet"
                       else running.submit_group_run("TrainJob", "finetune"))
    try:
        pods = running.env.expect_group_running(namespace, name, 2, kind=kind)
        yield kind, namespace, name, pods
    finally:
        running.env.delete_group(kind, namespace, name)
        _restore_pool(running)


def test_a_joining_node_gets_no_training_pod_until_the_gate_admits_it_across_repeated_joins(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    for join in range(3):
        running.cluster.faults().delete(spare)
        wait_for(lambda: gpu_nodes.node(running, spare) is None, what=f"node {spare} gone")
        joined = time.monotonic()
        _join(running, spare)
        node = wait_for(lambda: gpu_nodes.node(running, spare), what=f"node {spare} registered")
        assert STARTUP_TAINT_KEY in gpu_nodes.taint_keys(node), f"join {join}: {spare} joined without the startup taint"

        def gated_and_empty() -> bool:
            now = gpu_nodes.node(running, spare)
            assert not (STARTUP_TAINT_KEY in gpu_nodes.taint_keys(now) and _training_pods_on(running, spare)), \
                f"join {join}: a training pod on {spare} before the gate admitted it: {_training_pods_on(running, spare)}"
            return gpu_nodes.admitted(running, spare)

        wait_for(gated_and_empty, what=f"join {join}: the gate admitting {spare}", timeout=GATE_BOUND_SECONDS)
        print(f"join {join}: {spare} admitted {time.monotonic() - joined:.1f} s after it joined")


def test_a_node_that_fails_its_checks_keeps_the_taint_and_says_why(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    running.cluster.faults().fail_checks("dcgm", pool=POOL)
    running.cluster.faults().delete(spare)
    wait_for(lambda: gpu_nodes.node(running, spare) is None, what=f"node {spare} gone")
    _join(running, spare)

    def failed():
        node = gpu_nodes.node(running, spare)
        found = node is not None and gpu_nodes.condition(node, CONDITION_TYPE)
        return found and found.status == "False" and found

    found = wait_for(failed, what=f"the gate failing {spare}", timeout=GATE_BOUND_SECONDS)
    assert found.reason == "DCGMDiagnosticFailed"
    assert "check dcgm failed: simulated by the local cluster" in found.message
    # It never loses the taint, and nothing trains on it.
    holds_for(lambda: STARTUP_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, spare)) and not _training_pods_on(running, spare),
              seconds=15, what=f"{spare} held back after failing its checks")


def test_a_running_job_survives_the_deletion_of_one_of_its_nodes_on_the_spare_in_its_block(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    kept = {p.metadata.name for p in pods if p.spec.node_name != lost}
    started = time.monotonic()
    running.cluster.faults().delete(lost)
    recovered = wait_for(_recovered(running, namespace, name, lost), what=f"job {name} Running again without {lost}",
                         timeout=DELETED_NODE_BOUND_SECONDS)
    print(f"node deleted: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - started:.1f} s")
    # Kueue replaced the node: the other rank never stopped, and both stand under one layer-3 block.
    assert kept <= {p.metadata.name for p in recovered}
    assert len(_blocks(running, recovered)) == 1
    workload = running.env.workload(namespace, name)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in workload["status"].get("conditions", []))


def test_a_job_on_a_node_whose_gpus_fail_is_moved_to_the_spare(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    started = time.monotonic()
    gpu_nodes.gpu_fault(running, lost)
    recovered = wait_for(_recovered(running, namespace, name, lost), what=f"job {name} Running again without {lost}",
                         timeout=QUARANTINED_NODE_BOUND_SECONDS)
    print(f"GPU fault: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - started:.1f} s")
    assert QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, lost))
    assert len(_blocks(running, recovered)) == 1
    # Recovered GPUs: the quarantine goes, and the node is checked again before it gets work.
    running.cluster.faults().clear(node=lost)
    wait_for(lambda: gpu_nodes.admitted(running, lost) and QUARANTINE_TAINT_KEY not in gpu_nodes.taint_keys(gpu_nodes.node(running, lost)),
             what=f"{lost} checked again and admitted", timeout=GATE_BOUND_SECONDS)


def test_a_running_job_survives_its_node_no_longer_answering_on_the_spare_in_its_block(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost_pod = pods[0]
    lost = lost_pod.spec.node_name
    kept = {p.metadata.name for p in pods if p.spec.node_name != lost}
    started = time.monotonic()
    running.cluster.faults().stop_kubelet(lost)
    recovered = wait_for(_recovered(running, namespace, name, lost), what=f"job {name} Running again without {lost}",
                         timeout=UNREACHABLE_NODE_BOUND_SECONDS)
    print(f"kubelet stopped: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - started:.1f} s")
    assert kept <= {p.metadata.name for p in recovered}
    assert len(_blocks(running, recovered)) == 1
    # No kubelet ended the rank left on the node: Kueue's failure recovery did.
    left = next((p for p in running.env.pods(namespace, f"{JOB_NAME_LABEL}={name}") if p.metadata.name == lost_pod.metadata.name), None)
    if left is not None:
        assert left.status.phase == "Failed"
        assert any(c.type == "KueueFailureRecovery" for c in left.status.conditions or []), left.status.conditions


def test_a_running_jobset_or_trainjob_survives_the_deletion_of_one_of_its_nodes(prod_faults_cluster, running_group):
    running = prod_faults_cluster
    kind, namespace, name, pods = running_group
    lost = pods[0].spec.node_name
    started = time.monotonic()
    running.cluster.faults().delete(lost)

    def recovered():
        now = [p for p in running.env.group_pods(namespace, name) if p.status.phase == "Running"]
        return len(now) == 2 and all(p.spec.node_name != lost for p in now) and now

    again = wait_for(recovered, what=f"{kind} {name} Running again without {lost}", timeout=DELETED_NODE_BOUND_SECONDS)
    restarts = (running.env.get(GROUP_APIS["JobSet"], "JobSet", name, namespace) or {}).get("status", {}).get("restarts", 0)
    print(f"node deleted: {kind} Running again on {sorted(p.spec.node_name for p in again)} after "
          f"{time.monotonic() - started:.1f} s ({restarts} restarts of the group)")
    assert len(_blocks(running, again)) == 1
    assert not conditions_of(running, namespace, name, kind).get("Evicted", {}).get("status") == "True"


def test_with_no_spare_the_job_is_requeued_and_waits_instead_of_splitting_across_blocks(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    # The spare is replaced by a node that fails its checks (the pool's next joins fail): no spare.
    running.cluster.faults().fail_checks("dcgm", pool=POOL)
    running.cluster.faults().delete(spare)
    wait_for(lambda: gpu_nodes.node(running, spare) is None, what=f"node {spare} gone")
    _join(running, spare)
    wait_for(lambda: (gpu_nodes.condition(gpu_nodes.node(running, spare), CONDITION_TYPE) or _Unset).status == "False",
             what=f"{spare} failing its checks", timeout=GATE_BOUND_SECONDS)
    lost = pods[0].spec.node_name
    gpu_nodes.gpu_fault(running, lost)

    def requeued():
        conditions = {c["type"]: c for c in running.env.workload(namespace, name)["status"].get("conditions", [])}
        evicted = conditions.get("Evicted", {})
        return (evicted.get("status") == "True" and evicted.get("reason") == "NodeFailures" and "Requeued" in conditions
                and conditions)

    started = time.monotonic()
    conditions = wait_for(requeued, what=f"Kueue evicting and requeuing {name} for its failed node",
                          timeout=QUARANTINED_NODE_BOUND_SECONDS)
    print(f"no spare: evicted and requeued after {time.monotonic() - started:.1f} s "
          f"({conditions['Requeued']['reason']}: {conditions['Requeued'].get('message', '')})")
    assert conditions["Requeued"]["reason"] == "NodeFailures"
    # The whole job stops (its other rank too), then waits admitted nowhere: not on the pool's one
    # healthy node plus another block, nor on the Karpenter flavor, which has no topology.
    def running_pods():
        return [f"{p.metadata.name} on {p.spec.node_name}" for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]

    wait_for(lambda: not running_pods(), what=f"every rank of {name} stopped", timeout=60)

    def waiting():
        workload = running.env.workload(namespace, name)
        admitted = conditions_of(running, namespace, name).get("Admitted", {})
        assignments = (workload.get("status", {}).get("admission") or {}).get("podSetAssignments")
        nodes = {n.metadata.name: sorted(gpu_nodes.taint_keys(n)) for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}")}
        assert admitted.get("status") != "True", f"job {name} admitted again: {assignments}; pool nodes {nodes}"
        assert not running_pods(), f"job {name} runs again: {running_pods()}"
        return True

    holds_for(waiting, seconds=20, what=f"job {name} waiting, admitted nowhere")

    # verify says so, and what to do: the spare held back by the gate, the lost node's GPUs.
    rows = {r.item: r for r in judge(read_snapshot(str(running.kubeconfig)))}
    assert rows["health-gate"].status == FAIL
    assert f"DCGMDiagnosticFailed) and keeps {STARTUP_TAINT_KEY} ({spare})" in rows["health-gate"].evidence
    assert rows["accelerated-hardware"].status == FAIL
    assert f"(NvidiaXID79Error, quarantined) ({lost})" in rows["accelerated-hardware"].evidence
    assert "kubectl drain" in rows["health-gate"].fix
    assert "node auto repair" in rows["accelerated-hardware"].fix

    # The checkpoint contract: the lost node is repaired, the job is admitted again and each rank
    # finds the same directory, on the same volume, under the same variable.
    before = {_checkpoint(p) for p in pods}
    assert len(before) == 1, f"the ranks' checkpoint directories differ: {before}"
    running.cluster.faults().clear(pool=POOL)
    running.cluster.faults().clear(node=lost)
    _replace(running, spare)
    again = running.env.expect_job_running(namespace, name, 2)
    after = {_checkpoint(p) for p in again}
    print(f"readmitted: checkpoint {after}")
    assert after == before


def _checkpoint(pod: Any) -> tuple[str, str, str]:
    """A training pod's checkpoint: ``CHECKPOINT_DIR``, the mount path it names, and the volume's
    source (the shared file system's claim and sub-path, or the node's own disk)."""
    (container,) = [c for c in pod.spec.containers if any(e.name == CHECKPOINT_ENV for e in c.env or [])]
    directory = next(e.value for e in container.env if e.name == CHECKPOINT_ENV)
    mount = next(m for m in container.volume_mounts if directory == m.mount_path or directory.startswith(m.mount_path.rstrip("/") + "/"))
    volume = next(v for v in pod.spec.volumes if v.name == mount.name)
    source = (f"claim {volume.persistent_volume_claim.claim_name}:{mount.sub_path or ''}" if volume.persistent_volume_claim
              else "emptyDir" if volume.empty_dir is not None else str(volume))
    return directory, mount.mount_path, source


def conditions_of(running: RunningCluster, namespace: str, name: str, kind: str = "Job") -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (running.env.workload(namespace, name, kind) or {}).get("status", {}).get("conditions", [])}


def test_broken_variant_without_node_repair_the_bad_node_stays_and_nothing_replaces_it(prod_faults_cluster):
    """The broken variant of test_node_repair's managed pool: with nodeRepair off, as this
    module's pool has it, a node whose GPUs fail is quarantined and stays, nothing in its place."""
    running = prod_faults_cluster
    pool = sorted(n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"))
    bad = pool[-1]
    wait_for(lambda: gpu_nodes.admitted(running, bad), what=f"{bad} admitted before the test", timeout=GATE_BOUND_SECONDS)
    gpu_nodes.gpu_fault(running, bad)
    try:
        wait_for(lambda: QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, bad)), what=f"{bad} quarantined by the gate")

        def unrepaired() -> bool:
            node = gpu_nodes.node(running, bad)
            now = sorted(n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"))
            assert node is not None, f"{bad} was removed"
            assert now == pool, f"the pool changed from {pool} to {now}"
            assert not node.spec.unschedulable
            assert REPAIRED_BY not in (node.metadata.annotations or {})
            return True

        holds_for(unrepaired, seconds=3 * REPAIR_WAIT_SECONDS, what=f"{bad} left as it is, nothing in its place")
    finally:
        _restore_pool(running)
