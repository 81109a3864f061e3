"""Host networking in a privileged training namespace, without the rest of privileged: the policy's
CEL evaluated with cel-python on pods the API server would hand it."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from admission_cel import Policy
from harness import run_main, stack_config
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS
from eks_gpu_training.workloads.host_network_admission import (
    host_network_policy_binding_manifest,
    host_network_policy_manifest,
)
from eks_gpu_training.workloads.templates import TrainingJobSpec, training_pod_template

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


def training_pod(**changes):
    spec = TrainingJobSpec(
        name="rl", nodes=2, instance_types=("p5.48xlarge",), priority_class="training-critical",
        namespace="training", efa=True, host_network=True, image="repo/train@sha256:" + "a" * 64,
    )
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rl-0", "namespace": "training"},
           "spec": training_pod_template(spec)["spec"]}
    pod["spec"].update(changes)
    return pod


def create(pod, user="system:serviceaccount:kube-system:job-controller"):
    return {"operation": "CREATE", "subResource": "", "userInfo": {"username": user, "extra": {}}}, None, pod


@pytest.fixture(scope="module")
def policy():
    return Policy(host_network_policy_manifest())


def test_a_host_network_training_pod_is_admitted(policy):
    assert policy.admit(*create(training_pod())) == (True, [])


def test_a_privileged_container_is_denied_whoever_creates_it(policy):
    pod = training_pod()
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    for user in ("system:serviceaccount:training:default", "system:serviceaccount:training:other", "alice"):
        assert policy.admit(*create(pod, user))[1] == [
            "privileged containers are not allowed here: this namespace allows host networking only"
        ]


def test_a_privileged_init_container_is_denied_too(policy):
    pod = training_pod(initContainers=[{"name": "setup", "image": "busybox", "securityContext": {"privileged": True}}])
    assert len(policy.admit(*create(pod))[1]) == 1


def test_hostpath_host_pid_and_host_ipc_are_denied(policy):
    assert policy.admit(*create(training_pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}])))[1] == [
        "hostPath volumes are not allowed here: this namespace allows host networking only"
    ]
    assert len(policy.admit(*create(training_pod(hostPID=True)))[1]) == 1
    assert len(policy.admit(*create(training_pod(hostIPC=True)))[1]) == 1


def test_capabilities_beyond_baseline_are_denied(policy):
    pod = training_pod()
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"].append("NET_ADMIN")
    assert policy.admit(*create(pod))[1] == ["only the baseline Pod Security Standard's capabilities may be added here"]


def test_the_policy_selects_only_this_projects_privileged_namespaces():
    selector = host_network_policy_manifest()["spec"]["matchConstraints"]["namespaceSelector"]
    assert selector == {"matchLabels": {"pod-security.kubernetes.io/enforce": "privileged",
                                        "app.kubernetes.io/part-of": "eks-gpu-training"}}


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_and_its_binding_pass_the_kubernetes_schema(version):
    for manifest in (host_network_policy_manifest(), host_network_policy_binding_manifest()):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version


def host_network_policies(graph):
    return [p for p in graph.of_type(VAP) if p.inputs["metadata"]["name"] == "eks-gpu-training-host-network-only"]


def test_a_stack_with_a_host_network_app_gets_the_policy_and_one_without_does_not(dev_graph):
    assert host_network_policies(dev_graph) == []
    config = copy.deepcopy(stack_config("dev"))
    scheduling = config["eks-gpu-training:scheduling"]
    scheduling["namespaces"] = [{"name": "training", "podSecurity": "privileged"}]
    scheduling["trainingApps"][0]["hostNetwork"] = True
    graph = run_main(config)
    assert graph.error is None, graph.error
    (policy,) = host_network_policies(graph)
    assert policy.inputs["spec"] == host_network_policy_manifest()["spec"]
