"""The seed's two "(3+ nodes)" items, judged on a live cluster: the network-topology labels on the
GPU nodes of pools with three or more nodes, and topology-aware placement of training jobs of three
or more pods (a spread constraint or a Kueue topology request over a network layer, and the job's
pods under one network block)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..addons import topology_labeler
from ..facts.catalog import EC2_TOPOLOGY_INSTANCE_TYPES
from ..facts.gpu_nodes import network_layer_key
from ..workloads.training_spec import TOPOLOGY_ANNOTATIONS
from .objects import NO_TRAINING_JOB, TrainingJob, annotations_of, gpu_nodes, instance_type, labels, name, node_name, nodes_by_pool, training_jobs
from .rows import EXAMPLES, Row, described, failed, group, listing, passed, skipped
from .snapshot import Snapshot

TOPOLOGY_LABELS = "topology-labels"
TOPOLOGY_AWARE_SPREAD = "topology-aware-spread"

TOPOLOGY_MIN_NODES = 3
"""The seed's "(3+ nodes)": topology labels and topology-aware placement matter from three nodes on."""

NETWORK_LAYERS = (1, 2, 3)
"""The network-node layers EC2 reports (1 = top of the network, 3 = the switch closest to the instance)."""
LAYER_KEYS = tuple(network_layer_key(layer) for layer in NETWORK_LAYERS)


