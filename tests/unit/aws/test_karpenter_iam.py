"""The controller's policies, the queue policy and the interruption rules against upstream's own
getting-started CloudFormation template (Karpenter 1.14.1), with this cluster filled in."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from eks_gpu_training.aws import karpenter_iam
from eks_gpu_training.aws.iam import NODE_MANAGED_POLICIES, node_policy_names
from eks_gpu_training.aws.pod_identity import pod_identity_trust_policy
from eks_gpu_training.addons.karpenter import INTERRUPTION_QUEUE_RETENTION_SECONDS

PARTITION, REGION, ACCOUNT, CLUSTER = "aws", "us-west-2", "123456789012", "research"
NODE_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/research-karpenter-node-role-1a2b3c"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:research-karpenter-interruption-queue-4d5e6f"


class _CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags as plain values (``!GetAtt X.Arn`` -> ``${X.Arn}``)."""


_CloudFormationLoader.add_constructor("!Sub", lambda loader, node: loader.construct_scalar(node))
_CloudFormationLoader.add_constructor("!GetAtt", lambda loader, node: "${" + loader.construct_scalar(node) + "}")
_CloudFormationLoader.add_constructor("!Ref", lambda loader, node: "${" + loader.construct_scalar(node) + "}")


def _fill(text: str) -> str:
    for placeholder, value in {
        "${ClusterName}": CLUSTER,
        "${AWS::Partition}": PARTITION,
        "${AWS::Region}": REGION,
        "${AWS::AccountId}": ACCOUNT,
        "${AWS::URLSuffix}": "amazonaws.com",
        "${KarpenterNodeRole.Arn}": NODE_ROLE_ARN,
        "${KarpenterInterruptionQueue.Arn}": QUEUE_ARN,
    }.items():
        text = text.replace(placeholder, value)
    return text


@pytest.fixture(scope="module")
def upstream(reference_dir) -> dict[str, Any]:
    path = reference_dir / "karpenter-1.14.1" / "getting-started-cloudformation.yaml"
    return yaml.load(path.read_text(), Loader=_CloudFormationLoader)["Resources"]  # noqa: S506 - a SafeLoader with three tags


UPSTREAM_POLICY = {
    "node-lifecycle": "NodeLifecyclePolicy",
    "iam-integration": "IAMIntegrationPolicy",
    "eks-integration": "EKSIntegrationPolicy",
    "interruption": "InterruptionPolicy",
    "zonal-shift": "ZonalShiftPolicy",
    "resource-discovery": "ResourceDiscoveryPolicy",
}


def test_there_is_one_policy_per_upstream_controller_policy(upstream):
    upstream_policies = {name for name, r in upstream.items() if r["Type"] == "AWS::IAM::ManagedPolicy"}
    assert upstream_policies == set(UPSTREAM_POLICY.values())


@pytest.mark.parametrize(("role", "upstream_name"), UPSTREAM_POLICY.items())
def test_controller_policy_is_upstreams_scoped_to_this_cluster(upstream, role, upstream_name):
    expected = json.loads(_fill(upstream[upstream_name]["Properties"]["PolicyDocument"]))
    ours = karpenter_iam.controller_policies(PARTITION, REGION, ACCOUNT, CLUSTER, NODE_ROLE_ARN, QUEUE_ARN)[role]
    assert ours == expected


def test_instance_launches_and_deletions_are_limited_to_this_clusters_resources():
    lifecycle = karpenter_iam.node_lifecycle_policy(PARTITION, REGION, CLUSTER)["Statement"]
    deletion = next(s for s in lifecycle if s["Sid"] == "AllowScopedDeletion")
    assert deletion["Condition"]["StringEquals"] == {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}
    passing = karpenter_iam.iam_integration_policy(PARTITION, REGION, ACCOUNT, CLUSTER, NODE_ROLE_ARN)["Statement"][0]
    assert passing["Action"] == "iam:PassRole"
    assert passing["Resource"] == NODE_ROLE_ARN


def test_pod_identity_roles_trust_one_service_account_of_this_cluster_only():
    (statement,) = pod_identity_trust_policy(PARTITION, REGION, ACCOUNT, CLUSTER, "kube-system", "karpenter")["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # The session tags EKS Pod Identity adds to its AssumeRole request (pod-id-abac.html).
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": ACCOUNT,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "karpenter",
        },
        "ArnEquals": {"aws:SourceArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"},
    }


def _normalised(statements: list[dict[str, Any]]) -> str:
    # YAML reads `aws:SecureTransport: false` as a boolean; IAM compares it as the string "false".
    return json.dumps(statements, sort_keys=True).replace(": false", ': "false"')


RULE_ARNS = [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/research-{n}" for n in ("spot", "health")]


def test_queue_policy_is_upstreams_narrowed_to_the_interruption_rules(upstream):
    expected = json.loads(_fill(_normalised(upstream["KarpenterInterruptionQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"])))
    ours = karpenter_iam.interruption_queue_policy(QUEUE_ARN, RULE_ARNS)
    assert ours["Id"] == upstream["KarpenterInterruptionQueuePolicy"]["Properties"]["PolicyDocument"]["Id"]
    allow, deny = ours["Statement"]
    # Upstream's TLS-only deny, as it is.
    assert json.loads(_normalised([deny])) == [s for s in expected if s.get("Sid") == "DenyHTTP"]
    (upstream_allow,) = [s for s in expected if s.get("Effect") == "Allow"]
    assert allow["Action"] == upstream_allow["Action"]
    assert allow["Resource"] == upstream_allow["Resource"] == QUEUE_ARN
    # Narrowed: EventBridge only, and only from the rules that name this queue as their target.
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": RULE_ARNS}}


def test_queue_keeps_messages_as_briefly_as_upstreams_and_is_encrypted(upstream):
    properties = upstream["KarpenterInterruptionQueue"]["Properties"]
    assert properties["MessageRetentionPeriod"] == INTERRUPTION_QUEUE_RETENTION_SECONDS
    assert properties["SqsManagedSseEnabled"] is True


def test_interruption_rules_are_upstreams(upstream):
    expected = {
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in upstream.values()
        if r["Type"] == "AWS::Events::Rule"
    }
    assert set(karpenter_iam.INTERRUPTION_EVENTS.values()) == expected
    assert len(karpenter_iam.INTERRUPTION_EVENTS) == len(expected) == 5


def test_node_role_has_upstreams_managed_policies(upstream):
    arns = upstream["KarpenterNodeRole"]["Properties"]["ManagedPolicyArns"]
    # Upstream attaches AmazonSSMManagedInstanceCore too; here it is opt-in per stack (cluster.nodeSsmAccess).
    assert {arn.rsplit("/", 1)[1] for arn in arns} == set(node_policy_names(ssm_access=True))
    assert set(NODE_MANAGED_POLICIES) < set(node_policy_names(ssm_access=True))


def test_a_role_shared_by_several_namespaces_trusts_that_service_account_in_each_only():
    (statement,) = pod_identity_trust_policy(PARTITION, REGION, ACCOUNT, CLUSTER, ["team-b", "team-a"], "training")["Statement"]
    assert statement["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == ["team-a", "team-b"]
    assert statement["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == "training"
