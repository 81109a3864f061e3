"""``kueue-blocks/<pool>``: whether each job the stack asks Kueue to keep in one network block can
ever find one. With ``topologyMode: required`` a job of up to ``kueue.blockNodes`` nodes waits for
one layer-3 block and a larger one for one layer-2 block; a job larger than every block of its pool
at its layer waits for ever, with no error anywhere but its Workload's message. EC2 publishes no
block size, so the fleet's own nodes say it: the most nodes under one network node, per layer."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from ..config import GpuTrainingPlatformArgs
from ..facts.gpu_nodes import GPU_POOL_KEY, network_layer_key
from ..workloads.kueue_queues import app_topology, pool_flavor, topology_layer_of
from ..workloads.scheduling_policies import app_pool
from .objects import gpu_nodes, labels
from .rows import Row, failed, passed

KUEUE_BLOCKS = "kueue-blocks"


def largest_block(nodes: list[Mapping[str, Any]], layer: int) -> int:
    """The most of ``nodes`` under one network node of ``layer``."""
    counted = Counter(labels(node).get(network_layer_key(layer)) for node in nodes)
    counted.pop(None, None)
    return max(counted.values(), default=0)


def kueue_blocks(snapshot: Any, args: GpuTrainingPlatformArgs) -> list[Row]:
    """A row per pool with topology flavor: every job size the stack would ask one block for fits
    the pool's largest block at its layer."""
    if not args.kueue.enabled:
        return []
    by_pool: dict[str, list[Mapping[str, Any]]] = {}
    for node in gpu_nodes(snapshot.nodes):
        pool = labels(node).get(GPU_POOL_KEY)
        if pool:
            by_pool.setdefault(pool, []).append(node)
    rows = []
    for capacity in {c.pool.name: c for c in filter(None, (app_pool(a, args) for a in args.scheduling.training_apps))}.values():
        if not pool_flavor(capacity).topology:
            continue
        pool, nodes = capacity.pool.name, by_pool.get(capacity.pool.name, [])
        layer3, layer2 = largest_block(nodes, args.kueue.topology_layer), largest_block(nodes, max(1, args.kueue.topology_layer - 1))
        problems = []
        for app in args.scheduling.training_apps:
            found = app_pool(app, args)
            if found is None or found.pool.name != pool or app_topology(app, pool_flavor(found), args.kueue) != "required":
                continue
            layer = topology_layer_of(args.kueue, app.nodes)
            largest = layer3 if layer == args.kueue.topology_layer else layer2
            if app.nodes > largest:
                problems.append(f"{app.name} ({app.nodes} nodes) asks for one layer-{layer} block, the largest holds {largest}")
        # Jobs other than the stack's own: sizes above the largest layer-3 block that still ask for one.
        stranded = min(args.kueue.block_nodes, len(nodes))
        if layer3 < stranded:
            problems.append(f"a job of {layer3 + 1} to {stranded} nodes would ask for one layer-{args.kueue.topology_layer} "
                            f"block (kueue.blockNodes {args.kueue.block_nodes}), the largest holds {layer3}")
        item = f"{KUEUE_BLOCKS}/{pool}"
        if problems:
            rows.append(failed(item, f"{pool}: " + "; ".join(problems) + ": Kueue would never admit it.",
                               f"set kueue.blockNodes to at most {layer3} (a larger job then asks for one layer-2 block), "
                               "or give the app `topology: preferred`."))
        else:
            rows.append(passed(item, f"{pool}: {len(nodes)} nodes, at most {layer3} under one layer-{args.kueue.topology_layer} "
                                     f"network node; every job the stack asks one block for fits one."))
    return rows
