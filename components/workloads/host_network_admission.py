"""Host networking without the rest of ``privileged``.

Pod Security Admission works per namespace and has no level between ``baseline``, which refuses
``hostNetwork``, and ``privileged``, which allows everything: privileged containers, hostPath
volumes, the host's PID and IPC namespaces, any added capability. A training namespace that needs
host networking (``podSecurity: privileged``, for apps with ``hostNetwork``) would otherwise let
*every* pod in it, from any service account, mount the node's filesystem or run privileged.

This ValidatingAdmissionPolicy restores ``baseline`` in those namespaces for everything but the
host network: it applies to every pod created or changed in a namespace this project created with
``podSecurity: privileged`` (selected by its labels), whatever its service account, because in a
training namespace no pod needs more, and a rule keyed to service accounts could be sidestepped by
creating a pod under another one. Host ports stay allowed since the API server defaults each
``hostPort`` to its ``containerPort`` on a host-network pod. Checks follow the baseline profile of
kubernetes.io/docs/concepts/security/pod-security-standards/ (privileged, hostPath, hostPID,
hostIPC, capabilities beyond the baseline list).
"""

from __future__ import annotations

from typing import Any

POLICY_NAME = "eks-gpu-training-host-network-only"
"""Name of the policy and its binding."""
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
PART_OF_LABEL, PART_OF = "app.kubernetes.io/part-of", "eks-gpu-training"

BASELINE_ADDABLE_CAPABILITIES = (
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
)
"""Capabilities the baseline Pod Security Standard lets a container add."""

_ALL_CONTAINERS = (
    "object.spec.containers"
    " + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
    " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])"
)


def host_network_policy_manifest() -> dict[str, Any]:
    """The policy: baseline minus its host-network rule, for pods in this project's privileged namespaces."""
    capabilities = ", ".join(f"'{c}'" for c in BASELINE_ADDABLE_CAPABILITIES)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {PART_OF_LABEL: PART_OF}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {POD_SECURITY_LABEL: "privileged", PART_OF_LABEL: PART_OF}},
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["pods", "pods/ephemeralcontainers"],
                    }
                ],
            },
            "variables": [{"name": "containers", "expression": _ALL_CONTAINERS}],
            "validations": [
                {
                    "expression": "variables.containers.all(c, !(has(c.securityContext) && "
                    "has(c.securityContext.privileged) && c.securityContext.privileged))",
                    "message": "privileged containers are not allowed here: this namespace allows host networking only",
                },
                {
                    "expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
                    "message": "hostPath volumes are not allowed here: this namespace allows host networking only",
                },
                {
                    "expression": "!(has(object.spec.hostPID) && object.spec.hostPID) && "
                    "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
                    "message": "the host's PID and IPC namespaces are not allowed here: this namespace allows host networking only",
                },
                {
                    "expression": "variables.containers.all(c, !has(c.securityContext) || "
                    "!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
                    f"c.securityContext.capabilities.add.all(cap, cap in [{capabilities}]))",
                    "message": "only the baseline Pod Security Standard's capabilities may be added here",
                },
            ],
        },
    }


def host_network_policy_binding_manifest() -> dict[str, Any]:
    """Puts the policy in force: violations are denied."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": {PART_OF_LABEL: PART_OF}},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
