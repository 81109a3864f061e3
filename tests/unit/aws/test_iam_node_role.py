"""Node IAM roles: the policies every node needs, and SSM only where a stack opts in."""

from __future__ import annotations

from eks_gpu_training.aws.iam import NODE_MANAGED_POLICIES, SSM_POLICY, node_policy_names
from eks_gpu_training.config import ClusterConfig
from tests.support.harness import stack_config

ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


def attached(graph) -> dict[str, set[str]]:
    """Managed policy names attached, by node role resource name."""
    roles = {r.urn: r.name for r in graph.of_type("aws:iam/role:Role") if r.name.endswith("-node-role")}
    found: dict[str, set[str]] = {name: set() for name in roles.values()}
    for attachment in graph.of_type(ATTACHMENT):
        if attachment.parent in roles and ":iam::aws:policy/" in str(attachment.inputs.get("policyArn")):
            found[roles[attachment.parent]].add(str(attachment.inputs["policyArn"]).rsplit("/", 1)[-1])
    return found


def test_ssm_is_opt_in_and_off_by_default():
    assert ClusterConfig(name="c").node_ssm_access is False
    assert SSM_POLICY not in NODE_MANAGED_POLICIES
    assert node_policy_names(False) == NODE_MANAGED_POLICIES
    assert node_policy_names(True) == (*NODE_MANAGED_POLICIES, SSM_POLICY)


def test_the_vpc_cni_policy_stays_on_every_node_role():
    assert "AmazonEKS_CNI_Policy" in node_policy_names(False)


def test_prod_node_roles_have_no_ssm_and_dev_node_roles_do(prod_graph, dev_graph):
    assert stack_config("prod")["eks-gpu-training:cluster"]["nodeSsmAccess"] is False
    assert stack_config("dev")["eks-gpu-training:cluster"]["nodeSsmAccess"] is True
    prod, dev = attached(prod_graph), attached(dev_graph)
    assert prod
    assert dev
    assert all(policies == set(NODE_MANAGED_POLICIES) for policies in prod.values()), prod
    assert all(policies == set(NODE_MANAGED_POLICIES) | {SSM_POLICY} for policies in dev.values()), dev
