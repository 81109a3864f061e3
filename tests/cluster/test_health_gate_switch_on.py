"""The health gate switched on for a pool that already runs a job.

Prod's stack with the gate off (its p5 pool grown to three nodes), a two-node job running on two of
them. Then prod's own stack file (the gate on) is applied to the running cluster as a ``pulumi up``
would (``LocalCluster.update``): EKS writes the node group's new startup taint onto the three
running nodes (simulated, ``local.node_group_update``, after UpdateNodegroupConfig's reference),
the gate's objects are applied and its program starts.

Before the gate runs, the broken variant, what the gate used to leave: the taint on the busy nodes,
and the check it would make for one of them, which the scheduler never places there (the job's pods
hold every GPU), so the node kept the taint for good and no new pod could land on a tainted node.
Then the gate: the nodes that run the job are admitted unchecked (``AdmittedInUse``) without a check
pod ever placed on them, the job's pods never stop, and the idle node is checked and admitted.

The scheduler, the taint's effect and the gate's decisions are the real ones; EKS's write of the
taint and the check containers' verdicts are simulated.
"""

from __future__ import annotations

import time

import pytest

from tests.support import gpu_nodes
from tests.support.clusters import stack_variant, start
from tests.support.harness import PROJECT_ROOT
from tests.support.environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE, gpu_toleration
from eks_gpu_training.healthgate.node_check import check_job
from eks_gpu_training.healthgate.gate_settings import CHECK_LABELS, CONDITION_TYPE, CONFIG_KEY, STARTUP_TAINT_KEY, GateSettings
from eks_gpu_training.local.node_group_update import node_group_settings, update_running_nodes
from eks_gpu_training.offline.engine import PlausibleMocks
from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.offline.render.files import is_kubernetes_object, manifest
from eks_gpu_training.local.scale import scaled_stack
from eks_gpu_training.platform.stack_files import locate_stack

POOL = "p5-training"
SCALE = 3
SWITCH_ON_BOUND_SECONDS = 90
"""The gate's first rounds once it starts: a check Job per node, the scheduler's verdict on each, the
busy nodes admitted at the next round, the idle one's check run (3 s simulated) and its taint lifted."""
PROBE_NAMESPACE = "default"
CHECK_SELECTOR = ",".join(f"{key}={value}" for key, value in CHECK_LABELS.items())


@pytest.fixture(scope="module")
def gate_off_cluster(tmp_path_factory):
    """Prod's stack with its gate off and its p5 pool grown to three nodes."""
    folder = tmp_path_factory.mktemp("local-prod-gate-off")

    def gate_off(config):
        config["eks-gpu-training:healthGate"]["enabled"] = False

    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", gate_off), scale=SCALE)


def _gated_render():
    """Prod's own stack (the gate on), grown as the cluster is: its resources and Kubernetes objects."""
    result = render_stack("prod", located=scaled_stack(locate_stack("prod", PROJECT_ROOT), SCALE), mocks=PlausibleMocks())
    return [r.as_json() for r in result.resources], [manifest(r) for r in result.resources if is_kubernetes_object(r)]


def _previous_gates_check(objects, node: str, uid: str) -> tuple[dict, list[dict]]:
    """The check Job the gate would make for ``node`` from prod's settings, in the probe namespace,
    and the PriorityClass its pod names (which the stack creates with the gate)."""
    config = next(o for o in objects if o.get("kind") == "ConfigMap" and CONFIG_KEY in (o.get("data") or {}))
    settings = GateSettings.from_json(config["data"][CONFIG_KEY])
    job = check_job(settings.check_pod, PROBE_NAMESPACE, node, uid, settings.pools[POOL], settings.check_seconds)
    named = job["spec"]["template"]["spec"].get("priorityClassName")
    return job, [o for o in objects if o.get("kind") == "PriorityClass" and o["metadata"]["name"] == named]


