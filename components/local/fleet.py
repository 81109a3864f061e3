"""The simulated fleet of a stack: one KWOK node for each node its managed node groups would
launch, and the instance types Karpenter's KWOK provider may launch for its NodePools.

Each managed node group's nodes carry the labels and taints the node group registers (read from
the stack's rendered ``aws:eks/nodeGroup:NodeGroup`` inputs, so they cannot drift from what the
program creates), the labels the kubelet and EKS add (hostname, os, arch, instance type, zone,
region, ``eks.amazonaws.com/nodegroup`` and ``capacityType``), the network topology labels EKS's
cloud-controller-manager adds on types EC2 reports a topology for, and the allocatable resources
of their instance type from the instance-type table the package ships (``instance_types``). Karpenter's
pools start empty: Karpenter launches their nodes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Optional

from ..config import GpuTrainingPlatformArgs
from ..facts.catalog import EC2_TOPOLOGY_INSTANCE_TYPES, GPU_INSTANCE_TYPES
from ..facts.instance_store import LOCAL_NVME_GB
from ..facts.gpu_nodes import EFA_NODE_HUGEPAGES_MIB, EFA_RESOURCE, GPU_POOL_KEY, HUGEPAGES_RESOURCE, network_layer_key
from ..facts.quantity import MIB, parse_quantity
from .instance_types import instance_type
from .scale import STACK_TOPOLOGY, SimulatedTopology

KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
"""The annotation KWOK's controller selects the nodes it simulates by (Karpenter's KWOK provider
puts it on the nodes it launches, too)."""
NODE_GROUP_TYPE = "aws:eks/nodeGroup:NodeGroup"
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
"""Labels EKS puts on every node of a managed node group (EKS user guide, "Managed node groups":
``eks.amazonaws.com/nodegroup``, ``eks.amazonaws.com/capacityType``)."""
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
"""EKS's taint effect spelling -> Kubernetes' (EKS API reference, Taint)."""
EVICTION_NODEFS_AVAILABLE = 0.10
KUBE_RESERVED_EPHEMERAL_BYTES = 2**30
OFFERING_PRICE = 1.0
"""Karpenter's KWOK provider orders offerings by price; every simulated offering costs the same."""


@dataclass(frozen=True)
class SimulatedNode:
    name: str
    pool: str
    instance_type: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, str]
    allocatable: dict[str, str]

    def manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": self.labels,
                "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]},
            },
            "spec": {"taints": self.taints} if self.taints else {},
            "status": {"capacity": self.capacity, "allocatable": self.allocatable},
        }


def _network_node_id(*parts: object) -> str:
    """A stable ID shaped like EC2's network node IDs (``nn-`` and 17 hex digits)."""
    return "nn-" + hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:17]


