"""What the topology labeler's identity may do to a Node, enforced by the API server itself.

RBAC can grant ``patch`` on Nodes, but not "only your own node" nor "only these labels": with RBAC
alone the labeler's token (present on every GPU node) could taint, cordon or relabel any node. A
ValidatingAdmissionPolicy (``admissionregistration.k8s.io/v1``, GA in Kubernetes 1.30) closes that:
for requests by the labeler's service account it allows an update of a Node only when

- the Node is the one the caller's pod runs on: a service account token bound to a pod carries
  its node's name in ``userInfo.extra["authentication.kubernetes.io/node-name"]`` (KEP-4193, bound
  service account token improvements: feature ServiceAccountTokenPodNodeInfo, beta and on in 1.30,
  GA in 1.32; kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/);
- nothing changes but labels (not the spec, annotations, owner references or finalizers), and
  every label that changes is a new
  ``topology.k8s.aws/network-node-layer-*`` label (the labeler only fills gaps; it never changes or
  removes a label, so the policy allows neither).

A PATCH reaches admission as an UPDATE of the whole object (``object`` after, ``oldObject`` before),
so the rules compare the two. The policy applies to nothing else (``matchConditions`` select the
labeler's user name), and a policy that cannot be evaluated denies (``failurePolicy: Fail``).
"""

from __future__ import annotations

from typing import Any

from ..labeler.topology import LAYER_LABEL_PREFIX

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
"""The user-info extra with the name of the node a pod-bound service account token's pod runs on."""

POLICY_API_VERSION = "admissionregistration.k8s.io/v1"


def service_account_user(namespace: str, service_account: str) -> str:
    """The user name the API server gives a service account's token."""
    return f"system:serviceaccount:{namespace}:{service_account}"


def node_policy_manifest(name: str, namespace: str, service_account: str, labels: dict[str, str]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy that holds the labeler to its own node's topology labels."""
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["*"],
                        "operations": ["UPDATE", "CREATE", "DELETE"],
                        "resources": ["nodes", "nodes/status"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "is-the-topology-labeler",
                    "expression": f"request.userInfo.username == '{service_account_user(namespace, service_account)}'",
                }
            ],
            "variables": [
                {
                    "name": "callerNode",
                    # A token with no extras at all (a legacy Secret-based one) has no
                    # userInfo.extra, and reading it would be an evaluation error: denied, but
                    # without saying why.
                    "expression": f"has(request.userInfo.extra) && '{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                    f"size(request.userInfo.extra['{NODE_NAME_EXTRA}']) == 1 ? "
                    f"request.userInfo.extra['{NODE_NAME_EXTRA}'][0] : ''",
                },
                {
                    "name": "oldLabels",
                    # object and oldObject are both set only on UPDATE (null on DELETE and CREATE).
                    "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.labels) ? "
                    "oldObject.metadata.labels : {}",
                },
                {
                    "name": "newLabels",
                    "expression": "request.operation == 'UPDATE' && has(object.metadata.labels) ? object.metadata.labels : {}",
                },
            ],
            "validations": [
                {
                    # The API server leaves subResource out of the request when there is none, and
                    # reading an absent field is an evaluation error (which failurePolicy Fail denies).
                    "expression": "request.operation == 'UPDATE' && (!has(request.subResource) || request.subResource == '')",
                    "message": "the topology labeler may only update a Node's labels (no create, delete or status)",
                },
                {
                    "expression": "variables.callerNode != '' && object.metadata.name == variables.callerNode",
                    "message": "the topology labeler may change only the node its own pod runs on",
                },
                {
                    "expression": "object.spec == oldObject.spec && "
                    "(has(object.metadata.annotations) ? object.metadata.annotations : {}) == "
                    "(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})",
                    "message": "the topology labeler may not change a Node's spec (taints, unschedulable) or annotations",
                },
                {
                    # An owner reference would hand the Node to the garbage collector (deleted with
                    # its owner), a finalizer would hold its deletion; neither is a label.
                    "expression": "(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) == "
                    "(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []) && "
                    "(has(object.metadata.finalizers) ? object.metadata.finalizers : []) == "
                    "(has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : [])",
                    "message": "the topology labeler may not change a Node's owner references or finalizers",
                },
                {
                    "expression": "variables.oldLabels.all(key, key in variables.newLabels && "
                    "variables.newLabels[key] == variables.oldLabels[key]) && "
                    "variables.newLabels.all(key, key in variables.oldLabels || "
                    f"key.startsWith('{LAYER_LABEL_PREFIX}'))",
                    "message": f"the topology labeler may only add {LAYER_LABEL_PREFIX}* labels, never change or remove one",
                },
            ],
        },
    }


def node_policy_binding_manifest(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """Binds the policy cluster-wide; a violation is denied."""
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