def _probe_pod(node: str) -> dict:
    """New work for ``node``: a pod that tolerates the GPU taint (not the startup taint) and asks for one GPU."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new-work", "namespace": PROBE_NAMESPACE},
            "spec": {"tolerations": [gpu_toleration()], "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {GPU_RESOURCE: "1"}}}]}}


def test_switching_the_gate_on_admits_the_nodes_of_a_running_job_unchecked_and_checks_the_idle_one(gate_off_cluster):
    running = gate_off_cluster
    env = running.env
    nodes = sorted(n.metadata.name for n in env.nodes(f"{GPU_POOL_KEY}={POOL}"))
    assert len(nodes) == SCALE
    assert not any(STARTUP_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, n)) for n in nodes)
    namespace, name = running.submit_run(running.training_app().name, parallelism=2)
    try:
        _switch_on(running, namespace, name, nodes)
    finally:
        env.delete("v1", "Pod", "new-work", PROBE_NAMESPACE)
        env.delete_job(namespace, name)


def _switch_on(running, namespace: str, name: str, nodes: list[str]) -> None:
    env = running.env
    pods = env.expect_job_running(namespace, name, 2)
    ranks = {p.metadata.uid for p in pods}
    busy = sorted({p.spec.node_name for p in pods})
    (idle,) = sorted(set(nodes) - set(busy))
    resources, objects = _gated_render()

    # EKS's side of the change alone: the node group's new taint on its three running nodes.
    done = update_running_nodes(env.core, node_group_settings(running.cluster.resources), node_group_settings(resources))
    print("\n".join(done))
    for node in nodes:
        assert STARTUP_TAINT_KEY in gpu_nodes.taint_keys(gpu_nodes.node(running, node)), f"EKS did not taint {node}"

    # Broken variant, the gate as it was: the check it made for a busy node is never placed there.
    check, classes = _previous_gates_check(objects, busy[0], gpu_nodes.node(running, busy[0]).metadata.uid)
    for priority_class in classes:
        env.apply(priority_class)
    env.apply(check)
    probe = _probe_pod(idle)
    try:
        def unplaced() -> str:
            found = env.pods(PROBE_NAMESPACE, f"batch.kubernetes.io/job-name={check['metadata']['name']}")
            message = found and env.scheduling_message(PROBE_NAMESPACE, found[0].metadata.name)
            return message if message and f"Insufficient {GPU_RESOURCE}" in message else ""

        said = wait_for(unplaced, what=f"the scheduler's verdict on the check of busy {busy[0]}")
        holds_for(lambda: not env.pods(PROBE_NAMESPACE, f"batch.kubernetes.io/job-name={check['metadata']['name']}")[0].spec.node_name,
                  seconds=10, what=f"the check of {busy[0]} never placed while the job runs")
        env.apply(probe)
        refused = env.expect_unschedulable(PROBE_NAMESPACE, "new-work")
        # The probe tolerates the GPU taint: the one it does not is the startup taint.
        assert "untolerated taint" in refused, refused
        assert gpu_nodes.taint_keys(gpu_nodes.node(running, idle)) == {"nvidia.com/gpu", STARTUP_TAINT_KEY}
        print(f"broken variant: the check of {busy[0]} unplaced ({said}); new work for {idle} refused ({refused})")
    finally:
        env.delete_job(PROBE_NAMESPACE, check["metadata"]["name"])

    # The change applied as `pulumi up` applies it: the gate's objects, then its program.
    started = time.monotonic()
    print("\n".join(running.cluster.update(locate_stack("prod", PROJECT_ROOT).path)))
    placed_on_busy: set[str] = set()

    def settled() -> bool:
        for pod in env.pods("health-gate", CHECK_SELECTOR):
            if pod.spec.node_name in busy:
                placed_on_busy.add(pod.metadata.name)
        return all(gpu_nodes.admitted(running, node) for node in nodes)

    wait_for(settled, what="every node of the pool admitted by the gate", timeout=SWITCH_ON_BOUND_SECONDS)
    reasons = {node: gpu_nodes.condition(gpu_nodes.node(running, node), CONDITION_TYPE).reason for node in nodes}
    assert reasons == {**{node: "AdmittedInUse" for node in busy}, idle: "ChecksPassed"}
    assert not placed_on_busy, f"a check was placed on a node the job holds: {placed_on_busy}"
    env.expect_running(PROBE_NAMESPACE, "new-work")
    still = [p for p in env.job_pods(namespace, name) if p.status.phase == "Running"]
    assert {p.metadata.uid for p in still} == ranks, "the job's pods kept running throughout"
    print(f"switch-on: {', '.join(busy)} admitted unchecked and {idle} checked and admitted "
          f"{time.monotonic() - started:.1f} s after the gate's objects were applied; the job's two pods never stopped")
