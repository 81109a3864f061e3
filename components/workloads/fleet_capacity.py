"""What GPUs, vCPUs and memory the stack's fleet can provide, and namespace quotas resolved against it.

The fleet's GPU capacity is, for each managed node group, its maximum node count times the GPUs of
one node, plus each Karpenter pool's GPU limit. A pool may list several instance types and every
node may be the largest of them, so a node counts with the most GPUs (and vCPUs, and memory) among
its pool's types: the capacity is an upper bound, and counting the smallest type would refuse work
the fleet can run. GPU counts come from ``catalog.py``, which names its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..facts.catalog import GPU_INSTANCE_TYPES
from ..config import GpuNodeGroupConfig, GpuPoolConfig, GpuTrainingPlatformArgs, KarpenterGpuNodePoolConfig, ResourceQuotaConfig
from ..facts.quantity import cpu_quantity, memory_quantity
from .training_storage import stack_claims
from .templates import GPU_RESOURCE


@dataclass(frozen=True)
class PoolCapacity:
    """What one GPU pool of the fleet can bring at most."""

    pool: GpuPoolConfig
    """The pool's configuration."""
    path: str
    """The pool's key path, e.g. ``gpuNodeGroups[0]`` or ``karpenter.gpuNodePools[0]``."""
    bound: str
    """The key that bounds the pool and how, e.g. ``gpuNodeGroups[0].maxSize 2 × 8 GPUs (p5.48xlarge)``."""
    gpus: int
    """GPUs at most."""
    nodes: int
    """Nodes at most."""
    vcpus_per_node: int
    """vCPUs of the pool's largest type."""
    memory_mib_per_node: int
    """Memory of the pool's largest type."""
    smallest_node_gpus: int
    """GPUs of the pool's smallest type: what one node brings at least."""

    def __str__(self) -> str:
        return f"{self.bound} = {self.gpus}"


def pool_capacity(pool: GpuPoolConfig, path: str) -> Optional[PoolCapacity]:
    """The most a pool can bring; None when none of its types is a known GPU type (the pool's own
    validation reports that). A managed node group has at most ``maxSize`` nodes, each of which may
    be its largest type; a Karpenter pool launches nodes until they hold ``gpuLimit`` GPUs, so at
    most that many GPUs on as many nodes as its smallest type allows."""
    facts = [GPU_INSTANCE_TYPES[t] for t in pool.instance_types if t in GPU_INSTANCE_TYPES]
    if not facts:
        return None
    largest = max((t for t in pool.instance_types if t in GPU_INSTANCE_TYPES), key=lambda t: GPU_INSTANCE_TYPES[t].gpus)
    smallest_gpus = min(f.gpus for f in facts)
    if isinstance(pool, GpuNodeGroupConfig):
        per_node = GPU_INSTANCE_TYPES[largest].gpus
        nodes, gpus = pool.max_size, pool.max_size * per_node
        bound = f"{path}.maxSize {pool.max_size} × {per_node} GPUs ({largest})"
    else:
        assert isinstance(pool, KarpenterGpuNodePoolConfig), "a pool is a node group or a Karpenter pool"  # noqa: S101 - the two kinds of pool
        nodes, gpus = pool.gpu_limit // smallest_gpus, pool.gpu_limit
        bound = f"{path}.gpuLimit"
    return PoolCapacity(
        pool=pool,
        path=path,
        bound=bound,
        gpus=gpus,
        nodes=nodes,
        vcpus_per_node=max(f.vcpus for f in facts),
        memory_mib_per_node=max(f.memory_mib for f in facts),
        smallest_node_gpus=smallest_gpus,
    )


def fleet_capacity(args: GpuTrainingPlatformArgs) -> list[PoolCapacity]:
    """Every GPU pool's capacity: the managed node groups, then the Karpenter pools (when Karpenter is on)."""
    pools: list[tuple[GpuPoolConfig, str]] = [(p, f"gpuNodeGroups[{i}]") for i, p in enumerate(args.gpu_node_groups)]
    if args.karpenter.enabled:
        pools += [(p, f"karpenter.gpuNodePools[{i}]") for i, p in enumerate(args.karpenter.gpu_node_pools)]
    capacities = (pool_capacity(pool, path) for pool, path in pools)
    return [c for c in capacities if c is not None]


def fleet_gpu_capacity(args: GpuTrainingPlatformArgs) -> int:
    """GPUs the fleet can provide at most: each managed pool's maxSize × GPUs per node plus each
    Karpenter pool's gpuLimit (the seed's 16 for two p5.48xlarge)."""
    return sum(c.gpus for c in fleet_capacity(args))


@dataclass(frozen=True)
class ResolvedQuota:
    """A namespace's quota with every default filled in."""

    gpus: int
    """``requests.nvidia.com/gpu``: GPUs the namespace's pods may request in total."""
    cpu: str
    """``requests.cpu``, a quantity such as ``1536``."""
    memory: str
    """``requests.memory``, a quantity such as ``16Ti``."""
    persistent_volume_claims: int
    """``persistentvolumeclaims``: PVCs the namespace may hold."""

    def hard(self) -> dict[str, str]:
        """``spec.hard`` of the ResourceQuota."""
        return {
            f"requests.{GPU_RESOURCE}": str(self.gpus),
            "requests.cpu": self.cpu,
            "requests.memory": self.memory,
            "persistentvolumeclaims": str(self.persistent_volume_claims),
        }


def resolve_quota(quota: ResourceQuotaConfig, args: GpuTrainingPlatformArgs) -> ResolvedQuota:
    """The quota, unset amounts taken from the fleet's capacity."""
    fleet = fleet_capacity(args)
    return ResolvedQuota(
        gpus=quota.gpus if quota.gpus is not None else sum(c.gpus for c in fleet),
        cpu=quota.cpu if quota.cpu is not None else cpu_quantity(1000 * sum(c.nodes * c.vcpus_per_node for c in fleet)),
        memory=quota.memory if quota.memory is not None else memory_quantity(sum(c.nodes * c.memory_mib_per_node for c in fleet)),
        # The stack's own claims (the FSx volume) come on top of what the namespace's users may claim.
        persistent_volume_claims=quota.persistent_volume_claims + stack_claims(args),
    )