def topology_labels(pool: str, index: int, topology: SimulatedTopology = STACK_TOPOLOGY) -> dict[str, str]:
    """Layer 1..3 network node labels of a pool's ``index``-th node: one layer-1 node, layer-2 nodes
    of ``topology.blocks_per_layer2`` blocks each, blocks of ``topology.nodes_per_block`` nodes."""
    block = index // topology.nodes_per_block
    return {
        network_layer_key(1): _network_node_id(pool, "layer1"),
        network_layer_key(2): _network_node_id(pool, "layer2", block // topology.blocks_per_layer2),
        network_layer_key(3): _network_node_id(pool, "layer3", block),
    }


def ephemeral_storage(disk_bytes: int) -> tuple[int, int]:
    """Capacity and allocatable of a kubelet's ephemeral storage on a disk of ``disk_bytes``: the
    EKS AMI reserves 1Gi (``kubeReserved``) and evicts below 10% free (``evictionHard:
    nodefs.available``), which is how Karpenter's table gets 17Gi for a 20Gi root volume."""
    return disk_bytes, int(disk_bytes * (1 - EVICTION_NODEFS_AVAILABLE)) - KUBE_RESERVED_EPHEMERAL_BYTES


def _resources(type_name: str, *, efa: bool, disk_bytes: int) -> tuple[dict[str, str], dict[str, str]]:
    facts = instance_type(type_name)
    allocatable = dict(facts.allocatable)
    allocatable.pop("vpc.amazonaws.com/pod-eni", None)  # the VPC resource controller's, not used here
    if not efa:
        allocatable.pop(EFA_RESOURCE, None)
    if efa:
        # The kubelet takes pre-allocated hugepages out of allocatable memory (kubernetes
        # pkg/kubelet/nodestatus/setters.go, MachineInfo); Karpenter's table knows of none.
        allocatable[HUGEPAGES_RESOURCE] = f"{EFA_NODE_HUGEPAGES_MIB}Mi"
        memory_mib = int(parse_quantity(allocatable["memory"]) / MIB)
        allocatable["memory"] = f"{memory_mib - EFA_NODE_HUGEPAGES_MIB}Mi"
    disk_capacity, disk_allocatable = ephemeral_storage(disk_bytes)
    allocatable["ephemeral-storage"] = str(disk_allocatable)
    capacity = {**allocatable, "cpu": str(facts.vcpus), "memory": f"{facts.memory_mib}Mi",
                "ephemeral-storage": str(disk_capacity)}
    return capacity, allocatable


def _disk_bytes(args: GpuTrainingPlatformArgs, type_name: str, root_volume_gib: int) -> int:
    """What the kubelet's ephemeral storage sits on: the instance-store RAID0 array where the
    stack makes one and the type has NVMe, else the root volume."""
    if type_name in GPU_INSTANCE_TYPES and args.storage.instance_store == "raid0" and type_name in LOCAL_NVME_GB:
        return LOCAL_NVME_GB[type_name] * 10**9
    return root_volume_gib * 2**30


def _zones(args: GpuTrainingPlatformArgs, pool_zone: Optional[str]) -> list[str]:
    if pool_zone:
        return [pool_zone]
    network = args.network
    zones = list(network.availability_zones) or [subnet.availability_zone for subnet in network.subnets]
    return sorted(dict.fromkeys(zones)) or [f"{args.region}a"]


def _node_groups(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == NODE_GROUP_TYPE]


def managed_nodes(
    args: GpuTrainingPlatformArgs, resources: list[dict[str, Any]], topology: SimulatedTopology = STACK_TOPOLOGY,
) -> list[SimulatedNode]:
    """The nodes of every managed node group of a rendered stack (``resources.json``'s resources),
    in the simulated network ``topology``."""
    pools = {pool.name: pool for pool in args.gpu_node_groups}
    nodes: list[SimulatedNode] = []
    for group in _node_groups(resources):
        inputs = group["inputs"]
        labels = dict(inputs.get("labels") or {})
        pool_name = labels.get(GPU_POOL_KEY)
        pool = pools.get(pool_name) if pool_name else None
        type_name = inputs["instanceTypes"][0]
        efa = bool(pool and pool.efa_enabled)
        root_gib = pool.root_volume_size_gib if pool else args.system_node_group.disk_size_gib
        capacity, allocatable = _resources(type_name, efa=efa,
                                           disk_bytes=_disk_bytes(args, type_name, root_gib))
        zones = _zones(args, pool.availability_zone if pool else None)
        taints = [
            {"key": t["key"], **({"value": t["value"]} if t.get("value") else {}), "effect": TAINT_EFFECTS[t["effect"]]}
            for t in inputs.get("taints") or []
        ]
        prefix = pool_name or "system"
        for index in range(int(inputs["scalingConfig"]["desiredSize"])):
            name = f"{prefix}-{index}"
            zone = zones[index % len(zones)]
            node_labels = {
                **labels,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": type_name,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": args.region,
                EKS_NODEGROUP_LABEL: group["name"],
                EKS_CAPACITY_TYPE_LABEL: str(inputs.get("capacityType") or "ON_DEMAND"),
            }
            if type_name in GPU_INSTANCE_TYPES and type_name in EC2_TOPOLOGY_INSTANCE_TYPES:
                node_labels.update(topology_labels(prefix, index, topology))
            nodes.append(SimulatedNode(name, prefix, type_name, node_labels, taints, capacity, allocatable))
    return nodes


def _requirement(nodepool: dict[str, Any], key: str) -> list[str]:
    for requirement in nodepool["spec"]["template"]["spec"].get("requirements") or []:
        if requirement["key"] == key and requirement["operator"] == "In":
            return list(requirement["values"])
    return []


def karpenter_instance_types(
    args: GpuTrainingPlatformArgs, nodepools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The instance-types file of Karpenter's KWOK provider (its ``InstanceTypeOptions`` JSON):
    each type a stack's NodePools allow, offered in the zones and capacity types they allow."""
    pools = {pool.name: pool for pool in args.karpenter.gpu_node_pools}
    offered: dict[str, dict[str, Any]] = {}
    for nodepool in nodepools:
        pool = pools.get(nodepool["metadata"]["name"])
        efa = bool(pool and pool.efa_enabled)
        zones = _requirement(nodepool, "topology.kubernetes.io/zone") or _zones(args, None)
        capacity_types = _requirement(nodepool, "karpenter.sh/capacity-type") or ["on-demand"]
        for type_name in _requirement(nodepool, "node.kubernetes.io/instance-type"):
            root_gib = pool.root_volume_size_gib if pool else 20
            _, allocatable = _resources(type_name, efa=efa, disk_bytes=_disk_bytes(args, type_name, root_gib))
            entry = offered.setdefault(type_name, {
                "name": type_name, "offerings": [], "architecture": "amd64", "operatingSystems": ["linux"],
                "resources": allocatable,
            })
            for zone in zones:
                for capacity_type in capacity_types:
                    offering = {
                        "Price": OFFERING_PRICE, "Available": True,
                        "Requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
                        ],
                    }
                    if offering not in entry["offerings"]:
                        entry["offerings"].append(offering)
    return list(offered.values())

