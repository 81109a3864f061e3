"""The verify command's read-only ClusterRole: what the stack registers under the mock engine with
``verify.clusterRole``, and that it grants exactly the reads the command makes."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training import VerifierRole, VerifierRoleArgs
from eks_gpu_training.addons.verifier_role import verifier_cluster_role
from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform import parse_platform_args
from tests.support.harness import run_main, run_program, stack_config

COMPONENT = "eks-gpu-training:index:VerifierRole"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"

EXPECTED_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods", "resourcequotas", "persistentvolumeclaims"], "verbs": ["get", "list"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues", "admissionchecks", "multikueueclusters", "multikueueconfigs"],
     "verbs": ["get", "list"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings", "clusterrolebindings"], "verbs": ["get", "list"]},
    {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
     "verbs": ["get", "list"]},
]


def with_verify(stack: str, **verify) -> dict:
    config = copy.deepcopy(stack_config(stack))
    config["eks-gpu-training:verify"] = verify
    return config


def test_the_stacks_ship_no_verifier_role_by_default(prod_graph, dev_graph):
    assert prod_graph.of_type(COMPONENT) == []
    assert dev_graph.of_type(COMPONENT) == []
    assert not [r for r in prod_graph.of_type(CLUSTER_ROLE) if r.inputs["metadata"]["name"] == "eks-gpu-training-verify"]


@pytest.fixture(scope="module")
def verifier_graph():
    """The prod stack with the verifier role on, bound to a group of the stack's choosing."""
    graph = run_main(with_verify("prod", clusterRole=True, group="ml-oncall"))
    assert graph.error is None, repr(graph.error)
    return graph


def test_cluster_role_true_ships_get_and_list_on_exactly_the_commands_reads(verifier_graph):
    component = verifier_graph.one(COMPONENT, "gpu-training-verifier-role")
    role = verifier_graph.subtree(component).one(CLUSTER_ROLE)
    assert role.inputs["metadata"]["name"] == "eks-gpu-training-verify"
    assert role.inputs["rules"] == EXPECTED_RULES
    provider = verifier_graph.one("pulumi:providers:kubernetes")
    assert role.provider.rsplit("::", 1)[0] == provider.urn


def test_the_binding_grants_the_role_to_the_stacks_group(verifier_graph):
    binding = verifier_graph.subtree(verifier_graph.one(COMPONENT)).one(BINDING)
    assert binding.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "eks-gpu-training-verify"}
    assert binding.inputs["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-oncall"}]


def test_the_component_binds_the_default_group_unless_told_otherwise():
    graph = run_program(lambda: VerifierRole("v", VerifierRoleArgs()))
    assert graph.error is None, repr(graph.error)
    assert graph.one(BINDING).inputs["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "eks-gpu-training-verifiers"}]
    assert graph.one(CLUSTER_ROLE).inputs["rules"] == EXPECTED_RULES


def test_the_stack_refuses_a_system_group_with_its_key_path():
    raw = {
        "cluster": {"name": "c", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
        "network": {"create": True, "availabilityZones": ["us-west-2a", "us-west-2b"]},
        "region": "us-west-2",
        "verify": {"clusterRole": True, "group": "system:masters"},
    }
    with pytest.raises(ConfigError, match=r"verify\.group: 'system:masters': the 'system:' prefix is reserved"):
        parse_platform_args(raw)


def test_the_component_refuses_a_system_group_before_registering():
    graph = run_program(lambda: VerifierRole("v", VerifierRoleArgs(group="system:authenticated")))
    assert isinstance(graph.error, ConfigError)
    assert "VerifierRole(v).group" in str(graph.error)
    assert graph.of_type(COMPONENT) == []


def test_the_role_is_read_only():
    verbs = {verb for rule in verifier_cluster_role()["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list"}
    assert not any("secrets" in rule["resources"] for rule in verifier_cluster_role()["rules"])


def test_the_component_outputs_the_roles_name():
    names = []

    def program():
        VerifierRole("v", VerifierRoleArgs()).role_name.apply(names.append)

    graph = run_program(program)
    assert graph.error is None
    assert names == ["eks-gpu-training-verify"]
