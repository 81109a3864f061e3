"""The admission policies that fence the JobSet and Kubeflow Trainer controllers
(``addons/job_api_admission.py``), judged by the API server for each controller's ServiceAccount
(impersonated) on prod's cluster, which installs both: each write the controller needs is allowed,
each one its chart's RBAC allows beyond that is refused, naming the policy and its rule. The probes
are server-side dry runs (admission runs in full, nothing is stored), so an allowed write changes
nothing the other tests see.

The controllers beside the local cluster act as those ServiceAccounts too (``local/job_controllers.py``):
a JobSet outside the training namespaces gets no Job, its controller's create refused by the fence,
while every job kind still runs in the training namespaces (``test_job_kinds.py``,
``test_training_jobs.py``). The broken variant is each fence without the rule a probe breaks, for a
ServiceAccount of the controller's namespace bound to the controller's ClusterRole."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client

from eks_gpu_training.addons import job_api_admission as fences
from eks_gpu_training.addons import job_apis
from eks_gpu_training.addons.labeler_admission import node_policy_binding_manifest, service_account_user
from eks_gpu_training.workloads.job_sets import JOBSET_API_VERSION

from tests.support.environment import Environment, wait_for
from tests.support.manifests import PAUSE_IMAGE, unique
from tests.support.policy_probes import VAP, as_service_account, bound_cluster_role, policy_refuses

TRAINING = "training"
"""A training namespace of prod's (``scheduling.namespaces``)."""
ELSEWHERE = "kube-system"
"""A namespace the controllers' RBAC reaches and their work never needs."""
DRY_RUN = "All"

JOBSET_SA = (job_apis.JOBSET_NAMESPACE, job_apis.JOBSET_SERVICE_ACCOUNT)
TRAINER_SA = (job_apis.TRAINER_NAMESPACE, job_apis.TRAINER_SERVICE_ACCOUNT)


@pytest.fixture(scope="module")
def training_namespaces(prod_cluster) -> list[str]:
    return sorted(ns.name for ns in prod_cluster.args.scheduling.namespaces)


def _jobset_refuses(namespaces: list[str]) -> Callable[[Callable[[], Any]], None]:
    return lambda call: policy_refuses(job_apis.JOBSET_FENCE, fences.jobset_namespaced_message(namespaces), call)


def _webhooks(env: Environment) -> client.AdmissionregistrationV1Api:
    return client.AdmissionregistrationV1Api(env.api)


def _service(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": unique("fence-probe"), "namespace": namespace},
            "spec": {"clusterIP": "None", "selector": {"app": "fence-probe"}}}


def _job(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": unique("fence-probe"), "namespace": namespace},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": PAUSE_IMAGE}]}}}}


def _claim(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": unique("fence-probe"), "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def _config(kind: str, namespace: str, *, owner: str | None = None) -> dict[str, Any]:
    """A Secret or ConfigMap; ``owner``: the kind of its controller owner (a TrainJob's, as Trainer's
    MPI runtime makes them)."""
    metadata: dict[str, Any] = {"name": unique("fence-probe"), "namespace": namespace}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": owner, "name": "probe",
                                        "uid": str(uuid.uuid4()), "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "data": {}}


def _jobset(namespace: str) -> dict[str, Any]:
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": {"name": unique("fence-probe"), "namespace": namespace},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": PAUSE_IMAGE}]}}}}}]}}


def _create(env: Environment, obj: dict[str, Any]) -> Callable[[], Any]:
    """A server-side dry-run create of ``obj`` by ``env``'s identity."""
    namespace = obj["metadata"]["namespace"]
    if obj["kind"] == "JobSet":
        return lambda: env.custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", obj,
                                                                  dry_run=DRY_RUN)
    if obj["kind"] == "Job":
        return lambda: env.batch.create_namespaced_job(namespace, obj, dry_run=DRY_RUN)
    create = {"Service": env.core.create_namespaced_service, "ConfigMap": env.core.create_namespaced_config_map,
              "Secret": env.core.create_namespaced_secret,
              "PersistentVolumeClaim": env.core.create_namespaced_persistent_volume_claim}[obj["kind"]]
    return lambda: create(namespace, obj, dry_run=DRY_RUN)


def _replace_webhooks(env: Environment, admin: Environment, name: str) -> Callable[[], Any]:
    """A dry-run update (PUT: the verb the charts' RBAC grants) of a webhook configuration as it is."""
    mutating = name.startswith("jobset-mutating") or name.startswith("kueue-mutating") or name.startswith("defaulter.")

    def replace() -> Any:
        if mutating:
            current = _webhooks(admin).read_mutating_webhook_configuration(name)
            return _webhooks(env).replace_mutating_webhook_configuration(name, current, dry_run=DRY_RUN)
        current = _webhooks(admin).read_validating_webhook_configuration(name)
        return _webhooks(env).replace_validating_webhook_configuration(name, current, dry_run=DRY_RUN)
    return replace


