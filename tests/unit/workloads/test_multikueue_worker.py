"""A worker's side of MultiKueue under the mock engine: the manager's ServiceAccount reads
cluster-wide and writes only in the training namespaces, with the verbs Kueue's MultiKueue needs,
and its kubeconfig is one Kueue accepts (inline CA, a token, no exec plugin, no file paths)."""

from __future__ import annotations

import base64

import pulumi
import pulumi_kubernetes as k8s
import yaml

from eks_gpu_training.workloads.multikueue_worker import (
    MANAGER_SERVICE_ACCOUNT, READER_ROLE, TOKEN_SECRET, WRITER_ROLE, MultiKueueWorker, reader_rules, worker_kubeconfig,
    writer_rules,
)
from tests.support.harness import PlausibleMocks, run_program

TOKEN = "eyJhbGciOiJSUzI1NiJ9.worker-token"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


class TokenControllerMocks(PlausibleMocks):
    """A service-account-token Secret comes back with the token the token controller writes into it."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, outputs = super().new_resource(args)
        if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == "kubernetes.io/service-account-token":
            outputs = {**outputs, "data": {"token": base64.b64encode(TOKEN.encode()).decode()}}
        return resource_id, outputs


def worker_graph():
    def program():
        provider = k8s.Provider("worker", kubeconfig="{}")
        worker = MultiKueueWorker("fleet-worker", namespaces=["training", "evaluation"], endpoint="https://worker.example:443",
                                  certificate_authority=CA, opts=pulumi.ResourceOptions(provider=provider))
        pulumi.export("kubeconfig", worker.kubeconfig)

    graph = run_program(program, mocks=TokenControllerMocks())
    assert graph.error is None, repr(graph.error)
    return graph


def verbs(rules, group, resource):
    return {verb for rule in rules if group in rule["apiGroups"] and resource in rule["resources"] for verb in rule["verbs"]}


def test_the_manager_reads_jobs_workloads_and_queues_cluster_wide():
    rules = reader_rules()
    for group, resource in (("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs"),
                            ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "localqueues")):
        assert verbs(rules, group, resource) == {"get", "list", "watch"}, resource
    assert verbs(rules, "batch", "jobs/status") == {"get"}
    assert not any(verb in {"create", "update", "patch", "delete"} for rule in rules for verb in rule["verbs"])


def test_the_manager_writes_the_dispatched_objects_and_nothing_else():
    rules = writer_rules()
    written = {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]}
    assert written == {("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs"),
                       ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "workloads/status")}
    assert verbs(rules, "batch", "jobs") == {"create", "update", "patch", "delete"}


def test_writes_are_bound_in_the_training_namespaces_alone():
    graph = worker_graph()
    bindings = graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    assert sorted(b.inputs["metadata"]["namespace"] for b in bindings) == ["evaluation", "training"]
    assert {b.inputs["roleRef"]["name"] for b in bindings} == {WRITER_ROLE}
    [cluster_binding] = graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert cluster_binding.inputs["roleRef"]["name"] == READER_ROLE
    subject = {"kind": "ServiceAccount", "name": MANAGER_SERVICE_ACCOUNT, "namespace": "kueue-system"}
    assert [cluster_binding.inputs["subjects"], *(b.inputs["subjects"] for b in bindings)] == [[subject]] * 3


def test_the_token_is_a_service_account_token_secret_made_after_its_account():
    graph = worker_graph()
    secret = graph.one("kubernetes:core/v1:Secret")
    assert secret.inputs["type"] == "kubernetes.io/service-account-token"
    assert secret.inputs["metadata"]["name"] == TOKEN_SECRET
    assert secret.inputs["metadata"]["annotations"] == {"kubernetes.io/service-account.name": MANAGER_SERVICE_ACCOUNT}
    assert graph.depends_on(secret, graph.one("kubernetes:core/v1:ServiceAccount"))


def test_the_kubeconfig_is_a_secret_output_with_the_endpoint_ca_and_token():
    graph = worker_graph()
    assert "kubeconfig" in graph.secret_exports
    config = yaml.safe_load(graph.exports["kubeconfig"])
    assert config["clusters"][0]["cluster"] == {"server": "https://worker.example:443", "certificate-authority-data": CA}
    assert config["users"][0]["user"] == {"token": TOKEN}


def test_the_kubeconfig_has_nothing_kueue_refuses():
    config = yaml.safe_load(worker_kubeconfig("https://10.0.0.1:6443", CA, TOKEN))
    user = config["users"][0]["user"]
    cluster = config["clusters"][0]["cluster"]
    assert not {"tokenFile", "exec", "auth-provider", "username", "password"} & set(user)
    assert not {"certificate-authority", "insecure-skip-tls-verify"} & set(cluster)
    assert config["current-context"] == config["contexts"][0]["name"]
