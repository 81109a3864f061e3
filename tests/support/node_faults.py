"""What the fault tests share (``test_node_faults``, ``test_node_loss``, ``test_node_loss_job_kinds``,
``test_node_unreachable``): prod's GPU pool grown to three nodes, a spare in the job's layer-3 block,
with its node auto repair off; a running job or group on two of them; and, after each test, every
fault cleared and every node of the pool admitted again. The first three modules share one such
cluster (``prod_faults_cluster``, session-scoped, their tests one xdist group, ``faults``, in
``conftest._group_of``): a cluster of its own each cost two more prod starts in the tier's start
slots for about three minutes of waits each. ``test_node_unreachable`` runs on a variant whose
training pods tolerate an unreachable node for no time (``prod_unreachable_cluster``, group
``unreachable``), beside them on another worker; ``test_health_gate_configuration``'s checks, which
no node stops answering in, share it.

The recovery bounds are the ones docs/health.md ("When a node fails during a job") documents.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from tests.support import gpu_nodes
from tests.support.clusters import RunningCluster, stack_variant, start, submit_jobset_run
from tests.support.environment import wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, network_layer_key
from eks_gpu_training.healthgate.gate_settings import QUARANTINE_TAINT_KEY
from eks_gpu_training.local.node_registration import create_node
from eks_gpu_training.local.faults import STOPPED_KUBELET

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


def faults_cluster(tmp_path_factory, **kueue: Any) -> Iterator[RunningCluster]:
    """Prod's stack with its GPU pool grown to three nodes (``up --scale 3``), and the pool's node
    auto repair off: its simulation would replace a node these tests fail and then clear
    (``test_node_repair`` follows the repair). ``kueue`` changes settings of the stack's ``kueue``."""
    folder = tmp_path_factory.mktemp("local-prod-faults")

    def change(config):
        config["eks-gpu-training:gpuNodeGroups"][0]["nodeRepair"] = {"enabled": False}
        config.setdefault("eks-gpu-training:kueue", {}).update(kueue)

    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", change), scale=3)


@pytest.fixture(scope="session")
def prod_faults_cluster(tmp_path_factory):
    """Shared by the fault modules' tests (group ``faults``), stopped once their worker moves on
    (``conftest.pytest_runtest_teardown``)."""
    yield from faults_cluster(tmp_path_factory)


@pytest.fixture(scope="session")
def prod_unreachable_cluster(tmp_path_factory):
    """The fault tests' cluster, the training pods tolerating an unreachable node for no time at all
    (``test_node_unreachable``); shared with ``test_health_gate_configuration`` (group ``unreachable``)."""
    yield from faults_cluster(tmp_path_factory, unreachableNodeSeconds=0)


class Unset:
    status = None


def rejoin(running: RunningCluster, name: str) -> None:
    """The node ``name`` joins again as it first did (the node group's labels and taints, the
    startup taint among them), as an instance the node group launches registers."""
    manifest = next(node.manifest() for node in running.cluster.nodes if node.name == name)
    create_node(running.env, manifest)


def remove(running: RunningCluster, name: str) -> None:
    """The node's instance terminates: its Node deleted, as ``local fault --delete`` deletes it."""
    running.cluster.faults().delete(name)
    wait_for(lambda: gpu_nodes.node(running, name) is None, what=f"node {name} gone")


def spare_beside(running: RunningCluster, pods: list[Any]) -> str:
    """The pool's one node that none of the job's ``pods`` runs on."""
    busy = {p.spec.node_name for p in pods}
    (spare,) = [n.metadata.name for n in running.env.nodes(f"{GPU_POOL_KEY}={POOL}") if n.metadata.name not in busy]
    return spare


def rejoin_failing_checks(running: RunningCluster, name: str) -> None:
    """The pool's joins from now on fail the gate's dcgm check, and the node goes and joins again."""
    running.cluster.faults().fail_checks("dcgm", pool=POOL)
    remove(running, name)
    rejoin(running, name)


def replace_node(running: RunningCluster, name: str) -> None:
    """The node goes and a new one of the same name joins: the pool back to three admitted nodes."""
    if gpu_nodes.node(running, name) is not None:
        remove(running, name)
    rejoin(running, name)
    wait_for(lambda: gpu_nodes.admitted(running, name), what=f"node {name} admitted by the health gate", timeout=GATE_BOUND_SECONDS)