# --- JobSet ------------------------------------------------------------------------------------------

def test_jobset_may_write_jobs_services_and_claims_in_a_training_namespace(prod_cluster):
    jobset = as_service_account(prod_cluster.env, *JOBSET_SA)
    for obj in (_service(TRAINING), _job(TRAINING), _claim(TRAINING)):
        _create(jobset, obj)()


def test_jobset_may_not_write_jobs_services_claims_or_pods_elsewhere(prod_cluster, training_namespaces):
    env = prod_cluster.env
    jobset = as_service_account(env, *JOBSET_SA)
    refuses = _jobset_refuses(training_namespaces)
    for obj in (_service(ELSEWHERE), _job(ELSEWHERE), _claim(ELSEWHERE)):
        refuses(_create(jobset, obj))
    [pod, *_] = env.pods(ELSEWHERE)
    refuses(lambda: jobset.core.delete_namespaced_pod(pod.metadata.name, ELSEWHERE, dry_run=DRY_RUN))


def test_jobset_may_update_its_own_webhook_configurations_only(prod_cluster):
    env = prod_cluster.env
    jobset = as_service_account(env, *JOBSET_SA)
    for name in job_apis.JOBSET_WEBHOOK_CONFIGURATIONS:
        _replace_webhooks(jobset, env, name)()
    message = fences.webhooks_message("the JobSet controller", sorted(job_apis.JOBSET_WEBHOOK_CONFIGURATIONS))
    for name in ("kueue-validating-webhook-configuration", "kueue-mutating-webhook-configuration",
                 *job_apis.TRAINER_WEBHOOK_CONFIGURATIONS):
        policy_refuses(job_apis.JOBSET_FENCE, message, _replace_webhooks(jobset, env, name))


# --- Kubeflow Trainer --------------------------------------------------------------------------------

def test_trainer_may_write_its_namespaces_and_its_trainjobs_secrets_and_config_maps(prod_cluster):
    trainer = as_service_account(prod_cluster.env, *TRAINER_SA)
    for kind in ("Secret", "ConfigMap"):
        _create(trainer, _config(kind, job_apis.TRAINER_NAMESPACE))()
        _create(trainer, _config(kind, TRAINING, owner="TrainJob"))()


def test_trainer_may_not_write_other_secrets_and_config_maps(prod_cluster):
    env = prod_cluster.env
    trainer = as_service_account(env, *TRAINER_SA)
    message = fences.trainer_config_message(job_apis.TRAINER_NAMESPACE)
    for kind in ("Secret", "ConfigMap"):
        policy_refuses(job_apis.TRAINER_FENCE, message, _create(trainer, _config(kind, ELSEWHERE)))
        policy_refuses(job_apis.TRAINER_FENCE, message, _create(trainer, _config(kind, ELSEWHERE, owner="TrainJob")))
        policy_refuses(job_apis.TRAINER_FENCE, message, _create(trainer, _config(kind, TRAINING)))
        policy_refuses(job_apis.TRAINER_FENCE, message, _create(trainer, _config(kind, TRAINING, owner="JobSet")))
    # Nor adopt one a TrainJob does not control: the namespace's CA bundle, given a TrainJob owner.
    bundle = env.core.read_namespaced_config_map("kube-root-ca.crt", TRAINING)
    bundle.metadata.owner_references = [client.V1OwnerReference(
        api_version="trainer.kubeflow.org/v1alpha1", kind="TrainJob", name="probe", uid=str(uuid.uuid4()), controller=True)]
    policy_refuses(job_apis.TRAINER_FENCE, message, lambda: trainer.core.replace_namespaced_config_map(
        "kube-root-ca.crt", TRAINING, bundle, dry_run=DRY_RUN))


def test_trainer_may_create_jobsets_in_training_namespaces_only(prod_cluster, training_namespaces):
    trainer = as_service_account(prod_cluster.env, *TRAINER_SA)
    _create(trainer, _jobset(TRAINING))()
    policy_refuses(job_apis.TRAINER_FENCE, fences.trainer_jobsets_message(training_namespaces),
                   _create(trainer, _jobset(ELSEWHERE)))


def test_trainer_may_update_its_own_webhook_configurations_only(prod_cluster):
    env = prod_cluster.env
    trainer = as_service_account(env, *TRAINER_SA)
    for name in job_apis.TRAINER_WEBHOOK_CONFIGURATIONS:
        _replace_webhooks(trainer, env, name)()
    message = fences.webhooks_message("Kubeflow Trainer", sorted(job_apis.TRAINER_WEBHOOK_CONFIGURATIONS))
    for name in ("kueue-validating-webhook-configuration", *job_apis.JOBSET_WEBHOOK_CONFIGURATIONS):
        policy_refuses(job_apis.TRAINER_FENCE, message, _replace_webhooks(trainer, env, name))


