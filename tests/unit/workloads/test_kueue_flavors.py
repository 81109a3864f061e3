"""Kueue's ResourceFlavors and Topology from the stack's pools (``workloads/kueue_flavors.py``): one flavor
per GPU pool selecting only its nodes, and the pools the configuration refuses for them."""

from __future__ import annotations



from eks_gpu_training.config import GpuNodeGroupConfig, KarpenterGpuNodePoolConfig
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
import pulumi_kubernetes as k8s

from eks_gpu_training.offline.check import check_render
from eks_gpu_training.workloads.fleet_capacity import pool_capacity
from eks_gpu_training.workloads.kueue_flavors import pool_flavor
from tests.support.builders import kubernetes_objects
from tests.support.kueue_stacks import raw, problems, node_sources, with_kueue_chart


def test_every_gpu_pool_has_exactly_one_flavor_whose_labels_select_only_its_nodes(stack_graph):
    _, graph = stack_graph
    sources = node_sources(graph)
    gpu_sources = {name for name, labels in sources.items() if labels.get("role") == "gpu-training"}
    flavors = [f.inputs for f in kubernetes_objects(graph, "ResourceFlavor")]
    selected = {
        f["metadata"]["name"]: [name for name, labels in sources.items() if f["spec"]["nodeLabels"].items() <= labels.items()]
        for f in flavors
    }
    assert all(len(pools) == 1 for pools in selected.values()), selected
    assert sorted(p for pools in selected.values() for p in pools) == sorted(gpu_sources)
    assert all(gpu_toleration() in f["spec"]["tolerations"] for f in flavors)


def test_dev_flavors_follow_its_pools_a_fixed_node_with_topology_and_karpenter_on_quota(dev_graph):
    flavors = {f.inputs["metadata"]["name"]: f.inputs["spec"] for f in kubernetes_objects(dev_graph, "ResourceFlavor")}
    assert {name: spec.get("topologyName") for name, spec in flavors.items()} == {"dev-gpu-tas": "aws-network", "karpenter-gpu-training": None}


def test_topology_names_ec2s_network_layers_down_to_the_node(prod_graph):
    [topology] = kubernetes_objects(prod_graph, "Topology")
    assert [level["nodeLabel"] for level in topology.inputs["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]


def test_a_topology_flavor_without_node_labels_fails_kueues_cel_rule(render_program):
    program = with_kueue_chart(lambda: k8s.apiextensions.CustomResource(
        "flavor", api_version="kueue.x-k8s.io/v1beta2", kind="ResourceFlavor", metadata={"name": "p5"}, spec={"topologyName": "aws-network"}
    ))
    [failure] = check_render(render_program(program)).failures
    assert failure.startswith("manifests/resourceflavor_p5.yaml: ResourceFlavor p5: CEL rule at /spec: at least one nodeLabel is required when topology is set")


def test_flavors_follow_whether_the_pools_nodes_exist():
    managed = GpuNodeGroupConfig(name="p5", instance_types=["p5.48xlarge"], availability_zone="us-west-2a", min_size=2, max_size=4)
    at_zero = managed.model_copy(update={"min_size": 0})
    block = at_zero.model_copy(update={"capacity_type": "CAPACITY_BLOCK", "capacity_reservation_id": "cr-0123456789abcdef0"})
    karpenter = KarpenterGpuNodePoolConfig(name="p5", instance_types=["p5.48xlarge"])
    # g6.xlarge has no EC2 network topology, so its nodes lack the Topology's levels.
    no_topology = managed.model_copy(update={"name": "g6", "instance_types": ["g6.xlarge"]})
    pools = (("min", managed), ("zero", at_zero), ("block", block), ("karpenter", karpenter), ("untopological", no_topology))
    flavors = {key: pool_flavor(pool_capacity(pool, key)) for key, pool in pools}
    assert {k: (f.name, f.node_label, f.topology_nodes) for k, f in flavors.items()} == {
        "min": ("p5-tas", ("eks-gpu-training/pool", "p5"), 2),
        "zero": ("p5", ("eks-gpu-training/pool", "p5"), 0),
        "block": ("p5-tas", ("eks-gpu-training/pool", "p5"), 4),
        "karpenter": ("karpenter-p5", ("karpenter.sh/nodepool", "p5"), 0),
        "untopological": ("g6", ("eks-gpu-training/pool", "g6"), 0),
    }


def test_rejects_pools_whose_flavors_would_share_a_name():
    values = raw()
    twin = {**values["gpuNodeGroups"][0], "name": "p5-training-tas", "minSize": 0, "desiredSize": 0}
    values["gpuNodeGroups"].append(twin)
    assert "gpuNodeGroups[1].name: gives the ResourceFlavor name 'p5-training-tas' that gpuNodeGroups[0] has too; rename the pool" in problems(values)
