"""EKS's UpdateNodegroupConfig on running nodes, as the local cluster simulates it: the taints and
labels a node group gains reach its running nodes, those it drops leave them, and what others put
on a node stays (the cluster tier applies it through the API server)."""

from __future__ import annotations

from eks_gpu_training.local.node_group_update import NodeGroupSettings, node_group_settings, updated_labels, updated_taints

GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
STARTUP = {"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}
QUARANTINE = {"key": "eks-gpu-training/unhealthy", "value": "XID", "effect": "NoExecute"}


def group(*taints, **labels):
    return NodeGroupSettings(tuple(taints), labels)


def test_a_taint_the_group_gains_reaches_its_running_node_beside_what_others_put_there():
    assert updated_taints([GPU, QUARANTINE], group(GPU), group(GPU, STARTUP)) == [GPU, QUARANTINE, STARTUP]


def test_a_taint_the_group_drops_leaves_its_running_node_and_one_already_there_is_not_doubled():
    assert updated_taints([GPU, STARTUP], group(GPU, STARTUP), group(GPU)) == [GPU]
    assert updated_taints([GPU, STARTUP], group(GPU), group(GPU, STARTUP)) == [GPU, STARTUP]


def test_labels_follow_the_group_and_a_nodes_own_labels_stay():
    current = {"role": "gpu-training", "kubernetes.io/hostname": "n"}
    assert updated_labels(current, group(role="gpu-training"), group(team="a")) == {"kubernetes.io/hostname": "n", "team": "a"}


def test_the_settings_of_each_node_group_come_from_the_renders_node_group_inputs():
    resources = [{"type": "aws:eks/nodeGroup:NodeGroup", "name": "p5-training",
                  "inputs": {"labels": {"role": "gpu-training"},
                             "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
                                        {"key": "eks-gpu-training/unverified", "effect": "NO_SCHEDULE"}]}},
                 {"type": "aws:eks/cluster:Cluster", "name": "c", "inputs": {}}]
    assert node_group_settings(resources) == {"p5-training": group(GPU, STARTUP, role="gpu-training")}
