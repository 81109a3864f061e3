"""A MultiKueue manager under the mock engine: a kubeconfig Secret and a MultiKueueCluster per worker
in Kueue's namespace, one MultiKueueConfig listing them in order, and the AdmissionCheck of
MultiKueue's controller on it, each checked against Kueue 0.19.2's API."""

from __future__ import annotations

from dataclasses import replace

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import rpc

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform.stack_files import locate_stack
from eks_gpu_training.workloads.kueue_queues import KueueQueues, kueue_queues_args
from eks_gpu_training.workloads.multikueue_manager import (
    ADMISSION_CHECK, MULTIKUEUE_CONFIG, MultiKueueManager, MultiKueueWorkerTarget, admission_checks_strategy,
)
from tests.support.harness import PROJECT_ROOT, run_program

CUSTOM = "kubernetes:kueue.x-k8s.io/v1beta2:"


def manager_graph(workers):
    def program():
        provider = k8s.Provider("manager", kubeconfig="{}")
        manager = MultiKueueManager("fleet-manager", workers=workers, opts=pulumi.ResourceOptions(provider=provider))
        pulumi.export("admissionCheck", manager.admission_check)

    return run_program(program)


@pytest.fixture(scope="module")
def graph():
    graph = manager_graph([MultiKueueWorkerTarget("east", "kubeconfig-of-east"),
                           MultiKueueWorkerTarget("west", pulumi.Output.secret("kubeconfig-of-west"))])
    assert graph.error is None, repr(graph.error)
    return graph


def test_each_worker_gets_its_kubeconfig_secret_in_kueues_namespace(graph):
    secrets = {s.inputs["metadata"]["name"]: s for s in graph.of_type("kubernetes:core/v1:Secret")}
    assert sorted(secrets) == ["multikueue-east", "multikueue-west"]
    assert {s.inputs["metadata"]["namespace"] for s in secrets.values()} == {"kueue-system"}
    # Sent to the engine as a secret, so the state holds it encrypted.
    assert secrets["multikueue-east"].inputs["stringData"] == {rpc._special_sig_key: rpc._special_secret_sig,
                                                               "value": {"kubeconfig": "kubeconfig-of-east"}}


def test_each_worker_is_a_multikueue_cluster_reading_its_secret(graph):
    clusters = sorted(graph.of_type(f"{CUSTOM}MultiKueueCluster"), key=lambda c: c.inputs["metadata"]["name"])
    assert [c.inputs["metadata"]["name"] for c in clusters] == ["east", "west"]
    assert clusters[0].inputs["spec"] == {"clusterSource": {"kubeConfig": {"location": "multikueue-east", "locationType": "Secret"}}}
    secret = next(s for s in graph.of_type("kubernetes:core/v1:Secret") if s.inputs["metadata"]["name"] == "multikueue-east")
    assert graph.depends_on(clusters[0], secret)


def test_the_config_lists_the_workers_in_order_and_the_check_names_it(graph):
    config = graph.one(f"{CUSTOM}MultiKueueConfig")
    assert config.inputs["metadata"]["name"] == MULTIKUEUE_CONFIG
    assert config.inputs["spec"] == {"clusters": ["east", "west"]}
    check = graph.one(f"{CUSTOM}AdmissionCheck")
    assert check.inputs["metadata"]["name"] == ADMISSION_CHECK
    assert check.inputs["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue",
                                    "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}}
    assert graph.depends_on(check, config)
    assert graph.exports["admissionCheck"] == ADMISSION_CHECK


def test_a_cluster_queue_runs_the_check_on_every_flavor():
    assert admission_checks_strategy([ADMISSION_CHECK]) == {"admissionChecks": [{"name": "multikueue"}]}


@pytest.mark.parametrize(("workers", "path", "text"), [
    ([], "MultiKueueManager(fleet-manager).workers", "0 workers"),
    ([MultiKueueWorkerTarget("east", "a"), MultiKueueWorkerTarget("east", "b")], "MultiKueueManager(fleet-manager).workers[1].name",
     "'east' is workers[0]'s too"),
])
def test_refuses_no_worker_or_one_named_twice_before_registering_anything(workers, path, text):
    graph = manager_graph(workers)
    assert isinstance(graph.error, ConfigError)
    assert {p.path: p.message for p in graph.error.problems}[path].startswith(text)
    assert graph.of_type("eks-gpu-training:index:MultiKueueManager") == []


def test_kueue_queues_given_the_check_put_it_on_every_cluster_queue_and_not_otherwise():
    args = kueue_queues_args(locate_stack("dev", PROJECT_ROOT).platform_args())

    def strategies(queues_args):
        def program():
            KueueQueues("queues", queues_args, opts=pulumi.ResourceOptions(provider=k8s.Provider("manager", kubeconfig="{}")))

        graph = run_program(program)
        assert graph.error is None, repr(graph.error)
        queues = graph.of_type(f"{CUSTOM}ClusterQueue")
        assert sorted(q.inputs["metadata"]["name"] for q in queues) == ["evaluation", "research"]
        return [q.inputs["spec"].get("admissionChecksStrategy") for q in queues]

    assert strategies(replace(args, admission_checks=[ADMISSION_CHECK])) == [{"admissionChecks": [{"name": "multikueue"}]}] * 2
    assert strategies(args) == [None, None]
