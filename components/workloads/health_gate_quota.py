"""The ResourceQuota of the health gate's namespace: the most its check pods and the gate's own pod
may hold at once, from the stack's GPU pools.

The gate makes one check Job per joining node, whose one pod asks for every GPU and EFA device of
that node, and deletes the check of a node that is gone (by uid) at its next round. So the check
pods that exist at once are at most the GPU nodes that exist at once, counted per pool:

- a managed node group: ``maxSize``, plus the nodes a roll launches before it terminates old ones.
  Strategy ``DEFAULT`` launches first, up to the larger of twice the group's Availability Zones and
  ``updateMaxUnavailable`` (EKS user guide, "Understand each phase of node updates", scale up
  phase); ``MINIMAL`` terminates first (EKS API ``NodegroupUpdateConfig.updateStrategy``);
- a Karpenter pool: ``gpuLimit`` over the GPUs of its smallest type (Karpenter launches no node past
  a NodePool's limits), plus one replacement launched before the node it replaces goes.

The quota is that many check pods' requests plus the gate's pod. Every term is an upper bound: a
pod the quota refuses is not a failed check, the Job controller retries it, but the check's
deadline runs meanwhile. A ResourceQuota counts only pods that have not ended (Kubernetes,
"Resource Quotas"), so a failed check kept an hour for its logs holds nothing.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping, Sequence

from ..config import GpuNodeGroupConfig, GpuPoolConfig, KarpenterGpuNodePoolConfig
from ..facts.quantity import MIB, cpu_quantity, memory_quantity, parse_quantity
from ..healthgate.node_check import EFA_RESOURCE, GPU_RESOURCE
from ..healthgate.gate_settings import PoolDevices
from .fleet_capacity import pool_capacity

QUOTA_NAME = "health-checks"
"""Name of the ResourceQuota in the gate's namespace."""
GATE_PODS = 1
"""The gate's Deployment: one replica, replaced with ``Recreate`` (the old pod ends first)."""
MAX_REGION_ZONES = 6
"""The most Availability Zones of an AWS Region (us-east-1's six, AWS "Regions and Zones"): what a
pool that names neither its zone nor its subnets may span."""
KARPENTER_REPLACEMENTS = 1
"""Nodes a Karpenter pool may launch past its limit's count to replace one that is disrupted
(Karpenter's disruption "spins up replacements" before it deletes the node, karpenter.sh
"Disruption")."""


def pool_zones(pool: GpuPoolConfig) -> int:
    """Availability Zones a pool may span at most: its own, else one per subnet it lists, else a Region's most."""
    if pool.availability_zone is not None:
        return 1
    if pool.subnet_ids:
        return len(pool.subnet_ids)
    return MAX_REGION_ZONES


def pool_nodes_at_once(pool: GpuPoolConfig, path: str) -> int:
    """The most nodes of ``pool`` (at key ``path``) that may exist at once, rolls and replacements included."""
    if isinstance(pool, GpuNodeGroupConfig):
        surge = max(2 * pool_zones(pool), pool.update_max_unavailable) if pool.update_strategy == "DEFAULT" else 0
        return pool.max_size + surge
    assert isinstance(pool, KarpenterGpuNodePoolConfig), "a pool is a node group or a Karpenter pool"  # noqa: S101 - the two kinds of pool
    capacity = pool_capacity(pool, path)
    return (capacity.nodes if capacity is not None else 0) + KARPENTER_REPLACEMENTS


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """CPU and memory a pod's template requests, as a ResourceQuota counts them: the larger of its
    largest init container's and the sum of its containers' (Kubernetes, "Resource Management for
    Pods and Containers", init containers)."""
    spec = pod.get("spec") or {}

    def request(container: Mapping[str, Any], resource: str) -> Fraction:
        value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        return parse_quantity(str(value)) if value is not None else Fraction(0)

    result = {}
    for resource in ("cpu", "memory"):
        init = max((request(c, resource) for c in spec.get("initContainers") or []), default=Fraction(0))
        result[resource] = max(init, sum((request(c, resource) for c in spec.get("containers") or []), Fraction(0)))
    return result


def quota_hard(check_pod: Mapping[str, Any], pools: Sequence[tuple[int, PoolDevices]],
               gate_requests: Mapping[str, str]) -> dict[str, str]:
    """``spec.hard``: ``pools`` are (nodes at once, devices) of each GPU pool; ``check_pod`` the
    check pod's template; ``gate_requests`` the gate container's CPU and memory requests."""
    nodes = sum(count for count, _ in pools)
    check = pod_requests(check_pod)
    cpu = nodes * check["cpu"] + parse_quantity(gate_requests["cpu"])
    memory = nodes * check["memory"] + parse_quantity(gate_requests["memory"])
    return {
        "pods": str(nodes + GATE_PODS),
        "requests.cpu": cpu_quantity(int(cpu * 1000)),
        "requests.memory": memory_quantity(-(-int(memory) // MIB)),
        f"requests.{GPU_RESOURCE}": str(sum(count * devices.gpus for count, devices in pools)),
        f"requests.{EFA_RESOURCE}": str(sum(count * devices.efa for count, devices in pools)),
    }


def quota_manifest(namespace: str, labels: Mapping[str, str], hard: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": QUOTA_NAME, "namespace": namespace, "labels": dict(labels)},
            "spec": {"hard": dict(hard)}}
