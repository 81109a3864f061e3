"""The Karpenter controller's AWS permissions, interruption queue policy and event patterns.

Modelled statement by statement on upstream's own getting-started template (Karpenter 1.14,
``website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml``):
the same Sids, actions, resources and conditions, with ``${ClusterName}``, ``${AWS::Region}``,
``${AWS::AccountId}`` and ``${AWS::Partition}`` filled in for this cluster. Each function returns a
plain policy document (a dict), so the tests compare it with upstream's without the Pulumi engine.
"""

from __future__ import annotations

from typing import Any, Sequence

from .iam import cluster_arn

PolicyDocument = dict[str, Any]

EC2_SERVICE_PRINCIPALS = ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
"""Services the node role may be passed to (upstream lists both the global and the China principal)."""

def _document(*statements: dict[str, Any]) -> PolicyDocument:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _cluster_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


def node_lifecycle_policy(partition: str, region: str, cluster_name: str) -> PolicyDocument:
    """Launch, tag and terminate this cluster's Karpenter instances and launch templates
    (upstream ``KarpenterControllerNodeLifecyclePolicy``)."""
    arn = f"arn:{partition}:ec2:{region}"
    tag = _cluster_tag(cluster_name)
    tagged_kinds = ["fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"]
    owned_resource = {"StringEquals": {f"aws:ResourceTag/{tag}": "owned"}, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}
    return _document(
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"{arn}::image/*",
                f"{arn}::snapshot/*",
                f"{arn}:*:security-group/*",
                f"{arn}:*:subnet/*",
                f"{arn}:*:capacity-reservation/*",
                f"{arn}:*:placement-group/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{arn}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": owned_resource,
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": [f"{arn}:*:{kind}/*" for kind in tagged_kinds],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {
                "StringEquals": {f"aws:RequestTag/{tag}": "owned", "aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": [f"{arn}:*:{kind}/*" for kind in tagged_kinds],
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    f"aws:RequestTag/{tag}": "owned",
                    "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{arn}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                **owned_resource,
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{arn}:*:instance/*", f"{arn}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": owned_resource,
        },
    )


def iam_integration_policy(partition: str, region: str, account_id: str, cluster_name: str, node_role_arn: str) -> PolicyDocument:
    """Pass the node role to EC2 and manage the instance profiles Karpenter makes for it
    (upstream ``KarpenterControllerIAMIntegrationPolicy``)."""
    profiles = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    tag = _cluster_tag(cluster_name)
    request_tags = {
        f"aws:RequestTag/{tag}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
        "aws:RequestTag/topology.kubernetes.io/region": region,
    }
    resource_tags = {f"aws:ResourceTag/{tag}": "owned", "aws:ResourceTag/topology.kubernetes.io/region": region}
    return _document(
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": EC2_SERVICE_PRINCIPALS}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": request_tags,
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {**resource_tags, **request_tags},
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Condition": {
                "StringEquals": resource_tags,
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
    )


def eks_integration_policy(partition: str, region: str, account_id: str, cluster_name: str) -> PolicyDocument:
    """Read this cluster's endpoint and CA (upstream ``KarpenterControllerEKSIntegrationPolicy``)."""
    return _document(
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": cluster_arn(partition, region, account_id, cluster_name),
            "Action": "eks:DescribeCluster",
        }
    )


def interruption_policy(queue_arn: str) -> PolicyDocument:
    """Consume the interruption queue (upstream ``KarpenterControllerInterruptionPolicy``)."""
    return _document(
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        }
    )


def zonal_shift_policy(partition: str, region: str, account_id: str, cluster_name: str) -> PolicyDocument:
    """Read this cluster's zonal-shift status (upstream ``KarpenterControllerZonalShiftPolicy``)."""
    return _document(
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": {
                "StringEquals": {
                    "arc-zonal-shift:ResourceIdentifier": cluster_arn(partition, region, account_id, cluster_name)
                }
            },
        }
    )


def resource_discovery_policy(partition: str, region: str, account_id: str) -> PolicyDocument:
    """Discover instance types, prices, AMIs, subnets, security groups, placement groups and
    reservations in this region (upstream ``KarpenterControllerResourceDiscoveryPolicy``)."""
    return _document(
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Resource": "*", "Action": "iam:ListInstanceProfiles"},
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:iam::{account_id}:instance-profile/*",
            "Action": "iam:GetInstanceProfile",
        },
    )


def controller_policies(
    partition: str, region: str, account_id: str, cluster_name: str, node_role_arn: str, queue_arn: str
) -> dict[str, PolicyDocument]:
    """Every controller policy by its role (the suffix of upstream's policy name)."""
    return {
        "node-lifecycle": node_lifecycle_policy(partition, region, cluster_name),
        "iam-integration": iam_integration_policy(partition, region, account_id, cluster_name, node_role_arn),
        "eks-integration": eks_integration_policy(partition, region, account_id, cluster_name),
        "interruption": interruption_policy(queue_arn),
        "zonal-shift": zonal_shift_policy(partition, region, account_id, cluster_name),
        "resource-discovery": resource_discovery_policy(partition, region, account_id),
    }


def interruption_queue_policy(queue_arn: str, rule_arns: Sequence[str]) -> PolicyDocument:
    """Let EventBridge deliver to the queue from the named interruption rules only, over TLS only.

    Upstream's ``EC2InterruptionPolicy`` lets ``events.amazonaws.com`` and ``sqs.amazonaws.com``
    send with no condition, so any EventBridge rule in any account could fill the queue with fake
    interruption events (Karpenter would then drain and delete nodes). EventBridge sets
    ``aws:SourceArn`` to the rule's ARN when it delivers to SQS, and AWS recommends conditioning on it
    (docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions);
    no SQS service principal is needed for EventBridge delivery."""
    return {
        "Id": "EC2InterruptionPolicy",
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowInterruptionRules",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": list(rule_arns)}},
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                "Principal": "*",
            },
        ],
    }


INTERRUPTION_EVENTS: dict[str, tuple[str, str]] = {
    "health": ("aws.health", "AWS Health Event"),
    "spot": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "reservation": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}
"""EventBridge (source, detail-type) pairs upstream routes to the interruption queue, by rule role;
the roles are short since each names an auto-named rule (64 characters). Spot warnings stay although
training pools never use spot: the queue serves every NodePool of the cluster."""


def interruption_event_pattern(source: str, detail_type: str) -> dict[str, list[str]]:
    """The EventBridge pattern of one interruption rule."""
    return {"source": [source], "detail-type": [detail_type]}
