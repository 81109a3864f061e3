"""Kueue's network Topology and ResourceFlavors for the GPU fleet: one flavor per GPU pool, the
topology request each training job makes, and the rules that keep them admissible (``validate_kueue``).

Topology-aware scheduling counts the allocatable capacity of nodes that are Ready now (Kueue TAS
docs, "Capacity calculation"); its only autoscaler integration is the cluster autoscaler's
ProvisioningRequest admission check, which Karpenter does not implement. A topology flavor on a
pool that starts from zero would never admit a job, so only pools whose nodes exist (a managed node
group's ``minSize`` nodes, a Capacity Block) and carry EC2's network-layer labels get
``topologyName``; Karpenter pools, pools at zero and instance types without EC2 topology get
quota-only flavors, and jobs on them carry no topology request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..config import GpuNodeGroupConfig, GpuTrainingPlatformArgs, KueueConfig, Problem, TrainingAppConfig
from ..facts.catalog import eks_labels_topology
from ..facts.gpu_nodes import GPU_POOL_KEY, HOSTNAME_KEY, KARPENTER_NODEPOOL_LABEL, gpu_toleration, network_layer_key
from .fleet_capacity import PoolCapacity, fleet_capacity
from .templates import PART_OF

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
"""The storage version of Kueue 0.19's CRDs (kueue-0.19.2/crds)."""

TOPOLOGY_NAME = "aws-network"
"""The Topology every topology flavor names."""

TOPOLOGY_LEVELS = (network_layer_key(1), network_layer_key(2), network_layer_key(3), HOSTNAME_KEY)
"""EC2's network hierarchy from the top (layer 1) down to the node: the labels EKS sets from
DescribeInstanceTopology (and the topology labeler fills in). The node level lets Kueue pick each
pod's node and replace a failed one (TAS docs, "Hot swap support")."""


@dataclass(frozen=True)
class PoolFlavor:
    """The ResourceFlavor of one GPU pool."""

    name: str
    """Flavor name: the pool's, ``karpenter-<pool>`` for Karpenter pools, ``-tas`` appended for topology flavors."""
    capacity: PoolCapacity
    """The pool's capacity (its nominal quota)."""
    node_label: tuple[str, str]
    """The node label only the pool's nodes carry."""
    topology_nodes: int
    """Nodes that exist whatever the load, which topology-aware scheduling can count; 0: a quota-only flavor."""

    @property
    def topology(self) -> bool:
        return self.topology_nodes > 0


def topology_nodes(capacity: PoolCapacity) -> int:
    """Nodes of a pool that exist without pending pods and carry the network-layer labels: a managed
    pool's ``minSize`` (a Capacity Block's nodes run for the whole block, its ``maxSize``); none for
    Karpenter pools, nor for instance types EC2 reports no network topology for (their nodes lack
    the Topology's levels, so topology-aware scheduling has no place for them)."""
    pool = capacity.pool
    if not isinstance(pool, GpuNodeGroupConfig) or not eks_labels_topology(pool.instance_types):
        return 0
    return pool.max_size if pool.capacity_type == "CAPACITY_BLOCK" else pool.min_size


def pool_flavor(capacity: PoolCapacity) -> PoolFlavor:
    """The flavor of one pool (see ``PoolFlavor``)."""
    managed = isinstance(capacity.pool, GpuNodeGroupConfig)
    nodes = topology_nodes(capacity)
    base = capacity.pool.name if managed else f"karpenter-{capacity.pool.name}"
    # nodeLabels and topologyName of a topology flavor are immutable (CEL rules of the CRD), so a
    # flavor that gains or loses its topology gets a new name: Pulumi creates it, moves the
    # ClusterQueue over, then deletes the old one once nothing references it.
    return PoolFlavor(
        name=f"{base}-tas" if nodes else base,
        capacity=capacity,
        node_label=(GPU_POOL_KEY, capacity.pool.name) if managed else (KARPENTER_NODEPOOL_LABEL, capacity.pool.name),
        topology_nodes=nodes,
    )


def pool_flavors(args: GpuTrainingPlatformArgs) -> list[PoolFlavor]:
    """One flavor per GPU pool, managed pools first."""
    return [pool_flavor(c) for c in fleet_capacity(args)]


