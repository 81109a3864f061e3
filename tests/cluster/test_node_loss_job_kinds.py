"""A GPU node is lost under a running JobSet or TrainJob (its instance terminated: the Node
deleted), on prod's pool grown to three nodes (``node_faults``): the group runs again on the spare
in its block, as a Job does (``test_node_loss``), on the cluster the fault modules share
(``prod_faults_cluster``).

The bounds are docs/health.md's ("When a node fails during a job"); the test prints what it measured.
"""

from __future__ import annotations

import time

from tests.support.environment import GROUP_APIS, wait_for
from tests.support.node_faults import DELETED_NODE_BOUND_SECONDS, blocks, conditions_of


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
    assert len(blocks(running, again)) == 1
    assert not conditions_of(running, namespace, name, kind).get("Evicted", {}).get("status") == "True"
