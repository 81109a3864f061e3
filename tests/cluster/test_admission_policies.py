"""The ValidatingAdmissionPolicies the platform installs, evaluated by the API server itself for
the identities they are written for (impersonation, with the ServiceAccount's node-name claim)."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.facts.gpu_nodes import network_layer_key
from eks_gpu_training.workloads.host_network_admission import (
    POLICY_NAME, host_network_policy_binding_manifest, host_network_policy_manifest,
)

from kube import pod_manifest, unique, wait_for

LABELER_SA = ("topology-labeler", "topology-labeler")
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"
"""The extra the API server puts on a projected ServiceAccount token of a pod bound to a node."""


def _labeler(cluster, node: str):
    namespace, name = LABELER_SA
    return cluster.kube.as_user(
        f"system:serviceaccount:{namespace}:{name}", groups=("system:serviceaccounts",), extra={NODE_NAME_CLAIM: node},
    )


def _refusal(call) -> str:
    try:
        call()
    except ApiException as error:
        assert error.status in (403, 422), error.body
        return error.body
    raise AssertionError("the API server allowed it")


@pytest.fixture
def labeler_nodes(prod_cluster):
    """Two GPU nodes, the first stripped of its layer labels (as a node the labeler has not seen)."""
    kube = prod_cluster.kube
    nodes = kube.nodes("role=gpu-training,eks-gpu-training/pool")
    own, other = nodes[0], nodes[1]
    saved = {network_layer_key(layer): own.metadata.labels.get(network_layer_key(layer)) for layer in (1, 2, 3)}
    kube.core.patch_node(own.metadata.name, {"metadata": {"labels": {key: None for key in saved}}})
    yield own.metadata.name, other.metadata.name, saved
    kube.core.patch_node(own.metadata.name, {"metadata": {"labels": saved}})


def test_the_labeler_may_add_layer_labels_to_its_own_node(prod_cluster, labeler_nodes):
    own, _, saved = labeler_nodes
    _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": saved}})
    labels = prod_cluster.kube.core.read_node(own).metadata.labels
    assert all(labels[key] == value for key, value in saved.items())


def test_the_labeler_may_not_set_other_labels(prod_cluster, labeler_nodes):
    own, _, _ = labeler_nodes
    message = _refusal(lambda: _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": {"role": "system"}}}))
    assert "may only add topology.k8s.aws/network-node-layer-* labels" in message


def test_the_labeler_may_not_label_another_node(prod_cluster, labeler_nodes):
    own, other, saved = labeler_nodes
    message = _refusal(lambda: _labeler(prod_cluster, own).core.patch_node(
        other, {"metadata": {"labels": {network_layer_key(3): "nn-00000000000000000"}}}))
    assert "may change only the node its own pod runs on" in message


def test_the_labeler_may_not_taint_its_node(prod_cluster, labeler_nodes):
    own, _, _ = labeler_nodes
    message = _refusal(lambda: _labeler(prod_cluster, own).core.patch_node(
        own, {"spec": {"taints": [{"key": "x", "value": "y", "effect": "NoSchedule"}]}}))
    assert "may not change a Node's spec" in message


def test_broken_variant_without_the_policy_the_labeler_could_relabel_its_node(prod_cluster, labeler_nodes):
    """The binding removed: the API server no longer stops the write the policy exists to stop."""
    own, _, _ = labeler_nodes
    kube = prod_cluster.kube
    binding = kube.get("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "topology-labeler")
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "topology-labeler")
    try:
        def relabelled():
            try:
                _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": {"eks-gpu-training/probe": "x"}}})
                return True
            except ApiException:
                return False
        wait_for(relabelled, what="the labeler's write allowed once the policy is unbound", timeout=30)
    finally:
        kube.core.patch_node(own, {"metadata": {"labels": {"eks-gpu-training/probe": None}}})
        kube.apply({"apiVersion": binding["apiVersion"], "kind": binding["kind"],
                    "metadata": {"name": binding["metadata"]["name"], "labels": binding["metadata"].get("labels") or {}},
                    "spec": binding["spec"]})


@pytest.fixture
def host_network_namespace(prod_cluster):
    """A namespace as the platform makes one with ``podSecurity: privileged``, and the policy for it."""
    from eks_gpu_training.workloads.host_network_admission import PART_OF, PART_OF_LABEL, POD_SECURITY_LABEL

    kube = prod_cluster.kube
    namespace = unique("host-network-probe")
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
        POD_SECURITY_LABEL: "privileged", PART_OF_LABEL: PART_OF}}})
    kube.apply(host_network_policy_manifest())
    kube.apply(host_network_policy_binding_manifest())
    yield kube, namespace
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY_NAME)
    kube.delete("v1", "Namespace", namespace)


def _create_pod(target, **spec):
    kube, namespace = target
    name = unique("hostnet")
    kube.apply(pod_manifest(name, namespace, **spec))
    return name


def test_the_host_network_policy_allows_host_networking(host_network_namespace):
    wait_for(lambda: _try(lambda: _create_pod(host_network_namespace, hostNetwork=True)),
             what="a host-network pod admitted", timeout=30)


def _try(call):
    try:
        return call()
    except ApiException:
        return None


def _eventually_refused(target, what: str, **spec) -> str:
    """The API server's refusal of a pod, once the new policy is in force (its informer needs a moment)."""
    kube, namespace = target

    def attempt():
        try:
            name = _create_pod(target, **spec)
        except ApiException as error:
            assert error.status in (403, 422), error.body
            return error.body
        kube.delete_pod(namespace, name)
        return None

    return wait_for(attempt, what=what, timeout=30)


PRIVILEGED = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                              "securityContext": {"privileged": True}}]}


def test_the_host_network_policy_denies_privileged_pods_and_host_paths(host_network_namespace):
    message = _eventually_refused(host_network_namespace, "the policy refusing a privileged pod", **PRIVILEGED)
    assert "privileged containers are not allowed here" in message, message
    message = _eventually_refused(host_network_namespace, "the policy refusing a hostPath volume",
                                  volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    assert "hostPath volumes are not allowed here" in message, message


def test_broken_variant_without_the_policy_a_privileged_pod_is_admitted(host_network_namespace):
    kube, _ = host_network_namespace
    _eventually_refused(host_network_namespace, "the policy in force", **PRIVILEGED)
    kube.delete("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    wait_for(lambda: _try(lambda: _create_pod(host_network_namespace, **PRIVILEGED)),
             what="a privileged pod admitted without the policy",
             timeout=30)