def app_topology(app: TrainingAppConfig, flavor: PoolFlavor, kueue: KueueConfig) -> Optional[str]:
    """The app's topology request mode: its own ``topology``, else ``kueue.topologyMode`` on a
    topology flavor and none on a quota-only one."""
    if app.topology is not None:
        return None if app.topology == "none" else app.topology
    return kueue.topology_mode if flavor.topology else None


def topology_layer_of(kueue: KueueConfig, nodes: int) -> int:
    """The network layer a job of ``nodes`` nodes asks Kueue for: ``topologyLayer``, or the layer
    above it when the job has more than ``blockNodes``."""
    return kueue.topology_layer if nodes <= kueue.block_nodes or kueue.topology_layer == 1 else kueue.topology_layer - 1


def kueue_metadata(name: str, namespace: Optional[str] = None) -> dict[str, Any]:
    """Metadata of a Kueue object the stack makes: its name, namespace and part-of label."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": PART_OF}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def topology() -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Topology",
        "metadata": kueue_metadata(TOPOLOGY_NAME),
        "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]},
    }


def resource_flavor(flavor: PoolFlavor) -> dict[str, Any]:
    """The pool's nodes by its label; the GPU toleration added to admitted pods; the Topology on topology flavors."""
    key, value = flavor.node_label
    spec: dict[str, Any] = {"nodeLabels": {key: value}, "tolerations": [gpu_toleration()]}
    if flavor.topology:
        spec["topologyName"] = TOPOLOGY_NAME
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": kueue_metadata(flavor.name), "spec": spec}


def validate_kueue(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Combinations Kueue could never admit. (Quotas need no rule: ``flavor_quotas`` keeps every
    ClusterQueue within its namespace's ResourceQuota.)"""
    kueue = args.kueue
    apps = args.scheduling.training_apps
    if not kueue.enabled:
        return [
            Problem(f"scheduling.trainingApps[{i}].topology", "is only used with kueue.enabled: true")
            for i, app in enumerate(apps)
            if app.topology is not None
        ]
    flavors = pool_flavors(args)
    problems = []
    names = [f.name for f in flavors]
    for i, named in enumerate(flavors):
        if names.index(named.name) != i:
            problems.append(
                Problem(
                    f"{named.capacity.path}.name",
                    f"gives the ResourceFlavor name '{named.name}' that {flavors[names.index(named.name)].capacity.path} has too; rename the pool",
                )
            )
    by_pool = {f.capacity.pool.name: f for f in flavors}
    for i, app in enumerate(apps):
        flavor = by_pool.get(app.pool) if app.pool is not None else (flavors[0] if len(flavors) == 1 else None)
        if flavor is None:
            continue  # the scheduling rules report the unknown pool
        path = f"scheduling.trainingApps[{i}]"
        mode = app_topology(app, flavor, kueue)
        if mode is not None and not flavor.topology:
            problems.append(
                Problem(
                    f"{path}.topology",
                    f"'{mode}' needs Ready nodes with network-layer labels, but {flavor.capacity.path} has none that always "
                    "exist (a Karpenter pool, minSize 0, or instance types EC2 reports no topology for): Kueue's topology-aware "
                    "scheduling counts only Ready nodes and cannot make Karpenter launch any, so the job would never be admitted; "
                    "set topology: none, or run the app on a managed pool with minSize > 0",
                )
            )
        elif mode is not None and app.instance_types is not None and set(app.instance_types) < set(flavor.capacity.pool.instance_types):
            problems.append(
                Problem(
                    f"{path}.instanceTypes",
                    f"narrows {flavor.capacity.path}'s types, but with a topology request Kueue picks the nodes among all of "
                    "the pool's by their labels, node selector and tolerations, and may pick a node the pods' instance-type "
                    "affinity refuses; leave instanceTypes unset, or set topology: none",
                )
            )
        elif mode is not None and app.nodes > flavor.topology_nodes:
            problems.append(
                Problem(
                    f"{path}.nodes",
                    f"{app.nodes} pods, one per node, with a topology request need {app.nodes} Ready nodes, but "
                    f"{flavor.capacity.path} keeps {flavor.topology_nodes} (its minSize): the job would never be admitted; "
                    "raise minSize, or set topology: none",
                )
            )
    return problems
