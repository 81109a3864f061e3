"""When the local cluster's simulated EKS node auto repair acts: after the condition's wait (scaled),
within the group's threshold and parallelism, as its overrides say; and what the replacement that
registers looks like."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from eks_gpu_training.config import NodeRepairConfig, node_repair_settings
from eks_gpu_training.local.node_repair import (
    REPAIRED_BY, drained, due_repairs, halted, parallel_limit, replacement, replacement_name, unhealthy,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
POOL = "p5-training"
LAYER3 = "topology.k8s.aws/network-node-layer-3"


def _stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(name, *, sick_for=None, condition="AcceleratedHardwareReady", reason="NvidiaXID79Error", repairing=False):
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": _stamp(3600)}]
    if sick_for is not None:
        conditions.append({"type": condition, "status": "False", "reason": reason, "lastTransitionTime": _stamp(sick_for)})
    annotations = {REPAIRED_BY: f"{POOL}-repair-0"} if repairing else {}
    return {"metadata": {"name": name, "labels": {"eks-gpu-training/pool": POOL, LAYER3: f"nn-{name}",
                                                  "topology.kubernetes.io/zone": "us-west-2b"},
                         "annotations": annotations},
            "status": {"conditions": conditions}}


def _pools(**repair):
    return {POOL: {"settings": node_repair_settings(NodeRepairConfig(**repair)), "template": {}}}


def _due(nodes, **repair):
    due, notes = due_repairs(nodes, _pools(**repair), NOW, seconds_per_minute=1.0)
    return [u.node for u in due], notes


def test_a_gpu_fault_is_repaired_once_it_has_lasted_ten_scaled_minutes_and_not_before():
    assert _due([_node("a", sick_for=9), _node("b"), _node("c")]) == ([], [])
    assert _due([_node("a", sick_for=10), _node("b"), _node("c")]) == (["a"], [])


def test_the_agents_other_conditions_wait_thirty_scaled_minutes():
    nodes = [_node("a", sick_for=29, condition="KernelReady", reason="ForkFailedOutOfPIDs"), _node("b"), _node("c")]
    assert _due(nodes) == ([], [])
    nodes[0] = _node("a", sick_for=30, condition="KernelReady", reason="ForkFailedOutOfPIDs")
    assert _due(nodes)[0] == ["a"]


def test_an_override_sets_the_wait_and_an_action_other_than_replace_is_left_to_eks():
    override = {"node_monitoring_condition": "AcceleratedHardwareReady", "node_unhealthy_reason": "NvidiaXID79Error",
                "min_repair_wait_time_mins": 2, "repair_action": "Reboot"}
    due, notes = _due([_node("a", sick_for=3), _node("b"), _node("c")], node_repair_config_overrides=[override])
    assert due == []
    assert notes == ["a: AcceleratedHardwareReady NvidiaXID79Error: the group's override says Reboot, "
                     "which the local cluster does not simulate"]
    replace = {**override, "repair_action": "Replace"}
    assert _due([_node("a", sick_for=2), _node("b"), _node("c")], node_repair_config_overrides=[replace])[0] == ["a"]


def test_one_node_at_a_time_by_default_the_next_waits_for_the_first_to_go():
    due, notes = _due([_node("a", sick_for=60, repairing=True), _node("b", sick_for=60), _node("c"), _node("d")])
    assert due == []
    assert notes == ["b: waits, the group repairs 1 node(s) at once already"]
    assert _due([_node("a", sick_for=70), _node("b", sick_for=60), _node("c"), _node("d")],
                max_parallel_nodes_repaired_count=2)[0] == ["a", "b"]


def test_repair_halts_when_more_of_the_group_is_unhealthy_than_its_threshold():
    due, notes = _due([_node("a", sick_for=60), _node("b", sick_for=60), _node("c", sick_for=60), _node("d")])
    assert due == []
    assert notes == ["pool p5-training: 3 of 4 nodes unhealthy, above the group's threshold: repair halted"]
    assert halted({"max_unhealthy_node_threshold_count": 1}, 2, 10) is True
    assert halted({"max_unhealthy_node_threshold_count": 2}, 2, 10) is False
    assert halted({"max_unhealthy_node_threshold_percentage": 50}, 1, 2) is False


def test_parallelism_as_a_percentage_of_the_unhealthy_nodes_repairs_at_least_one():
    assert parallel_limit({"max_parallel_nodes_repaired_percentage": 10}, 3) == 1
    assert parallel_limit({"max_parallel_nodes_repaired_percentage": 50}, 4) == 2
    assert parallel_limit({"max_parallel_nodes_repaired_count": 3}, 1) == 3


def test_a_pool_without_node_repair_is_not_looked_at():
    due, _ = due_repairs([_node("a", sick_for=3600)], {}, NOW)
    assert due == []


def test_only_the_agents_conditions_count_a_node_not_ready_is_not_one_of_them():
    node = _node("a")
    node["status"]["conditions"][0] = {"type": "Ready", "status": "False", "lastTransitionTime": _stamp(3600)}
    assert unhealthy(node) is None
    assert unhealthy(_node("a", sick_for=5)).condition == "AcceleratedHardwareReady"


def test_the_replacement_registers_with_the_groups_template_in_the_bad_nodes_zone_and_block():
    template = {"metadata": {"name": f"{POOL}-0", "labels": {"eks-gpu-training/pool": POOL, "kubernetes.io/hostname": f"{POOL}-0",
                                                           LAYER3: "nn-template", "topology.kubernetes.io/zone": "us-west-2a"}},
                "spec": {"taints": [{"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    name = replacement_name(POOL, [f"{POOL}-0", f"{POOL}-repair-0"])
    assert name == f"{POOL}-repair-1"
    node = replacement(template, _node(f"{POOL}-2"), name)
    assert node["metadata"]["name"] == name
    assert node["metadata"]["labels"] == {"eks-gpu-training/pool": POOL, "kubernetes.io/hostname": name,
                                          LAYER3: f"nn-{POOL}-2", "topology.kubernetes.io/zone": "us-west-2b"}
    assert node["spec"]["taints"] == [{"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}]
    assert template["metadata"]["name"] == f"{POOL}-0", "the template itself is left as it was"


def test_a_drain_moves_every_pod_but_daemonsets_and_mirrors():
    def pod(owner=None, annotations=None):
        return {"metadata": {"ownerReferences": [{"kind": owner}] if owner else [], "annotations": annotations or {}}}

    assert drained(pod("Job")) is True
    assert drained(pod()) is True
    assert drained(pod("DaemonSet")) is False
    assert drained(pod(annotations={"kubernetes.io/config.mirror": "x"})) is False
