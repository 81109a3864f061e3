"""A GPU node is lost under a running job (its instance terminated: the Node deleted), on prod's pool
grown to three nodes (``node_faults``): the job runs again on the spare in its block, and with no
spare it is requeued whole and waits instead of splitting across blocks. A JobSet's and a TrainJob's
loss is ``test_node_loss_job_kinds``, on the same cluster (``prod_faults_cluster``), after this one.
Kubernetes' pod garbage collector, the Job and JobSet controllers, Kueue and the health gate decide;
the local cluster only deletes the Node and registers replacements, as ``test_node_faults`` says.

The bounds are docs/health.md's ("When a node fails during a job"); each test prints what it measured.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support import gpu_nodes
from tests.support.environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.healthgate.gate_settings import CONDITION_TYPE, STARTUP_TAINT_KEY
from eks_gpu_training.verify import FAIL, judge, read_snapshot
from eks_gpu_training.workloads.training_spec import CHECKPOINT_ENV
from tests.support.node_faults import (
    DELETED_NODE_BOUND_SECONDS,
    GATE_BOUND_SECONDS,
    POOL,
    QUARANTINED_NODE_BOUND_SECONDS,
    Unset,
    conditions_of,
    expect_moved,
    rejoin_failing_checks,
    replace_node,
    spare_beside,
)


def test_a_running_job_survives_the_deletion_of_one_of_its_nodes_on_the_spare_in_its_block(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost = pods[0].spec.node_name
    kept = {p.metadata.name for p in pods if p.spec.node_name != lost}
    started = time.monotonic()
    running.cluster.faults().delete(lost)
    recovered = expect_moved(running, namespace, name, lost, since=started, bound=DELETED_NODE_BOUND_SECONDS, fault="node deleted")
    # Kueue replaced the node: the other rank never stopped (and both stand under one layer-3 block).
    assert kept <= {p.metadata.name for p in recovered}
    workload = running.env.workload(namespace, name)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in workload["status"].get("conditions", []))


def test_with_no_spare_the_job_is_requeued_and_waits_instead_of_splitting_across_blocks(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    spare = spare_beside(running, pods)
    # The spare is replaced by a node that fails its checks (the pool's next joins fail): no spare.
    rejoin_failing_checks(running, spare)
    wait_for(lambda: (gpu_nodes.condition(gpu_nodes.node(running, spare), CONDITION_TYPE) or Unset).status == "False",
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
    replace_node(running, spare)
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
