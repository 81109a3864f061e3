"""Host networking in a privileged training namespace, without the rest of privileged: the policy's
manifests against the Kubernetes OpenAPI schema, which namespaces it selects, and which stacks get
it. What it admits and refuses is the API server's verdict, in the cluster tier
(``tests/cluster/test_admission_policies.py``)."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from tests.support.harness import run_main, stack_config
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS
from eks_gpu_training.workloads.host_network_admission import (
    host_network_policy_binding_manifest,
    host_network_policy_manifest,
)

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


def test_the_policy_selects_only_this_projects_privileged_namespaces():
    selector = host_network_policy_manifest("training")["spec"]["matchConstraints"]["namespaceSelector"]
    assert selector == {"matchLabels": {"pod-security.kubernetes.io/enforce": "privileged",
                                        "app.kubernetes.io/part-of": "eks-gpu-training"}}


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_and_its_binding_pass_the_kubernetes_schema(version):
    for manifest in (host_network_policy_manifest("training"), host_network_policy_binding_manifest()):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version


def host_network_policies(graph):
    return [p for p in graph.of_type(VAP) if p.inputs["metadata"]["name"] == "eks-gpu-training-host-network-only"]


def test_a_stack_with_a_host_network_app_gets_the_policy_and_one_without_does_not(dev_graph):
    assert host_network_policies(dev_graph) == []
    config = copy.deepcopy(stack_config("dev"))
    scheduling = config["eks-gpu-training:scheduling"]
    # dev's rl-training runs in its first namespace, training (team research's)
    scheduling["namespaces"][0].update(name="training", podSecurity="privileged")
    scheduling["trainingApps"][0]["hostNetwork"] = True
    graph = run_main(config)
    assert graph.error is None, graph.error
    (policy,) = host_network_policies(graph)
    assert policy.inputs["spec"] == host_network_policy_manifest("training")["spec"]
