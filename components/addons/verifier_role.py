"""What ``eks-gpu-training-verify`` reads from a cluster, and the read-only ClusterRole that grants
exactly that.

``VERIFY_READS`` is the one list of the command's API calls: the command lists these resources, and
the ClusterRole allows get and list on them and nothing else (no watch, no write, no Secrets). A
forbidden read is reported with the verb and resource from this list. The stack creates the role
with ``verify.clusterRole`` and binds it to a Kubernetes group (``verify.group``), which an EKS
access entry gives an IAM principal.

Pods are read whole, and must be: the checklist's rows judge what only a pod's spec says (its node,
priority class, anti-affinity, topology spread, GPU requests, security context), which the
metadata-only list (``PartialObjectMetadata``) leaves out, and RBAC grants a resource, never some of
its fields. So a secret never belongs in a pod spec: a training ``env`` entry names a Secret key
(``secretKeyRef``), whose value the role cannot read (no Secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..config import VERIFIER_GROUP, ConfigError, Problem
from ..config.documented import component_args, documented_args, documented_component

VERIFIER_ROLE_NAME = "eks-gpu-training-verify"
"""Name of the ClusterRole and of its ClusterRoleBinding."""

VERIFY_VERB = "list"
"""The one verb the command uses: it lists every resource once, across all namespaces."""

ROLE_VERBS = ("get", "list")
"""Verbs the ClusterRole grants: what the command calls, plus get so that the same person can look
at one object of a failing row with ``kubectl get``."""

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
"""Kueue's API (kubernetes-sigs/kueue v0.19.2 serves ClusterQueues and LocalQueues at v1beta2)."""


@dataclass(frozen=True)
class ApiRead:
    """One resource the command lists, cluster-wide."""

    group: str
    """API group ("" for the core group)."""
    version: str
    """API version the command reads it at."""
    resource: str
    """Resource (plural) name."""
    with_stack: bool = False
    """Read with ``--stack`` (the stack's own objects), not for the seed's checklist."""
    with_fleet: bool = False
    """Read with ``--fleet`` (a MultiKueue manager's workers), not for the seed's checklist."""
    optional: bool = False
    """A resource a cluster may not serve (a CRD not installed): a 404 leaves it out of the snapshot
    instead of stopping the command."""

    def wanted(self, with_stack: bool, with_fleet: bool) -> bool:
        """Whether a run with these options reads it: the seed's reads always, the others when asked."""
        return not (self.with_stack or self.with_fleet) or (self.with_stack and with_stack) or (self.with_fleet and with_fleet)

    @property
    def path(self) -> str:
        """The URL path that lists it in every namespace."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/{self.resource}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


VERIFY_READS: tuple[ApiRead, ...] = (
    ApiRead("", "v1", "nodes"),
    ApiRead("", "v1", "pods"),
    ApiRead("policy", "v1", "poddisruptionbudgets"),
    ApiRead("scheduling.k8s.io", "v1", "priorityclasses"),
    ApiRead("", "v1", "resourcequotas", with_stack=True),
    ApiRead("", "v1", "persistentvolumeclaims", with_stack=True),
    ApiRead("apps", "v1", "daemonsets", with_stack=True),
    ApiRead(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", with_stack=True, with_fleet=True, optional=True),
    ApiRead(KUEUE_GROUP, KUEUE_VERSION, "localqueues", with_stack=True, with_fleet=True, optional=True),
    # Who is bound to what, not what anyone holds: the team members' row checks their groups are
    # bound in their team's namespaces alone.
    ApiRead("rbac.authorization.k8s.io", "v1", "rolebindings", with_stack=True),
    ApiRead("rbac.authorization.k8s.io", "v1", "clusterrolebindings", with_stack=True),
    # The team namespaces' GPU pod policy and where it is bound.
    ApiRead("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", with_stack=True),
    ApiRead("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", with_stack=True),
    # A MultiKueue manager's dispatch: its AdmissionCheck, the workers and the config listing them.
    ApiRead(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", with_fleet=True, optional=True),
    ApiRead(KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", with_fleet=True, optional=True),
    ApiRead(KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", with_fleet=True, optional=True),
)
"""Everything the command reads, in the order it reads it."""

LABELS = {"app.kubernetes.io/name": VERIFIER_ROLE_NAME, "app.kubernetes.io/part-of": "eks-gpu-training"}


def verifier_cluster_role() -> dict[str, Any]:
    """The ClusterRole: get and list on ``VERIFY_READS``, one rule per API group."""
    groups: dict[str, list[str]] = {}
    for read in VERIFY_READS:
        groups.setdefault(read.group, []).append(read.resource)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": VERIFIER_ROLE_NAME, "labels": dict(LABELS)},
        "rules": [{"apiGroups": [group], "resources": resources, "verbs": list(ROLE_VERBS)} for group, resources in groups.items()],
    }


def verifier_cluster_role_binding(group: str) -> dict[str, Any]:
    """Grants the ClusterRole to the members of a Kubernetes group."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": VERIFIER_ROLE_NAME, "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": VERIFIER_ROLE_NAME},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }


@documented_args
@dataclass
class VerifierRoleArgs:
    """Arguments of ``VerifierRole``."""

    group: str = VERIFIER_GROUP
    """Kubernetes group the ClusterRole is bound to (not a ``system:`` group). Default: eks-gpu-training-verifiers."""


@documented_component(VerifierRoleArgs)
class VerifierRole(pulumi.ComponentResource):
    """A read-only ClusterRole for ``eks-gpu-training-verify`` (get and list on the nodes, pods,
    PDBs, PriorityClasses, quotas, claims, DaemonSets, Kueue queues, RBAC bindings, admission policies and MultiKueue objects it reads) and its binding to a
    Kubernetes group. Pass the cluster's Kubernetes provider in ``opts``."""

    role_name: pulumi.Output[str]
    """Name of the ClusterRole."""

    def __init__(self, name: str, args: Optional[VerifierRoleArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(VerifierRoleArgs, "VerifierRole", name, args, fields)
        if not args.group or args.group.startswith("system:"):
            raise ConfigError([Problem(f"VerifierRole({name}).group", f"'{args.group}': name a group of your own, not empty and not a 'system:' group")])
        super().__init__("eks-gpu-training:index:VerifierRole", name, None, opts)
        role_body, binding_body = verifier_cluster_role(), verifier_cluster_role_binding(args.group)
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-cluster-role", metadata=role_body["metadata"], rules=role_body["rules"], opts=pulumi.ResourceOptions(parent=self)
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-cluster-role-binding",
            metadata=binding_body["metadata"],
            role_ref=binding_body["roleRef"],
            subjects=binding_body["subjects"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
        )
        self.role_name = role.metadata.name
        self.register_outputs({"roleName": self.role_name})
