"""The broken variant of ``test_node_faults``: prod with Kueue's node replacement and its requeue
turned off (``kueue.failedNodeReplacement: false``, ``kueue.recoveryTimeoutMinutes: null``). A job
that loses a node keeps its place on it: the lost rank waits for a node that is gone, the other
rank runs on alone, nothing moves the job, and verify names it.

The pool has a spare in the job's block, as in ``test_node_faults``, so what keeps the job broken is
the configuration, not the capacity.
"""

from __future__ import annotations

import time

import pytest

from clusters import start, stack_variant
from environment import holds_for, wait_for
from eks_gpu_training.facts.gpu_nodes import GPU_POOL_KEY
from eks_gpu_training.verify import FAIL, judge, read_snapshot

POOL = "p5-training"
HELD_SECONDS = 150
"""As long as the same job with replacement on may take to run again on the spare
(``test_node_faults.DELETED_NODE_BOUND_SECONDS``)."""


@pytest.fixture(scope="module")
def prod_without_recovery_cluster(tmp_path_factory):
    """Prod's stack, its GPU pool grown to three nodes, with Kueue's node replacement and requeue off."""
    folder = tmp_path_factory.mktemp("local-prod-without-recovery")

    def change(config):
        config["eks-gpu-training:kueue"].update(failedNodeReplacement=False, recoveryTimeoutMinutes=None)

    yield from start("prod", folder / "state", stack_path=stack_variant(folder, "prod", change), scale=3)


def test_with_replacement_and_requeue_off_a_job_that_lost_a_node_stays_broken(prod_without_recovery_cluster):
    running = prod_without_recovery_cluster
    for node in running.env.nodes(f"{GPU_POOL_KEY}={POOL}"):
        wait_for(lambda: not any(t.key == "eks-gpu-training/unverified" for t in running.env.core.read_node(node.metadata.name).spec.taints or []),
                 what=f"{node.metadata.name} admitted by the health gate", timeout=60)
    namespace, name = running.submit_run(running.training_app().name, parallelism=2)
    try:
        pods = running.env.expect_job_running(namespace, name, 2)
        lost = pods[0].spec.node_name
        running.cluster.faults().delete(lost)
        wait_for(lambda: not any(n.metadata.name == lost for n in running.env.nodes()), what=f"node {lost} gone")
        started = time.monotonic()

        def broken() -> bool:
            live = [p for p in running.env.job_pods(namespace, name) if p.metadata.deletion_timestamp is None]
            placed = [p for p in live if p.spec.node_name and p.status.phase == "Running"]
            assert len(placed) < 2, f"job {name} runs on two nodes again after {time.monotonic() - started:.0f} s: " \
                                    f"{[p.spec.node_name for p in placed]}"
            return True

        holds_for(broken, seconds=HELD_SECONDS, what=f"job {name} broken without its node")
        workload = running.env.workload(namespace, name)
        conditions = {c["type"]: c for c in workload["status"].get("conditions", [])}
        assert conditions.get("Admitted", {}).get("status") == "True", "the job keeps its admission (and its quota)"
        assert conditions.get("Evicted", {}).get("status") != "True", "nothing requeues it"
        # A rank waits for a node: verify names the job and what to do.
        waiting = [p for p in running.env.job_pods(namespace, name) if not p.spec.node_name]
        print(f"after {HELD_SECONDS} s: {len(waiting)} rank(s) of {name} wait for a node; "
              f"unhealthy nodes {workload['status'].get('unhealthyNodes')}")
        row = {r.item: r for r in judge(read_snapshot(str(running.kubeconfig)))}["replacement-wait"]
        assert row.status == FAIL
        assert f"{namespace}/" in row.evidence
        assert "delete the job" in row.fix
    finally:
        running.env.delete_job(namespace, name)
