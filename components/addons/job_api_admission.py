"""What the JobSet and Kubeflow Trainer controllers may write, enforced by the API server itself.

Their charts' RBAC is cluster-wide: JobSet's ClusterRole (chart 0.12.0) may create Jobs, Services
and PersistentVolumeClaims and change Pods in every namespace and update every webhook
configuration; Trainer's (chart 2.3.0) may write every Secret and ConfigMap (CoreDNS's Corefile
included) and create JobSets anywhere. RBAC cannot say "only in these namespaces" nor "only objects
a TrainJob owns"; a ValidatingAdmissionPolicy per controller's ServiceAccount can:

- JobSet writes Jobs, Pods, Services and PersistentVolumeClaims only in the training namespaces,
  and updates only its own two webhook configurations;
- Trainer writes JobSets only in the training namespaces; Secrets and ConfigMaps in its own
  namespace, and in a training namespace only those a TrainJob controls, before and after the
  write (kubeflow/trainer ``pkg/runtime/framework/plugins``); it updates only its own two webhook
  configurations.

What the rules do not name (their own CRDs' objects, events, leases) stays RBAC's. ``failurePolicy:
Fail``: a policy that cannot be evaluated denies.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .labeler_admission import POLICY_API_VERSION, service_account_user

WEBHOOK_GROUP = "admissionregistration.k8s.io"
WEBHOOK_RESOURCES = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
WRITES = ["CREATE", "UPDATE", "DELETE"]
TRAINJOB_API_PREFIX = "trainer.kubeflow.org/"
"""A TrainJob owner reference's ``apiVersion`` starts so (Trainer's API group)."""


def jobset_namespaced_message(namespaces: Sequence[str]) -> str:
    return f"the JobSet controller may write Jobs, Pods, Services and PersistentVolumeClaims only in the training namespaces ({', '.join(namespaces)})"


def trainer_jobsets_message(namespaces: Sequence[str]) -> str:
    return f"Kubeflow Trainer may write JobSets only in the training namespaces ({', '.join(namespaces)})"


def trainer_config_message(own_namespace: str) -> str:
    return (f"Kubeflow Trainer may write Secrets and ConfigMaps only in {own_namespace}, or in a training namespace "
            "when a TrainJob controls them")


def webhooks_message(controller: str, names: Sequence[str]) -> str:
    return f"{controller} may only update its own webhook configurations ({', '.join(names)})"


def _webhook_rule() -> dict[str, Any]:
    return {"apiGroups": [WEBHOOK_GROUP], "apiVersions": ["*"], "operations": WRITES, "resources": list(WEBHOOK_RESOURCES)}


def _webhook_validation(controller: str, names: Sequence[str]) -> dict[str, str]:
    return {
        "expression": f"request.resource.group != '{WEBHOOK_GROUP}' || "
        f"(request.operation == 'UPDATE' && request.name in {json.dumps(sorted(names))})",
        "message": webhooks_message(controller, sorted(names)),
    }


def _policy(name: str, namespace: str, service_account: str, labels: dict[str, str], rules: list[dict[str, Any]],
            variables: list[dict[str, str]], validations: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "is-the-controller", "expression":
                                 f"request.userInfo.username == '{service_account_user(namespace, service_account)}'"}],
            "variables": variables,
            "validations": validations,
        },
    }


def jobset_policy_manifest(name: str, namespace: str, service_account: str, training_namespaces: Sequence[str],
                           webhook_configurations: Sequence[str], labels: dict[str, str]) -> dict[str, Any]:
    """The policy that holds JobSet's controller to the training namespaces and its own webhook configurations."""
    namespaces = sorted(training_namespaces)
    return _policy(name, namespace, service_account, labels, rules=[
        {"apiGroups": [""], "apiVersions": ["*"], "operations": WRITES, "resources": ["pods", "services", "persistentvolumeclaims"]},
        {"apiGroups": ["batch"], "apiVersions": ["*"], "operations": WRITES, "resources": ["jobs", "jobs/status"]},
        _webhook_rule(),
    ], variables=[], validations=[
        {"expression": f"request.resource.group == '{WEBHOOK_GROUP}' || request.namespace in {json.dumps(namespaces)}",
         "message": jobset_namespaced_message(namespaces)},
        _webhook_validation("the JobSet controller", webhook_configurations),
    ])


def _controlled_by_trainjob(obj: str) -> str:
    return (f"{obj}.metadata.?ownerReferences.orValue([]).exists(r, r.kind == 'TrainJob' && "
            f"r.apiVersion.startsWith('{TRAINJOB_API_PREFIX}') && r.?controller.orValue(false))")


def trainer_policy_manifest(name: str, namespace: str, service_account: str, training_namespaces: Sequence[str],
                            webhook_configurations: Sequence[str], labels: dict[str, str]) -> dict[str, Any]:
    """The policy that holds Trainer to its namespace's and its TrainJobs' Secrets and ConfigMaps, JobSets in
    the training namespaces and its own webhook configurations."""
    namespaces = sorted(training_namespaces)
    return _policy(name, namespace, service_account, labels, rules=[
        {"apiGroups": [""], "apiVersions": ["*"], "operations": WRITES, "resources": ["secrets", "configmaps"]},
        {"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["*"], "operations": WRITES, "resources": ["jobsets"]},
        _webhook_rule(),
    ], variables=[
        {"name": "isConfig", "expression": "request.resource.group == '' && request.resource.resource in ['secrets', 'configmaps']"},
        # object is null on DELETE, oldObject on CREATE: a write must find the TrainJob on both sides
        # it has, so Trainer can neither adopt a Secret nor give one away.
        {"name": "trainJobControls", "expression": f"(request.operation == 'CREATE' || {_controlled_by_trainjob('oldObject')}) && "
         f"(request.operation == 'DELETE' || {_controlled_by_trainjob('object')})"},
    ], validations=[
        {"expression": f"!variables.isConfig || request.namespace == '{namespace}' || "
         f"(request.namespace in {json.dumps(namespaces)} && variables.trainJobControls)",
         "message": trainer_config_message(namespace)},
        {"expression": f"request.resource.group != 'jobset.x-k8s.io' || request.namespace in {json.dumps(namespaces)}",
         "message": trainer_jobsets_message(namespaces)},
        _webhook_validation("Kubeflow Trainer", webhook_configurations),
    ])
