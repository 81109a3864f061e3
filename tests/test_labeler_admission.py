"""The admission policy that holds the topology labeler to its own node's topology labels: its CEL
evaluated with cel-python on the requests the API server would hand it, allowed and denied."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from eks_gpu_training.addons import topology_labeler as tl
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS
from admission_cel import Policy

LABELER = "system:serviceaccount:topology-labeler:topology-labeler"
NODE = "ip-10-0-1-23.us-west-2.compute.internal"
OTHER_NODE = "ip-10-0-9-99.us-west-2.compute.internal"
L1, L2 = "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2"


def node(name=NODE, labels=None, taints=None, annotations=None):
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "role": "gpu-training", **(labels or {})}},
        "spec": {"providerID": "aws:///us-west-2b/i-0123456789abcdef0"},
    }
    if taints is not None:
        obj["spec"]["taints"] = taints
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    return obj


def request(old, new, *, user=LABELER, node_name=NODE, operation="UPDATE", sub_resource=""):
    extra = {"authentication.kubernetes.io/node-name": [node_name]} if node_name else {}
    return {
        "operation": operation,
        "subResource": sub_resource,
        "userInfo": {"username": user, "groups": ["system:serviceaccounts"], "extra": extra},
    }, old, new


@pytest.fixture(scope="module")
def policy():
    return Policy(tl.node_policy_manifest())


def test_adding_its_own_nodes_topology_labels_is_allowed(policy):
    assert policy.admit(*request(node(), node(labels={L1: "nn-1", L2: "nn-2"}))) == (True, [])


def test_adding_the_fourth_layer_beside_existing_labels_is_allowed(policy):
    old = node(labels={L1: "nn-1"})
    assert policy.admit(*request(old, node(labels={L1: "nn-1", L2: "nn-2"}))) == (True, [])


def test_labelling_another_node_is_denied(policy):
    applies, denied = policy.admit(*request(node(OTHER_NODE), node(OTHER_NODE, labels={L1: "nn-1"})))
    assert applies and denied == ["the topology labeler may change only the node its own pod runs on"]


def test_a_token_without_node_information_is_denied(policy):
    applies, denied = policy.admit(*request(node(), node(labels={L1: "nn-1"}), node_name=None))
    assert denied == ["the topology labeler may change only the node its own pod runs on"]


def test_any_other_label_is_denied(policy):
    _, denied = policy.admit(*request(node(), node(labels={"role": "system"} | {L1: "nn-1"})))
    assert denied == ["the topology labeler may only add topology.k8s.aws/network-node-layer-* labels, never change or remove one"]
    _, denied = policy.admit(*request(node(), node(labels={"node-role.kubernetes.io/control-plane": ""})))
    assert len(denied) == 1


def test_changing_or_removing_a_topology_label_is_denied(policy):
    old = node(labels={L1: "nn-1"})
    assert policy.admit(*request(old, node(labels={L1: "nn-other"})))[1] != []
    removed = copy.deepcopy(old)
    del removed["metadata"]["labels"][L1]
    assert policy.admit(*request(old, removed))[1] != []


def test_tainting_or_cordoning_its_own_node_is_denied(policy):
    taint = [{"key": "evil", "effect": "NoSchedule"}]
    _, denied = policy.admit(*request(node(), node(taints=taint)))
    assert denied == ["the topology labeler may not change a Node's spec (taints, unschedulable) or annotations"]
    cordoned = node()
    cordoned["spec"]["unschedulable"] = True
    assert policy.admit(*request(node(), cordoned))[1] == denied
    assert policy.admit(*request(node(), node(annotations={"a": "b"})))[1] == denied


def test_deleting_a_node_or_writing_its_status_is_denied(policy):
    assert policy.admit(*request(node(), None, operation="DELETE"))[1] != []
    assert policy.admit(*request(node(), node(), sub_resource="status"))[1] != []


def test_other_users_are_not_matched(policy):
    assert policy.admit(*request(node(), node(taints=[]), user="system:node:" + NODE)) == (False, [])
    other_sa = "system:serviceaccount:kube-system:topology-labeler"
    assert policy.admit(*request(node(), node(labels={"role": "x"}), user=other_sa)) == (False, [])


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_and_its_binding_pass_the_kubernetes_schema(version):
    for manifest in (tl.node_policy_manifest(), tl.node_policy_binding_manifest()):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version
    assert tl.node_policy_binding_manifest()["spec"] == {"policyName": "topology-labeler", "validationActions": ["Deny"]}
