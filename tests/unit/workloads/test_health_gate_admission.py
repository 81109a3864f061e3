"""The admission policy that holds the health gate to its own taints on the stack's GPU pools, its
own condition and its pools' NodeClaims: its manifests against the Kubernetes OpenAPI schema, and
the pools each stack's policy names. What the policy allows and refuses is the API server's
verdict, in the cluster tier (``tests/cluster/test_health_gate.py``)."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS
from eks_gpu_training.workloads import health_gate as gate

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
COMPONENT = "eks-gpu-training:index:HealthGate"


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_and_its_binding_pass_the_kubernetes_schema(version):
    for manifest in (gate.node_policy_manifest(["p5-training"], ["p5-burst"]), gate.node_policy_binding_manifest()):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version


def test_the_policy_judges_node_and_node_status_writes_and_nodeclaim_writes():
    rules = gate.node_policy_manifest([], [])["spec"]["matchConstraints"]["resourceRules"]
    assert [rule["resources"] for rule in rules] == [["nodes", "nodes/status"], ["nodeclaims", "nodeclaims/status"]]
    assert all(rule["operations"] == ["CREATE", "UPDATE", "DELETE"] for rule in rules)


def _pools_variable(policy) -> str:
    (variable,) = [v for v in policy["spec"]["variables"] if v["name"] == "inGpuPool"]
    return variable["expression"]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_each_stacks_policy_scopes_taints_to_its_own_managed_and_karpenter_gpu_pools(stack, request):
    graph = request.getfixturevalue(f"{stack}_graph")
    gate_tree = graph.subtree(graph.one(COMPONENT))
    (policy,) = gate_tree.of_type(VAP)
    managed = sorted(r.inputs["labels"]["eks-gpu-training/pool"] for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")
                     if "eks-gpu-training/pool" in (r.inputs.get("labels") or {}))
    karpenter = sorted(r.inputs["metadata"]["name"] for r in graph.resources if r.inputs.get("kind") == "NodePool")
    assert managed
    assert _pools_variable(policy.inputs) == (
        f"oldObject.metadata.?labels[?'eks-gpu-training/pool'].orValue('') in {json.dumps(managed)} || "
        f"oldObject.metadata.?labels[?'karpenter.sh/nodepool'].orValue('') in {json.dumps(karpenter)}")
