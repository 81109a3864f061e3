"""A stack grown to a fleet: ``eks-gpu-training-local up STACK --scale N``.

The stack's managed GPU pools are given N nodes together, each pool in proportion to the nodes it
starts with (largest remainder), with the same instance types, labels and taints; every quota the
stack states in GPUs of those pools grows by the same factor (the teams' quotas, borrowing and
lending limits; the namespaces' GPU quotas), so the quotas split the grown fleet as they split the
stack's. The scaled settings go through the real program like the stack file's own, so the node
groups, Kueue's flavors and queues and the simulated nodes all come from one render.

The simulated network grows with it (``SCALED_TOPOLOGY``): blocks of 16 nodes under a layer-3
network node and 4 blocks under a layer-2 one. EC2 publishes no block size (DescribeInstanceTopology
gives each instance's three network nodes, not how many instances share one); these sizes make a
fleet where most jobs fit one block, a 32-node job needs a layer-2 block, and fragmentation matters.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError, Problem
from ..platform.stack_files import StackFile

SCALE_MAX = 5000
"""The largest fleet ``--scale`` makes: KWOK's own CI holds 5,000 nodes."""


@dataclass(frozen=True)
class SimulatedTopology:
    """How the simulated nodes of a pool sit in the network: ``nodes_per_block`` under each layer-3
    network node, ``blocks_per_layer2`` layer-3 nodes under each layer-2 node, one layer-1 node."""

    nodes_per_block: int
    blocks_per_layer2: int


STACK_TOPOLOGY = SimulatedTopology(nodes_per_block=2, blocks_per_layer2=2)
"""The stack as it is: small blocks on purpose, so a pool of three or more nodes spans two blocks
and topology-aware admission has a choice to get wrong."""

SCALED_TOPOLOGY = SimulatedTopology(nodes_per_block=16, blocks_per_layer2=4)
"""A fleet: 16 nodes per layer-3 block, 64 per layer-2 block."""


def _initial(pool: dict[str, Any]) -> int:
    desired = pool.get("desiredSize")
    return int(desired if desired is not None else pool.get("minSize", 0))


def pool_shares(pools: list[dict[str, Any]], nodes: int) -> list[int]:
    """``nodes`` split over the pools in proportion to the nodes each starts with (all alike when
    none starts with any), by largest remainder; every pool with a weight gets at least one."""
    weights = [_initial(pool) for pool in pools]
    if not any(weights):
        weights = [1] * len(pools)
    total = sum(weights)
    exact = [nodes * weight / total for weight in weights]
    shares = [max(1, math.floor(x)) if weight else 0 for x, weight in zip(exact, weights, strict=False)]
    by_remainder = sorted(range(len(pools)), key=lambda i: exact[i] - math.floor(exact[i]), reverse=True)
    for i in by_remainder[: max(0, nodes - sum(shares))]:
        shares[i] += 1
    return shares


def _scaled(value: Any, factor: float) -> Any:
    return None if value is None else int(math.floor(int(value) * factor))


def scale_settings(settings: dict[str, Any], namespace: str, nodes: int, *, running_as_is: bool = False) -> dict[str, Any]:
    """The stack's settings with its managed GPU pools grown (or shrunk) to ``nodes`` nodes together;
    ``running_as_is``: in their ``maxSize`` only, each keeping the nodes it runs (at most its new size)."""
    key = f"{namespace}:gpuNodeGroups"
    _check_scale(settings.get(key) or [], nodes)
    scaled = copy.deepcopy(settings)
    factors = _scale_pools(scaled[key], nodes, running_as_is)
    scheduling = scaled.get(f"{namespace}:scheduling") or {}
    _scale_team_quotas(scheduling, factors)
    _scale_namespace_quotas(scheduling, factors)
    return scaled


def _check_scale(pools: list[dict[str, Any]], nodes: int) -> None:
    problems = []
    if not pools:
        problems.append(Problem("--scale", "the stack has no gpuNodeGroups to scale"))
    elif not 1 <= nodes <= SCALE_MAX:
        problems.append(Problem("--scale", f"must lie between 1 and {SCALE_MAX} nodes; got {nodes}"))
    elif nodes < len(pools):
        problems.append(Problem("--scale", f"at least one node per GPU pool: {len(pools)} or more; got {nodes}"))
    if problems:
        raise ConfigError(problems)


@dataclass(frozen=True)
class _Factors:
    pools: dict[str, float]
    """Each pool's new size over its initial one, by name."""
    fleet: float
    """The managed pools' new size together over their initial one."""


def _scale_pools(pools: list[dict[str, Any]], nodes: int, running_as_is: bool) -> _Factors:
    """Each pool sized to its share of ``nodes``, in place; how much each and the fleet grew."""
    factors: dict[str, float] = {}
    before = after = 0
    for pool, share in zip(pools, pool_shares(pools, nodes), strict=False):
        initial = _initial(pool)
        factors[str(pool.get("name"))] = share / initial if initial else 0.0
        before, after = before + initial, after + share
        running = min(initial, share) if running_as_is else share
        pool.update(minSize=running, desiredSize=running, maxSize=share)
    return _Factors(factors, after / before if before else 1.0)


def _scale_team_quotas(scheduling: dict[str, Any], factors: _Factors) -> None:
    for team in scheduling.get("teams") or []:
        for quota in team.get("quotas") or []:
            factor = factors.pools.get(str(quota.get("pool")))
            if factor is None:
                continue  # a Karpenter pool: its gpuLimit is not scaled
            for field in ("gpus", "borrowingLimit", "lendingLimit"):
                if quota.get(field) is not None:
                    quota[field] = _scaled(quota[field], factor)


def _scale_namespace_quotas(scheduling: dict[str, Any], factors: _Factors) -> None:
    for space in scheduling.get("namespaces") or []:
        quota = space.get("quota") or {}
        if quota.get("gpus") is not None:
            quota["gpus"] = max(int(quota["gpus"]), _scaled(quota["gpus"], factors.fleet))


@dataclass(frozen=True)
class ScaledStack(StackFile):
    """A stack file read with its GPU pools grown to ``nodes`` (``scale_settings``)."""

    nodes: int = 0

    def settings(self) -> dict[str, Any]:
        return scale_settings(super().settings(), self.namespace(), self.nodes)

    def namespace(self) -> str:
        return StackFile(self.name, self.path, self.project_dir).namespace()


def scaled_stack(located: StackFile, nodes: int) -> ScaledStack:
    return ScaledStack(located.name, located.path, located.project_dir, nodes=nodes)
