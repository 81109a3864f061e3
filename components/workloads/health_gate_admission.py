"""What the health gate's identity may do to Nodes and NodeClaims, enforced by the API server.

RBAC grants the gate ``patch`` on nodes and ``nodes/status``, and ``delete`` on NodeClaims, but
cannot narrow those to one taint, one condition or one NodePool: with RBAC alone its token could
cordon, relabel or untaint any node, and delete any NodeClaim. A ValidatingAdmissionPolicy
(``admissionregistration.k8s.io/v1``) holds every request of the gate's ServiceAccount to:

- a Node update that changes nothing but its taints, and of those only the gate's own: the
  startup taint may only be removed (or put back in the same update that removes the quarantine
  taint: a recovered node is checked again), the quarantine taint added or removed, each with its
  own effect; the GPU taint and every other taint stay as they are;
- a ``nodes/status`` update that changes only the ``HealthChecksPassed`` condition (not the
  kubelet's conditions, not the node monitoring agent's, not capacity or allocatable);
- no Node create or delete;
- a NodeClaim delete only of the stack's Karpenter GPU pools (``karpenter.sh/nodepool``), and no
  other NodeClaim write.

A PATCH reaches admission as an UPDATE of the whole object, so the rules compare ``object`` with
``oldObject``. ``failurePolicy: Fail``: a policy that cannot be evaluated denies.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..healthgate.settings import (
    CONDITION_TYPE,
    GATE_TAINT_KEYS,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    STARTUP_TAINT_EFFECT,
    STARTUP_TAINT_KEY,
)

POLICY_API_VERSION = "admissionregistration.k8s.io/v1"


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


def node_policy_manifest(name: str, namespace: str, service_account: str, karpenter_pools: Sequence[str],
                         labels: dict[str, str]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy that holds the gate to its taints, its condition and its pools' NodeClaims."""
    user = f"system:serviceaccount:{namespace}:{service_account}"
    pools = json.dumps(sorted(karpenter_pools))
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
                    "object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({}) && "
                    "object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({}) && "
                    "object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([]) && "
                    "object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([]) && "
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
                    f"oldObject.status.?conditions.orValue([]).filter(c, c.type != '{CONDITION_TYPE}') && "
                    "object.status.?capacity.orValue({}) == oldObject.status.?capacity.orValue({}) && "
                    "object.status.?allocatable.orValue({}) == oldObject.status.?allocatable.orValue({}))",
                    "message": f"the health gate may change only the {CONDITION_TYPE} condition of a Node's status",
                },
            ],
        },
    }
