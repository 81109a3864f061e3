"""Host networking without the rest of ``privileged``.

Pod Security Admission has no level between ``baseline``, which refuses ``hostNetwork``, and
``privileged``, which allows everything (privileged containers, hostPath, host PID and IPC, any
capability). A training namespace that needs host networking (``podSecurity: privileged``) would
otherwise let every pod in it mount the node's filesystem or run privileged.

This ValidatingAdmissionPolicy restores ``baseline`` for every pod created or changed in a
namespace this project created with ``podSecurity: privileged`` (selected by its labels), and
allows ``hostNetwork`` only to pods of the training ServiceAccount. A host-network pod reaches the
node's instance metadata despite the hop limit of 1 (docs.aws.amazon.com/eks/latest/best-practices/
identity-and-access-management.html), and so the node role's credentials; the namespace's other
service accounts never get that. Anyone who may create pods there may still name the training
ServiceAccount, so the rule keeps host networking to the pods meant to have it, not from an editor.

The other checks are the baseline profile's
(kubernetes.io/docs/concepts/security/pod-security-standards/), with host ports only on a
host-network pod, where each ``hostPort`` defaults to its ``containerPort``. A host-network pod's
containers must also drop ``NET_RAW`` (or ``ALL``): baseline keeps it, and there it would open raw
sockets on the node's own interfaces.
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

BASELINE_SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
"""SELinux types the baseline Pod Security Standard allows (the empty string: none set)."""

BASELINE_SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
"""The sysctls the baseline Pod Security Standard allows (its list as of Kubernetes 1.29)."""

HOST_NETWORK_ONLY = "this namespace allows host networking only"

_ALL_CONTAINERS = (
    "object.spec.containers"
    " + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
    " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])"
)


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _security_contexts() -> str:
    """The pod's security context and every container's, as a CEL list (absent ones left out)."""
    return (
        "(has(object.spec.securityContext) ? [object.spec.securityContext] : []) + "
        "variables.containers.filter(c, has(c.securityContext)).map(c, c.securityContext)"
    )


def host_network_policy_manifest(service_account: str) -> dict[str, Any]:
    """The policy: baseline minus its host-network rule, for pods in this project's privileged
    namespaces, with host networking for pods of ``service_account`` alone."""
    host_network = "(has(object.spec.hostNetwork) && object.spec.hostNetwork)"
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
            "variables": [
                {"name": "containers", "expression": _ALL_CONTAINERS},
                {"name": "securityContexts", "expression": _security_contexts()},
            ],
            "validations": [
                {
                    # The ServiceAccount admission plugin has set serviceAccountName ("default" when
                    # none is named) before validating admission runs.
                    "expression": f"!{host_network} || (has(object.spec.serviceAccountName) && "
                    f"object.spec.serviceAccountName == '{service_account}')",
                    "message": f"host networking is allowed here only to pods of the ServiceAccount '{service_account}'",
                },
                {
                    "expression": f"!{host_network} || variables.containers.all(c, has(c.securityContext) && "
                    "has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && "
                    "c.securityContext.capabilities.drop.exists(d, d == 'NET_RAW' || d == 'ALL'))",
                    "message": "every container of a host-network pod must drop NET_RAW (or ALL): "
                    "it would act on the node's own network",
                },
                {
                    "expression": "variables.containers.all(c, !(has(c.securityContext) && "
                    "has(c.securityContext.privileged) && c.securityContext.privileged))",
                    "message": f"privileged containers are not allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
                    "message": f"hostPath volumes are not allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "!(has(object.spec.hostPID) && object.spec.hostPID) && "
                    "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
                    "message": f"the host's PID and IPC namespaces are not allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": f"{host_network} || variables.containers.all(c, !has(c.ports) || "
                    "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
                    "message": f"host ports are allowed here only on a host-network pod: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "variables.containers.all(c, !has(c.securityContext) || "
                    "!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
                    f"c.securityContext.capabilities.add.all(cap, cap in [{_quoted(BASELINE_ADDABLE_CAPABILITIES)}]))",
                    "message": "only the baseline Pod Security Standard's capabilities may be added here",
                },
                {
                    "expression": "variables.securityContexts.all(sc, !has(sc.windowsOptions) || "
                    "!has(sc.windowsOptions.hostProcess) || !sc.windowsOptions.hostProcess)",
                    "message": f"Windows HostProcess containers are not allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "variables.securityContexts.all(sc, "
                    "(!has(sc.seccompProfile) || sc.seccompProfile.type != 'Unconfined') && "
                    "(!has(sc.appArmorProfile) || sc.appArmorProfile.type != 'Unconfined')) && "
                    "(!has(object.metadata.annotations) || object.metadata.annotations.all(key, "
                    "!key.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
                    "object.metadata.annotations[key] != 'unconfined'))",
                    "message": f"an Unconfined seccomp or AppArmor profile is not allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "variables.securityContexts.all(sc, !has(sc.seLinuxOptions) || "
                    f"((!has(sc.seLinuxOptions.type) || sc.seLinuxOptions.type in [{_quoted(BASELINE_SELINUX_TYPES)}]) && "
                    "(!has(sc.seLinuxOptions.user) || sc.seLinuxOptions.user == '') && "
                    "(!has(sc.seLinuxOptions.role) || sc.seLinuxOptions.role == '')))",
                    "message": "an SELinux user or role, or a type other than the container types, is not allowed here",
                },
                {
                    "expression": "variables.containers.all(c, !has(c.securityContext) || "
                    "!has(c.securityContext.procMount) || c.securityContext.procMount == 'Default')",
                    "message": f"only the default /proc mount is allowed here: {HOST_NETWORK_ONLY}",
                },
                {
                    "expression": "!has(object.spec.securityContext) || !has(object.spec.securityContext.sysctls) || "
                    f"object.spec.securityContext.sysctls.all(s, s.name in [{_quoted(BASELINE_SAFE_SYSCTLS)}])",
                    "message": "only the baseline Pod Security Standard's safe sysctls are allowed here",
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