# --- the controllers beside the cluster are fenced too -------------------------------------------------

@pytest.fixture
def outside_namespace(prod_cluster) -> Iterator[str]:
    """A namespace of the test's own, not a training namespace."""
    name = unique("fence-outside")
    prod_cluster.env.ensure_namespace(name)
    yield name
    prod_cluster.env.delete("v1", "Namespace", name)


def test_the_running_jobset_controller_makes_nothing_for_a_jobset_outside_the_training_namespaces(
        prod_cluster, outside_namespace):
    """The JobSet controller acts as its ServiceAccount: its create of the JobSet's Service or Job is
    refused by the fence, which its event names, and no Job appears."""
    env = prod_cluster.env
    jobset = _jobset(outside_namespace)
    jobset["spec"]["suspend"] = False
    env.apply(jobset)

    def refused_event() -> str | None:
        for event in env.core.list_namespaced_event(outside_namespace).items:
            if event.reason in ("JobCreationFailed", "HeadlessServiceCreationFailed") and \
                    f"ValidatingAdmissionPolicy '{job_apis.JOBSET_FENCE}'" in (event.message or ""):
                return event.message
        return None

    wait_for(refused_event, what="the JobSet controller's create refused by its fence", timeout=60)
    assert env.batch.list_namespaced_job(outside_namespace).items == []
    assert env.core.list_namespaced_service(outside_namespace).items == []


# --- broken variants ----------------------------------------------------------------------------------

@pytest.fixture
def broken_fence(prod_cluster, request) -> Iterator[Environment]:
    """The fence ``request.param`` (its name, words of the rule's message, the controller's
    ServiceAccount) as the platform applied it but without that rule, for a ServiceAccount of the
    controller's namespace bound to the controller's ClusterRole: that identity as the API server sees it."""
    fence, removed, (namespace, account) = request.param
    env = prod_cluster.env
    name = unique(f"{fence}-broken")
    policy = prod_cluster.platform_object("ValidatingAdmissionPolicy", fence)
    validations = policy["spec"]["validations"]
    kept = [v for v in validations if removed not in v["message"]]
    assert len(kept) == len(validations) - 1
    policy["metadata"] = {"name": name}
    policy["spec"]["validations"] = kept
    policy["spec"]["matchConditions"] = [{"name": "is-the-probe", "expression":
                                          f"request.userInfo.username == '{service_account_user(namespace, name)}'"}]
    env.apply(policy)
    env.apply(node_policy_binding_manifest(name, {}))
    try:
        with bound_cluster_role(env, namespace, name, role=account):
            yield as_service_account(env, namespace, name)
    finally:
        env.delete(VAP, "ValidatingAdmissionPolicyBinding", name)
        env.delete(VAP, "ValidatingAdmissionPolicy", name)


def _admitted_once_rbac_is_in_force(call: Callable[[], Any], what: str) -> None:
    """``call`` admitted (the probe's ClusterRoleBinding needs a moment to reach the authorizer)."""
    def admitted() -> bool:
        try:
            call()
            return True
        except client.exceptions.ApiException as error:
            assert error.status == 403, error.body
            assert "ValidatingAdmissionPolicy" not in (error.body or ""), error.body
            return False
    wait_for(admitted, what=what, timeout=30)


@pytest.mark.parametrize("broken_fence", [(job_apis.JOBSET_FENCE, "only in the training namespaces", JOBSET_SA)],
                         indirect=True, ids=["jobset-without-the-namespace-rule"])
def test_broken_variant_without_its_namespace_rule_jobset_could_create_a_job_in_kube_system(prod_cluster, broken_fence):
    _admitted_once_rbac_is_in_force(_create(broken_fence, _job(ELSEWHERE)), "a Job in kube-system admitted")
    # The same write by the controller, under the whole fence:
    _jobset_refuses(sorted(ns.name for ns in prod_cluster.args.scheduling.namespaces))(
        _create(as_service_account(prod_cluster.env, *JOBSET_SA), _job(ELSEWHERE)))


@pytest.mark.parametrize("broken_fence", [(job_apis.TRAINER_FENCE, "Secrets and ConfigMaps", TRAINER_SA)],
                         indirect=True, ids=["trainer-without-the-secret-rule"])
def test_broken_variant_without_its_secret_rule_trainer_could_write_a_config_map_in_kube_system(prod_cluster, broken_fence):
    _admitted_once_rbac_is_in_force(_create(broken_fence, _config("ConfigMap", ELSEWHERE)), "a ConfigMap in kube-system admitted")
    policy_refuses(job_apis.TRAINER_FENCE, fences.trainer_config_message(job_apis.TRAINER_NAMESPACE),
                   _create(as_service_account(prod_cluster.env, *TRAINER_SA), _config("ConfigMap", ELSEWHERE)))