def training_pods_on(running: RunningCluster, name: str) -> list[str]:
    pods = running.env.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods
            if (p.metadata.labels or {}).get("app.kubernetes.io/component") == "training"]


def blocks(running: RunningCluster, pods: list[Any]) -> set[str]:
    layer = network_layer_key(3)
    return {gpu_nodes.node(running, p.spec.node_name).metadata.labels[layer] for p in pods}


def expect_moved(running: RunningCluster, namespace: str, name: str, lost: str, *, since: float, bound: float,
                 fault: str) -> list[Any]:
    """The job's two ranks Running again, neither on ``lost``, within ``bound`` seconds (it prints
    how long after ``since``, the fault's time), under one layer-3 block; the ranks' pods."""
    def check():
        pods = [p for p in running.env.job_pods(namespace, name) if p.status.phase == "Running"]
        return len(pods) == 2 and all(p.spec.node_name != lost for p in pods) and pods

    recovered = wait_for(check, what=f"job {name} Running again without {lost}", timeout=bound)
    print(f"{fault}: job Running again on {sorted(p.spec.node_name for p in recovered)} after {time.monotonic() - since:.1f} s")
    assert len(blocks(running, recovered)) == 1
    return recovered


def all_admitted(running: RunningCluster) -> None:
    """Every node of the pool admitted and out of quarantine (``gpu_nodes.ready_for_work``): after a
    test that cleared a GPU fault, a job placed earlier would find no spare."""
    for node in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"):
        wait_for(lambda: gpu_nodes.ready_for_work(running, node.metadata.name), what=f"{node.metadata.name} admitted and out of quarantine before the test",
                 timeout=GATE_BOUND_SECONDS)


def restore_pool(running: RunningCluster) -> None:
    """Every fault cleared and every node of the pool admitted again, for the next test."""
    faults = running.cluster.faults()
    faults.clear(pool=POOL)
    for simulated in running.cluster.nodes:
        if simulated.pool != POOL:
            continue
        node = gpu_nodes.node(running, simulated.name)
        if node is not None and (faults.recorded().get(f"node.{simulated.name}") or QUARANTINE_TAINT_KEY in gpu_nodes.taint_keys(node)
                                 or stopped(running, simulated.name)):
            faults.clear(node=simulated.name)
        if node is None or not gpu_nodes.admitted(running, simulated.name) or not ready(running, simulated.name):
            replace_node(running, simulated.name)


def ready(running: RunningCluster, name: str) -> bool:
    node = gpu_nodes.node(running, name)
    return node is not None and (gpu_nodes.condition(node, "Ready") or Unset).status == "True"


def stopped(running: RunningCluster, name: str) -> bool:
    if gpu_nodes.node(running, name) is None:
        return False
    lease = running.cluster.faults().coordination.read_namespaced_lease(name, "kube-node-lease")
    return lease.spec.holder_identity == STOPPED_KUBELET


@pytest.fixture
def running_job(prod_faults_cluster):
    """A two-node run of prod's job, Running; every node of the pool admitted again afterwards."""
    running = prod_faults_cluster
    all_admitted(running)
    namespace, name = running.submit_run(running.training_app().name, parallelism=2)
    try:
        pods = running.env.expect_job_running(namespace, name, 2)
        yield namespace, name, pods
    finally:
        running.env.delete_job(namespace, name)
        restore_pool(running)


@pytest.fixture(params=["JobSet", "TrainJob"])
def running_group(request, prod_faults_cluster):
    """A two-node JobSet of prod's rl-training, or a run of its TrainJob app finetune, Running; every
    node of the pool admitted again afterwards."""
    running = prod_faults_cluster
    all_admitted(running)
    kind = request.param
    namespace, name = (submit_jobset_run(running, "rl-training") if kind == "JobSet"
                       else running.submit_group_run("TrainJob", "finetune"))
    try:
        pods = running.env.expect_group_running(namespace, name, 2, kind=kind)
        yield kind, namespace, name, pods
    finally:
        running.env.delete_group(kind, namespace, name)
        restore_pool(running)


def conditions_of(running: RunningCluster, namespace: str, name: str, kind: str = "Job") -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (running.env.workload(namespace, name, kind) or {}).get("status", {}).get("conditions", [])}
