"""The simulated nodes registered with the local API server as kubelets register theirs, side by
side, and checked to allocate what their instance types do."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from ..healthgate.gate_api import list_items
from .errors import LocalClusterError
from .platform import Applier

NODE_CREATE_WORKERS = 8
"""Simulated nodes created at once. The API server takes creates side by side, and the client's time
per node is mostly waiting for it: 1,003 nodes one after the other, and their check, took 82 s on 2
cores under a load average of about 10; side by side, 26 s."""


def create_nodes(applier: Applier, nodes: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=NODE_CREATE_WORKERS) as pool:
        # list() waits for every create and raises the first failure.
        list(pool.map(partial(create_node, applier), nodes))


def create_node(applier: Applier, node: dict[str, Any]) -> None:
    """Create a simulated node with its status, as a kubelet registers its node (the API server
    keeps a Node's status on create). Written after the create, the status raced KWOK: its
    node-initialize stage gives a node it sees without allocatable KWOK's defaults (1k CPU, 1Ti,
    1M pods), and its write, rendered from the node as first seen, could land after ours and
    replace our CPU, memory and pods, while the GPUs and EFA devices stayed: a p5 node then offered
    1Ti, and a training pod's 1.8Ti never fitted it. A node left from an earlier ``up`` gets its
    status patched."""
    from kubernetes.client.exceptions import ApiException

    try:
        # Not read back: parsing the created node into the client's models is CPU the control plane wants.
        applier.core.create_node(node, _preload_content=False)  # type: ignore[arg-type]  # the client sends a dict body as it is
    except ApiException as error:
        if error.status != 409:
            raise
        status = node["status"]
        applier.apply({key: value for key, value in node.items() if key != "status"})
        applier.core.patch_node_status(node["metadata"]["name"], {"status": status})


def check_allocatable(applier: Applier, nodes: list[dict[str, Any]]) -> None:
    """Every simulated node allocates what its instance type does: a node whose figures were
    replaced would make the scheduler's verdicts the simulator's, not the fleet's."""
    from ..facts.quantity import parse_quantity

    # One list, read as JSON, rather than a read (and a parse into the client's models) per node.
    listed = list_items(applier.core.list_node)
    allocatable = {item["metadata"]["name"]: (item.get("status") or {}).get("allocatable") or {} for item in listed}
    wrong = []
    for node in nodes:
        name, wanted = node["metadata"]["name"], node["status"]["allocatable"]
        live = allocatable.get(name, {})
        differing = sorted(key for key, value in wanted.items()
                           if key not in live or parse_quantity(str(live[key])) != parse_quantity(str(value)))
        if differing:
            wrong.append(f"{name}: " + ", ".join(f"{key} {live.get(key)} instead of {wanted[key]}" for key in differing))
    if wrong:
        raise LocalClusterError("simulated nodes do not allocate what their instance types do: " + "; ".join(wrong),
                                "something replaced their status after it was created (KWOK's node stages?): "
                                "read the kwok log in the state folder")
