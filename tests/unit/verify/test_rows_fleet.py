"""verify on a fleet: a 1,000-node p5 pool with 5,000 pods (``fleet``), healthy and with many objects
failing for a few reasons. Each row counts the failures per reason and names only the first few, so
it stays one readable line whatever the fleet's size; ``tests/benchmarks/verify_bench.py`` times the
same judges."""

from __future__ import annotations

import json

import pytest

from eks_gpu_training.verify import Snapshot, as_json, judge, judge_seed, load_stack_args
from eks_gpu_training.verify import seed, stack
from eks_gpu_training.verify.objects import SelectorIndex, selector_matches
from eks_gpu_training.verify.rows import EXAMPLES, Group, group
from tests.support.cluster_objects import fleet, pdb
from tests.support.harness import PROJECT_ROOT

LAYER_3 = "topology.k8s.aws/network-node-layer-3"
FLEET_NODES = 1000


def fleet_snapshot() -> Snapshot:
    """A new healthy fleet (building one is ten times faster than a deep copy)."""
    return Snapshot(**fleet(FLEET_NODES))


@pytest.fixture(scope="module")
def healthy() -> Snapshot:
    return fleet_snapshot()


@pytest.fixture(scope="module")
def fleet_stack():
    """prod's arguments with its managed pool sized to the fleet."""
    prod = load_stack_args("prod", PROJECT_ROOT)
    pool = prod.gpu_node_groups[0].model_copy(update={"min_size": FLEET_NODES, "desired_size": FLEET_NODES, "max_size": FLEET_NODES})
    return prod.model_copy(update={"gpu_node_groups": [pool]})


def by_item(rows) -> dict:
    return {r.item: r for r in rows}


def gpu_node(snapshot: Snapshot, index: int) -> dict:
    """The fleet's GPU node p5-training-<index> (the two system nodes come first)."""
    found = snapshot.nodes[index + 2]
    assert found["metadata"]["name"] == f"p5-training-{index}"
    return found


def test_the_fleet_is_a_thousand_gpu_nodes_with_thousands_of_pods(healthy):
    assert (len(healthy.nodes), len(healthy.pods), len(healthy.pod_disruption_budgets)) == (1002, 5000, 125)


def test_a_healthy_fleet_passes_every_seed_row_in_short_rows(healthy):
    rows = judge_seed(healthy)
    assert {r.status for r in rows} == {"pass"}
    assert max(len(r.evidence) for r in rows) < 500
    assert by_item(rows)["one-pod-per-node"].evidence == (
        "job training/job-0-multi: 8 running pods on 8 nodes; job training/job-1-multi: 8 running pods on 8 nodes; "
        "job training/job-2-multi: 8 running pods on 8 nodes and 122 more."
    )


def test_nodes_lacking_a_label_are_one_group_with_the_count_and_the_first_three():
    broken = fleet_snapshot()
    for index in range(412):
        del gpu_node(broken, index)["metadata"]["labels"][LAYER_3]
    row = seed.topology_labels(broken)
    assert row.status == "fail"
    assert row.evidence == "412 nodes of pool p5-training without network-node-layer-3 (p5-training-0, p5-training-1, p5-training-2 and 409 more)."
    assert row.failures == (Group("node", "of pool p5-training without network-node-layer-3", 412, ("p5-training-0", "p5-training-1", "p5-training-2")),)


