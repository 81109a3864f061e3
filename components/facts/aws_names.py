"""How long the AWS names the stack generates may be.

Pulumi names a resource that sets no name itself after its logical name plus ``-`` and 7 random hex
characters (auto-naming, www.pulumi.com/docs/iac/concepts/resources/names/), and pulumi-aws refuses
the resource at ``pulumi up`` when that exceeds the field's AWS limit. Other resources get an explicit
name from the stack. Either way the limit is AWS's: the numbers below come from botocore's service
models where the model states them, else from the API reference named beside them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import aws_enums

AUTONAME_SUFFIX_LENGTH = 8
"""What Pulumi auto-naming appends to a logical name: ``-`` and 7 random hex characters."""

UNIQUE_PREFIX_SUFFIX_LENGTH = 26
"""What the AWS provider appends to a ``*_name_prefix`` (terraform-plugin-sdk ``UniqueIDSuffixLength``:
a timestamp and a counter), e.g. to an EKS node group's ``nodeGroupNamePrefix``."""

NAME_LIMITS: dict[str, tuple[int, str]] = {
    "aws:iam/role:Role": (aws_enums.string_limits("iam", "roleNameType")[1], "IAM role name (botocore iam roleNameType)"),
    "aws:iam/policy:Policy": (aws_enums.string_limits("iam", "policyNameType")[1], "IAM policy name (botocore iam policyNameType)"),
    "aws:iam/rolePolicy:RolePolicy": (aws_enums.string_limits("iam", "policyNameType")[1], "IAM inline policy name (botocore iam policyNameType)"),
    "aws:ec2/launchTemplate:LaunchTemplate": (aws_enums.string_limits("ec2", "LaunchTemplateName")[1], "launch template name (botocore ec2 LaunchTemplateName)"),
    "aws:cloudwatch/eventRule:EventRule": (aws_enums.string_limits("events", "RuleName")[1], "EventBridge rule name (botocore events RuleName)"),
    "aws:ecr/repository:Repository": (aws_enums.string_limits("ecr", "RepositoryName")[1], "ECR repository name (botocore ecr RepositoryName)"),
    # EC2 API reference, CreateSecurityGroup: "GroupName ... Constraints: Up to 255 characters in length".
    "aws:ec2/securityGroup:SecurityGroup": (255, "security group name (EC2 CreateSecurityGroup)"),
    # EC2 API reference, CreatePlacementGroup: "GroupName ... Constraints: Up to 255 ASCII characters".
    "aws:ec2/placementGroup:PlacementGroup": (255, "placement group name (EC2 CreatePlacementGroup)"),
    # SQS API reference, CreateQueue: "A queue name can have up to 80 characters".
    "aws:sqs/queue:Queue": (80, "SQS queue name (SQS CreateQueue)"),
    # EKS API reference, CreateNodegroup: "nodegroupName ... can't be longer than 63 characters".
    "aws:eks/nodeGroup:NodeGroup": (63, "EKS node group name (EKS CreateNodegroup)"),
    "eks:index:ManagedNodeGroup": (63, "EKS node group name (EKS CreateNodegroup)"),
}
"""Longest name AWS accepts, by the Pulumi type of the resource, with what it is and the source."""


@dataclass(frozen=True)
class PhysicalName:
    """The AWS name a resource will get: its own ``name``, or its logical name auto-named by Pulumi."""

    resource_type: str
    """Pulumi type token, e.g. ``aws:iam/role:Role``."""
    name: str
    """The explicit name, or the logical name Pulumi auto-names from."""
    autonamed: bool
    """Whether Pulumi appends its random suffix."""
    prefix: bool = False
    """Whether ``name`` is a name prefix the AWS provider completes with a unique suffix."""

    @property
    def suffix_length(self) -> int:
        """Characters appended to ``name`` before it reaches AWS."""
        if self.prefix:
            return UNIQUE_PREFIX_SUFFIX_LENGTH
        return AUTONAME_SUFFIX_LENGTH if self.autonamed else 0

    @property
    def length(self) -> int:
        """Characters of the name AWS receives."""
        return len(self.name) + self.suffix_length

    def problem(self) -> str | None:
        """Why AWS would refuse the name, or None."""
        limit, what = NAME_LIMITS[self.resource_type]
        if self.length <= limit:
            return None
        if self.prefix:
            shown = f"'{self.name}' plus a {UNIQUE_PREFIX_SUFFIX_LENGTH}-character unique suffix"
            suffix = ""
        elif self.autonamed:
            shown = f"'{self.name}-xxxxxxx'"
            suffix = f", {AUTONAME_SUFFIX_LENGTH} of them Pulumi's random suffix"
        else:
            shown, suffix = f"'{self.name}'", ""
        return f"makes the {what} {shown}: {self.length} characters{suffix}, over AWS's limit of {limit}"
