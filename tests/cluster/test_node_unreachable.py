"""A GPU node stops answering under a running job (its kubelet stopped: no lease renewal, no status),
on prod's pool grown to three nodes (``node_faults``): the node lifecycle controller taints it
unreachable, the training pods' toleration of that runs out, and Kueue's failure recovery fails the
rank left terminating there, so the job runs again on the spare in its block. The slowest of the
fault paths (docs/health.md, "When a node fails during a job"), on a cluster other than the other
fault modules' so its wait runs beside theirs (``node_faults.prod_unreachable_cluster``).

Its stack sets ``kueue.unreachableNodeSeconds`` to 0, so the pods' toleration runs out as the taint
lands: the path is the default's (the same taint, eviction and Kueue recovery), a minute shorter.
The other timers are Kubernetes' and Kueue's own and stay as in a real cluster.
"""

from __future__ import annotations

import time

import pytest

from eks_gpu_training.config.kueue_settings import UNREACHABLE_NODE_SECONDS

from tests.support.environment import JOB_NAME_LABEL
from tests.support.node_faults import UNREACHABLE_NODE_BOUND_SECONDS, expect_moved

BOUND_SECONDS = UNREACHABLE_NODE_BOUND_SECONDS - UNREACHABLE_NODE_SECONDS
"""The default's bound, less the toleration this stack leaves out."""


@pytest.fixture(scope="module")
def prod_faults_cluster(prod_unreachable_cluster):
    """The fault tests' cluster (``node_faults``), the training pods tolerating an unreachable node
    for no time at all: ``running_job`` runs there."""
    return prod_unreachable_cluster


def test_a_running_job_survives_its_node_no_longer_answering_on_the_spare_in_its_block(prod_faults_cluster, running_job):
    running = prod_faults_cluster
    namespace, name, pods = running_job
    lost_pod = pods[0]
    lost = lost_pod.spec.node_name
    kept = {p.metadata.name for p in pods if p.spec.node_name != lost}
    started = time.monotonic()
    running.cluster.faults().stop_kubelet(lost)
    recovered = expect_moved(running, namespace, name, lost, since=started, bound=BOUND_SECONDS, fault="kubelet stopped")
    assert kept <= {p.metadata.name for p in recovered}
    # No kubelet ended the rank left on the node: Kueue's failure recovery did.
    left = next((p for p in running.env.pods(namespace, f"{JOB_NAME_LABEL}={name}") if p.metadata.name == lost_pod.metadata.name), None)
    if left is not None:
        assert left.status.phase == "Failed"
        assert any(c.type == "KueueFailureRecovery" for c in left.status.conditions or []), left.status.conditions
