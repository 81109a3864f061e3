"""Probes of the ValidatingAdmissionPolicies the platform installs: a ServiceAccount as the API
server sees it (impersonation), its RBAC widened so that only a policy stands in the way, and a
refusal told apart from RBAC's by the policy's name and the validation's own message."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from kubernetes.client.exceptions import ApiException

from eks_gpu_training.addons.labeler_admission import service_account_user
from eks_gpu_training.local.platform import ApplyError

from tests.support.environment import Environment, expect_refused
from tests.support.manifests import unique

RBAC = "rbac.authorization.k8s.io/v1"
VAP = "admissionregistration.k8s.io/v1"


def as_service_account(env: Environment, namespace: str, account: str, *,
                       extra: Optional[dict[str, str]] = None) -> Environment:
    """The cluster as the ServiceAccount's token presents it (``extra``: its claims, such as the
    node-name claim of a token bound to a pod)."""
    return env.as_user(service_account_user(namespace, account), groups=("system:serviceaccounts",), extra=extra)


def refused_by(policy: str, message: str, body: str) -> None:
    """The refusal is the named policy's, with the validation's own message."""
    assert f"ValidatingAdmissionPolicy '{policy}'" in body, body
    assert message in body, body


def policy_refuses(policy: str, message: str, call: Callable[[], Any]) -> None:
    """The API server refuses ``call`` at once, by ``policy``'s validation with ``message``."""
    refused_by(policy, message, expect_refused(call))


def attempt(call: Callable[[], Any]) -> Any:
    """``call``'s result, or None when the API server refused it (or it was not yet as expected)."""
    try:
        return call()
    except (ApiException, ApplyError, AssertionError):
        return None


@contextmanager
def bound_cluster_role(env: Environment, namespace: str, account: str, *, role: Optional[str] = None,
                       rules: Optional[list[dict[str, Any]]] = None) -> Iterator[str]:
    """The ServiceAccount bound to a ClusterRole: ``role`` (an existing one), or one of its own with
    ``rules`` (more than the platform grants it, so that only a policy can refuse). Removed on exit."""
    name = unique(f"{account}-probe")
    if rules is not None:
        env.apply({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
    env.apply({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role or name},
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    try:
        yield name
    finally:
        env.delete(RBAC, "ClusterRoleBinding", name)
        if rules is not None:
            env.delete(RBAC, "ClusterRole", name)