def topology_labels(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """Every GPU node of a pool with 3+ nodes carries the layer-1..3 network-node labels (nodes of
    types EC2 publishes no topology for cannot, and are left out)."""
    all_pools = nodes_by_pool(gpu_nodes(snapshot.nodes))
    pools = {pool: nodes for pool, nodes in all_pools.items() if len(nodes) >= TOPOLOGY_MIN_NODES}
    if not pools:
        largest = max((len(n), str(p)) for p, n in all_pools.items()) if all_pools else None
        return skipped(
            TOPOLOGY_LABELS,
            f"no GPU pool has {TOPOLOGY_MIN_NODES} or more nodes" + (f" (the largest, {largest[1]}, has {largest[0]})" if largest else ""),
        )
    wrong, judged, untyped = [], 0, []
    for pool, nodes in pools.items():
        for node in nodes:
            if instance_type(node) not in EC2_TOPOLOGY_INSTANCE_TYPES:
                untyped.append((name(node), f"of type {instance_type(node)}" if instance_type(node) else "of no instance type"))
                continue
            judged += 1
            lacking = [key.rsplit("-", 1)[1] for key in LAYER_KEYS if not labels(node).get(key)]
            if lacking:
                wrong.append((name(node), f"of {pool} without network-node-layer-{', -'.join(lacking)}"))
    not_judged = described(group("node", untyped, examples))
    note = f" Not judged, EC2 publishes no topology for their types: {not_judged}." if untyped else ""
    if wrong:
        groups = group("node", wrong, examples)
        return failed(
            TOPOLOGY_LABELS,
            f"{described(groups)}.{note}",
            "EKS labels nodes of these types as they join, and the topology labeler (topologyLabeler.enabled) fills in "
            f"missing labels: check its pod on the node (kubectl -n {topology_labeler.NAMESPACE} get pods -o wide) and its log.",
            groups,
        )
    if not judged:
        return skipped(TOPOLOGY_LABELS, f"the pools with {TOPOLOGY_MIN_NODES}+ nodes are of types EC2 publishes no topology for: {not_judged}.")
    return passed(TOPOLOGY_LABELS, f"{judged} GPU nodes of {len(pools)} pools with {TOPOLOGY_MIN_NODES}+ nodes carry network-node-layer-1, -2 and -3." + note)


def _topology_request(pod: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(mode, level) of a Kueue topology request over a network layer on the pod, if any."""
    for mode, annotation in TOPOLOGY_ANNOTATIONS.items():
        level = annotations_of(pod).get(annotation)
        if level in LAYER_KEYS:
            return mode, level
    return None


def _layer_spread(pod: Mapping[str, Any]) -> Optional[str]:
    keys = [c.get("topologyKey") for c in pod.get("spec", {}).get("topologySpreadConstraints") or []]
    return next((k for k in keys if k in LAYER_KEYS), None)


def _blocks(job: TrainingJob, nodes: Mapping[str, Mapping[str, Any]]) -> tuple[Optional[str], dict[str, set[str]], list[str]]:
    """The narrowest layer whose network node all the job's running pods on labelled nodes share
    (None if not even layer 1), each layer's values over those nodes, and the pods on nodes without
    all three labels (which ``topology-labels`` reports; their block is unknown, so they are left out)."""
    placed = {name(p): nodes.get(node_name(p), {}) for p in job.running}
    unlabelled = sorted(pod for pod, n in placed.items() if not all(labels(n).get(key) for key in LAYER_KEYS))
    labelled = [n for pod, n in placed.items() if pod not in unlabelled]
    values = {key: {labels(n)[key] for n in labelled} for key in LAYER_KEYS}
    shared = next((key for key in reversed(LAYER_KEYS) if len(values[key]) <= 1), None)
    return shared, values, unlabelled


def topology_aware_spread(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """Every pod of a training job of 3+ pods carries a spread constraint or a Kueue topology
    request over a network layer, and the job's running pods stand under one network block (of the
    requested layer for a required Kueue request, of layer 1 at least otherwise)."""
    all_jobs = training_jobs(snapshot.pods)
    jobs = [j for j in all_jobs if len(j.pods) >= TOPOLOGY_MIN_NODES]
    if not jobs:
        return skipped(TOPOLOGY_AWARE_SPREAD, f"no training job runs on {TOPOLOGY_MIN_NODES} or more nodes" if all_jobs else NO_TRAINING_JOB)
    nodes = {name(n): n for n in snapshot.nodes}
    wrong, placed, unplaced_pods = [], [], 0
    for job in jobs:
        bare = [name(p) for p in job.pods if _topology_request(p) is None and _layer_spread(p) is None]
        if bare:
            some = f": {len(bare)} of {len(job.pods)} pods" if len(bare) < len(job.pods) else ""
            wrong.append((f"{job}{some}", "with pods carrying neither a topology spread constraint nor a Kueue topology request over a network-node layer"))
            continue
        requests = {request for p in job.pods if (request := _topology_request(p)) is not None}
        how = (
            ", ".join(f"Kueue {mode} topology {level}" for mode, level in sorted(requests))
            if requests
            else f"spread over {_layer_spread(job.pods[0])}"
        )
        shared, values, unlabelled = _blocks(job, nodes)
        unknown = f" ({len(unlabelled)} on nodes without network-node labels, see {TOPOLOGY_LABELS})" if unlabelled else ""
        required = [level for mode, level in requests if mode == "required"]
        layer = required[0] if required else LAYER_KEYS[0]
        if shared is None or LAYER_KEYS.index(shared) < LAYER_KEYS.index(layer):
            wrong.append((f"{job}: {len(values[layer])} blocks", f"{'with ' if requests else ''}{how}, whose pods stand under more than one {layer} block"))
            unplaced_pods += len(unlabelled)
        else:
            block = f"under one {shared} block ({next(iter(values[shared]))})" if values[shared] else "none on a labelled node"
            placed.append(f"job {job}: {len(job.running)} running pods, {how}, {block}{unknown}")
    if wrong:
        groups = group("training job", wrong, examples)
        left_out = f" The block counts leave out {unplaced_pods} pods on nodes without network-node labels (see {TOPOLOGY_LABELS})." if unplaced_pods else ""
        return failed(
            TOPOLOGY_AWARE_SPREAD,
            f"{described(groups)}.{left_out}",
            "resubmit the job from the library's training template (its pods carry the layer-2 spread, or with Kueue the "
            "podset topology request); a job split over blocks waits for one block with room with kueue.topologyMode: required.",
            groups,
        )
    return passed(TOPOLOGY_AWARE_SPREAD, f"{listing(placed, examples, separator='; ')}.")
