"""What the health gate's identity may do to Nodes and NodeClaims, enforced by the API server.

RBAC grants the gate ``patch`` on nodes and ``nodes/status`` and ``delete`` on NodeClaims, but
cannot narrow those to one taint, condition or NodePool. A ValidatingAdmissionPolicy holds every
request of the gate's ServiceAccount to:

- a Node update changing only the gate's own taints: the startup taint only removed (or put back
  with the quarantine taint's removal: a recovered node is checked again), the quarantine taint
  added or removed; only on nodes of the stack's GPU pools, never on a system node;
- a ``nodes/status`` update changing only the ``HealthChecksPassed`` condition, and not the
  labels, annotations, owner references or finalizers a status update may carry (kubernetes
  ``pkg/registry/core/node/strategy.go``, ``nodeStatusStrategy.PrepareForUpdate``);
- no Node create or delete; a NodeClaim delete only of the stack's Karpenter GPU pools, and no
  other NodeClaim write.

A PATCH reaches admission as an UPDATE of the whole object, so the rules compare ``object`` with
``oldObject``. ``failurePolicy: Fail``: a policy that cannot be evaluated denies.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..addons.labeler_admission import POLICY_API_VERSION, service_account_user
from ..healthgate.gate_settings import (
    CONDITION_TYPE,
    GATE_TAINT_KEYS,
    GPU_POOL_LABEL,
    KARPENTER_POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    STARTUP_TAINT_EFFECT,
    STARTUP_TAINT_KEY,
)


NODE_METADATA = {"labels": "{}", "annotations": "{}", "ownerReferences": "[]", "finalizers": "[]"}
"""The metadata a Node update may change and the gate never does (the API server sets the rest),
each with its value when absent (CEL)."""
STATUS_METADATA_MESSAGE = ("the health gate may not change a Node's labels, annotations, owners or finalizers "
                           "through its status")
STATUS_FIELDS_MESSAGE = "the health gate may change a Node's status conditions only (not its capacity, addresses or other fields)"
GPU_POOLS_MESSAGE = "the health gate may change taints only on nodes of the stack's GPU pools"


def _taint_rules() -> list[dict[str, str]]:
    gate_keys = json.dumps(list(GATE_TAINT_KEYS))
    return [
        {
            "expression": f"variables.newTaints.filter(t, !(t.key in {gate_keys})) == "
            f"variables.oldTaints.filter(t, !(t.key in {gate_keys}))",
            "message": "the health gate may change only its own taints on a Node",
        },
        {
            # The startup taint may stay, go, or come back only in place of the quarantine taint.
            "expression": f"!variables.newTaints.exists(t, t.key == '{STARTUP_TAINT_KEY}') || "
            f"variables.oldTaints.exists(t, t.key == '{STARTUP_TAINT_KEY}') || "
            f"(variables.oldTaints.exists(t, t.key == '{QUARANTINE_TAINT_KEY}') && "
            f"!variables.newTaints.exists(t, t.key == '{QUARANTINE_TAINT_KEY}'))",
            "message": "the health gate may put its startup taint back only on a node it releases from quarantine",
        },
        {
            "expression": f"variables.newTaints.all(t, t.key != '{STARTUP_TAINT_KEY}' || t.effect == '{STARTUP_TAINT_EFFECT}') && "
            f"variables.newTaints.all(t, t.key != '{QUARANTINE_TAINT_KEY}' || t.effect == '{QUARANTINE_TAINT_EFFECT}')",
            "message": f"the health gate's taints have their own effects ({STARTUP_TAINT_EFFECT}, {QUARANTINE_TAINT_EFFECT})",
        },
    ]


def _metadata_unchanged() -> str:
    return " && ".join(f"object.metadata.?{field}.orValue({empty}) == oldObject.metadata.?{field}.orValue({empty})"
                       for field, empty in NODE_METADATA.items())


def node_policy_manifest(name: str, namespace: str, service_account: str, managed_pools: Sequence[str],
                         karpenter_pools: Sequence[str], labels: dict[str, str]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy that holds the gate to its taints on its pools' nodes, its
    condition and its pools' NodeClaims (``managed_pools``, ``karpenter_pools``: the pools' names)."""
    user = service_account_user(namespace, service_account)
    pools = json.dumps(sorted(karpenter_pools))
    managed = json.dumps(sorted(managed_pools))
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
                     "resources": ["nodes", "nodes/status"]},
                    {"apiGroups": ["karpenter.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
                     "resources": ["nodeclaims", "nodeclaims/status"]},
                ]
            },
            "matchConditions": [{"name": "is-the-health-gate", "expression": f"request.userInfo.username == '{user}'"}],
            "variables": [
                {"name": "isNode", "expression": "request.resource.resource == 'nodes'"},
                {"name": "subresource", "expression": "has(request.subResource) ? request.subResource : ''"},
                # object and oldObject are both set only on UPDATE.
                {"name": "oldTaints", "expression": "request.operation == 'UPDATE' && variables.isNode && "
                 "has(oldObject.spec.taints) ? oldObject.spec.taints : []"},
                {"name": "newTaints", "expression": "request.operation == 'UPDATE' && variables.isNode && "
                 "has(object.spec.taints) ? object.spec.taints : []"},
                # Whole statuses as maps (the policy sees objects as JSON), so a status field added
                # in a later Kubernetes is held unchanged too.
                {"name": "oldStatus", "expression": "request.operation == 'UPDATE' && variables.isNode ? "
                 "oldObject.?status.orValue({}) : {}"},
                {"name": "newStatus", "expression": "request.operation == 'UPDATE' && variables.isNode ? "
                 "object.?status.orValue({}) : {}"},
                {"name": "inGpuPool", "expression": f"oldObject.metadata.?labels[?'{GPU_POOL_LABEL}'].orValue('') in {managed} || "
                 f"oldObject.metadata.?labels[?'{KARPENTER_POOL_LABEL}'].orValue('') in {pools}"},
            ],
            "validations": [
                {
                    "expression": "variables.isNode ? request.operation == 'UPDATE' : "
                    "(request.operation == 'DELETE' && variables.subresource == '')",
                    "message": "the health gate may update Nodes and delete NodeClaims, nothing else",
                },
                {
                    "expression": f"variables.isNode || oldObject.metadata.?labels[?'karpenter.sh/nodepool'].orValue('') in {pools}",
                    "message": "the health gate may delete NodeClaims of the stack's Karpenter GPU pools only",
                },
                {
                    "expression": "!variables.isNode || variables.subresource != '' || ("
                    f"{_metadata_unchanged()} && "
                    "object.spec.?unschedulable.orValue(false) == oldObject.spec.?unschedulable.orValue(false) && "
                    "object.spec.?providerID.orValue('') == oldObject.spec.?providerID.orValue('') && "
                    "object.spec.?podCIDRs.orValue([]) == oldObject.spec.?podCIDRs.orValue([]))",
                    "message": "the health gate may change a Node's taints only (not its labels, annotations, owners, "
                    "finalizers or schedulability)",
                },
                *[{**rule, "expression": f"!variables.isNode || variables.subresource != '' || ({rule['expression']})"}
                  for rule in _taint_rules()],
                {
                    "expression": "!variables.isNode || variables.subresource == '' || (variables.subresource == 'status' && "
                    f"object.status.?conditions.orValue([]).filter(c, c.type != '{CONDITION_TYPE}') == "
                    f"oldObject.status.?conditions.orValue([]).filter(c, c.type != '{CONDITION_TYPE}'))",
                    "message": f"the health gate may change only the {CONDITION_TYPE} condition of a Node's status",
                },
                {
                    "expression": f"!variables.isNode || variables.subresource == '' || ({_metadata_unchanged()})",
                    "message": STATUS_METADATA_MESSAGE,
                },
                {
                    # On both paths (a nodes update resets the status, so there it holds anyway).
                    "expression": "variables.newStatus.all(k, k == 'conditions' || "
                    "(k in variables.oldStatus && variables.newStatus[k] == variables.oldStatus[k])) && "
                    "variables.oldStatus.all(k, k in variables.newStatus)",
                    "message": STATUS_FIELDS_MESSAGE,
                },
                {
                    "expression": "variables.newTaints == variables.oldTaints || variables.inGpuPool",
                    "message": GPU_POOLS_MESSAGE,
                },
            ],
        },
    }