def test_failures_for_several_reasons_are_grouped_largest_first():
    broken = fleet_snapshot()
    for index in range(0, 1000, 4):
        gpu_node(broken, index)["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    for index in (3, 7):
        gpu_node(broken, index)["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    row = seed.gpu_device_plugin(broken)
    assert row.evidence == (
        "252 of 1000 GPU nodes: "
        "250 nodes of type p5.48xlarge offering 7 nvidia.com/gpu of the type's 8 (p5-training-0, p5-training-4, p5-training-8 and 247 more); "
        "2 nodes of type p5.48xlarge offering 0 nvidia.com/gpu of the type's 8 (p5-training-3, p5-training-7)."
    )
    assert [(g.count, len(g.examples)) for g in row.failures] == [(250, 3), (2, 2)]


def test_thousands_of_failing_pods_are_counted_not_listed():
    broken = fleet_snapshot()
    for pod in broken.pods:
        if pod["metadata"]["namespace"] == "training":
            del pod["spec"]["priorityClassName"]
        else:
            pod["metadata"]["ownerReferences"] = []
    assert seed.priority_classes(broken).evidence == (
        "1000 training pods without a priorityClassName (training/job-0-0-abcde, training/job-0-1-abcde, training/job-0-2-abcde and 997 more)."
    )
    assert seed.gpu_taints(broken).evidence == (
        "4000 pods without a GPU request on GPU nodes, not of a DaemonSet (gpu-operator/nvidia-device-plugin-daemonset-p5-training-0 on p5-training-0, "
        "gpu-operator/nvidia-device-plugin-daemonset-p5-training-1 on p5-training-1, "
        "gpu-operator/nvidia-device-plugin-daemonset-p5-training-2 on p5-training-2 and 3997 more)."
    )


def test_jobs_failing_alike_are_one_group():
    broken = fleet_snapshot()
    broken.pod_disruption_budgets[:] = broken.pod_disruption_budgets[:5]
    for budget in broken.pod_disruption_budgets[:2]:
        budget["status"]["disruptionsAllowed"] = 1
    row = seed.pod_disruption_budgets(broken)
    assert row.evidence == (
        "120 training jobs with pods no PDB selects (training/job-5-multi, training/job-6-multi, training/job-7-multi and 117 more); "
        "2 training jobs with pods whose PDB's status allows 1 disruption (training/job-0-multi with PDB job-0, training/job-1-multi with PDB job-1)."
    )


def test_stack_rows_group_the_nodes_a_daemonset_or_the_agent_misses(fleet_stack):
    broken = fleet_snapshot()
    broken.pods[:] = [p for p in broken.pods if not (p["metadata"]["name"].startswith("topology-labeler-") and p["spec"]["nodeName"].endswith("7"))]
    for index in range(30):
        gpu_node(broken, index)["status"]["conditions"][1].update(status="False", reason="NvidiaXID79Error")
    assert [r.status for r in stack.pool_nodes(broken, fleet_stack)] == ["pass"]
    assert stack.topology_labeler_running(broken, fleet_stack).evidence == (
        "100 GPU nodes without a pod of DaemonSet topology-labeler/topology-labeler (p5-training-7, p5-training-17, p5-training-27 and 97 more)."
    )
    assert stack.node_monitoring_agent(broken, fleet_stack).evidence == (
        "30 GPU nodes with AcceleratedHardwareReady False, reason NvidiaXID79Error (p5-training-0, p5-training-1, p5-training-2 and 27 more)."
    )


def test_the_examples_per_group_can_be_asked_for():
    broken = fleet_snapshot()
    for index in range(412):
        del gpu_node(broken, index)["metadata"]["labels"][LAYER_3]
    row = by_item(judge(broken, examples=1))["topology-labels"]
    assert row.evidence == "412 nodes of pool p5-training without network-node-layer-3 (p5-training-0 and 411 more)."
    assert EXAMPLES == 3


def test_json_carries_each_groups_full_count_and_its_examples():
    broken = fleet_snapshot()
    for index in range(412):
        del gpu_node(broken, index)["metadata"]["labels"][LAYER_3]
    (row,) = json.loads(as_json([seed.topology_labels(broken)]))["rows"]
    assert row["failures"] == [
        {"noun": "node", "reason": "of pool p5-training without network-node-layer-3", "count": 412, "examples": ["p5-training-0", "p5-training-1", "p5-training-2"]}
    ]
    assert row["detail"].startswith("412 nodes of pool p5-training without network-node-layer-3 (")


def test_a_group_names_its_objects_in_the_order_they_came_and_says_one_in_the_singular():
    groups = group("pod", [("b", "evicted"), ("a", "pending"), ("c", "evicted")], examples=5)
    assert [str(g) for g in groups] == ["2 pods evicted (b, c)", "1 pod pending (a)"]


def test_the_pdb_lookup_finds_what_matching_every_pdb_of_the_namespace_finds():
    budgets = [
        pdb("by-app", "training", "a", min_available=1),
        pdb("elsewhere", "research", "a", min_available=1),
        {**pdb("by-expression", "training", "a", min_available=1), "spec": {"selector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["x"]}]}}},
        {**pdb("everything", "training", "a", min_available=1), "spec": {"selector": {}}},
        {**pdb("nothing", "training", "a", min_available=1), "spec": {}},
        {**pdb("two-labels", "training", "a", min_available=1), "spec": {"selector": {"matchLabels": {"app": "a", "team": "y"}}}},
    ]
    index = SelectorIndex(budgets)
    for labels in ({"app": "a"}, {"app": "a", "team": "x"}, {"app": "a", "team": "y"}, {"team": "y"}, {}):
        expected = [b for b in budgets if b["metadata"]["namespace"] == "training" and selector_matches(b["spec"].get("selector"), labels)]
        assert index.selecting("training", labels) == expected
