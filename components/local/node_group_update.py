"""What EKS does to the running nodes of a managed node group whose taints or labels change, simulated.

UpdateNodegroupConfig takes a node group's ``taints`` ("The Kubernetes taints to be applied to the
nodes in the node group after the update") and ``labels`` ("The Kubernetes labels to apply to the
nodes in the node group after the update"; docs.aws.amazon.com/eks/latest/APIReference/
API_UpdateNodegroupConfig.html), and EKS writes them onto the nodes that already run, not only
onto those that join later (the EKS workshop's managed node group taint exercise shows the new
taint on the running node). A setting that adds a taint to a node group, such as
``healthGate.enabled`` and its startup taint, therefore reaches every running node of the group at
the next ``pulumi up``. That runs on AWS's side; here it is simulated through the API server:

- the taints and labels the group had before and has now are read from two renders of the stack
  (the ``aws:eks/nodeGroup:NodeGroup`` inputs, as ``fleet`` reads them for the nodes it creates);
- every node of the group (``eks.amazonaws.com/nodegroup``) gets the taints and labels the group
  gained and loses those it dropped; what others put on the node (a gate's, a person's) stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..healthgate.gate_api import list_items
from .fleet import EKS_NODEGROUP_LABEL, NODE_GROUP_TYPE, TAINT_EFFECTS


@dataclass(frozen=True)
class NodeGroupSettings:
    """What a managed node group writes on its nodes: Kubernetes taints and labels."""

    taints: tuple[Mapping[str, str], ...]
    labels: Mapping[str, str]


def _taint(eks_taint: Mapping[str, str]) -> dict[str, str]:
    return {"key": eks_taint["key"], **({"value": eks_taint["value"]} if eks_taint.get("value") else {}),
            "effect": TAINT_EFFECTS[eks_taint["effect"]]}


def node_group_settings(resources: Sequence[Mapping[str, Any]]) -> dict[str, NodeGroupSettings]:
    """Each node group of a render (``resources.json``'s resources), by its name."""
    return {
        str(r["name"]): NodeGroupSettings(tuple(_taint(t) for t in r["inputs"].get("taints") or []),
                                          dict(r["inputs"].get("labels") or {}))
        for r in resources if r["type"] == NODE_GROUP_TYPE
    }


def _same(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return (a.get("key"), a.get("value") or "", a.get("effect")) == (b.get("key"), b.get("value") or "", b.get("effect"))


def updated_taints(current: Sequence[Mapping[str, str]], before: NodeGroupSettings, after: NodeGroupSettings) -> list[Mapping[str, str]]:
    """A running node's taints once EKS applied the group's new taints."""
    dropped = [t for t in before.taints if not any(_same(t, kept) for kept in after.taints)]
    kept = [t for t in current if not any(_same(t, gone) for gone in dropped)]
    return kept + [t for t in after.taints if not any(_same(t, present) for present in kept)]


def updated_labels(current: Mapping[str, str], before: NodeGroupSettings, after: NodeGroupSettings) -> dict[str, str]:
    """A running node's labels once EKS applied the group's new labels."""
    labels = {key: value for key, value in current.items() if key not in before.labels or key in after.labels}
    labels.update(after.labels)
    return labels


def update_running_nodes(core: Any, before: Mapping[str, NodeGroupSettings], after: Mapping[str, NodeGroupSettings]) -> list[str]:
    """Apply each changed group's taints and labels to its running nodes, as EKS does; what changed, in words."""
    done = []
    for group, settings in sorted(after.items()):
        previous = before.get(group)
        if previous is None or previous == settings:
            continue
        for node in list_items(core.list_node, label_selector=f"{EKS_NODEGROUP_LABEL}={group}"):
            meta, spec = node["metadata"], node.get("spec") or {}
            taints = updated_taints(spec.get("taints") or [], previous, settings)
            labels = updated_labels(meta.get("labels") or {}, previous, settings)
            removed = {key: None for key in meta.get("labels") or {} if key not in labels}
            core.patch_node(meta["name"], {"metadata": {"labels": {**labels, **removed}, "resourceVersion": meta["resourceVersion"]},
                                           "spec": {"taints": [dict(t) for t in taints] or None}})
            done.append(f"node group {group}: {meta['name']} now has taints {', '.join(t['key'] for t in taints) or 'none'}")
    return done
