"""The cluster's configuration: network, the EKS cluster itself, the system node group."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from .base import _AZ, SUPPORTED_KUBERNETES_VERSIONS, AmiType, InstanceType, _enum_error, _Model, supported_version


class SubnetConfig(_Model):
    """A private subnet the cluster and its nodes use."""

    id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$")
    """Subnet ID (required)."""
    availability_zone: str = Field(pattern=_AZ)
    """Availability zone of the subnet, e.g. ``us-west-2a`` (required; placement groups are per AZ)."""


class NetworkConfig(_Model):
    """The VPC the cluster lives in."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    """VPC ID (required)."""
    subnets: list[SubnetConfig] = Field(min_length=1)
    """Private subnets for the control plane ENIs and the nodes, with their AZs (required)."""


class ClusterConfig(_Model):
    """The EKS cluster: created here with pulumi-eks, or an existing one adopted by name."""

    name: str = Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
    """EKS cluster name (required): the cluster to create, or the existing one to adopt."""
    create: bool = True
    """Create the cluster (true) or adopt an existing cluster of that name (false). Default: true."""
    kubernetes_version: Annotated[str, supported_version(SUPPORTED_KUBERNETES_VERSIONS)] = "1.34"
    """Kubernetes version of a created cluster. Default: 1.34."""
    endpoint_public_access: bool = True
    """Expose the API server endpoint publicly (a created cluster). Default: true."""
    endpoint_private_access: bool = True
    """Expose the API server endpoint inside the VPC (a created cluster). Default: true."""
    admin_principal_arns: list[str] = []
    """IAM role/user ARNs granted cluster-admin through EKS access entries (a created cluster). Default: none."""
    enabled_log_types: list[str] = ["api", "audit", "authenticator"]
    """Control-plane log types sent to CloudWatch (a created cluster). Default: api, audit, authenticator."""
    node_ssm_access: bool = False
    """Attach AmazonSSMManagedInstanceCore to every node role this stack creates, so Session Manager can open a shell on a node (root on every job's data). Default: false."""

    @field_validator("admin_principal_arns")
    @classmethod
    def _principal_arns(cls, values: list[str]) -> list[str]:
        pattern = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
        for value in values:
            if not pattern.match(value):
                raise PydanticCustomError(
                    "arn", f"'{value}' is not an IAM role or user ARN (arn:<partition>:iam::<account>:role/<name>)"
                )
        return values

    @field_validator("enabled_log_types")
    @classmethod
    def _log_types(cls, values: list[str]) -> list[str]:
        allowed = aws_enums.eks_log_types()
        for value in values:
            if value not in allowed:
                raise _enum_error(value, allowed, "an EKS log type", "botocore eks LogType")
        return values


class SystemNodeGroupConfig(_Model):
    """A small untainted managed node group for controllers (Karpenter, the GPU Operator's operator, CoreDNS)."""

    enabled: bool = True
    """Create the system node group. Default: true (an adopted cluster that already runs its controllers elsewhere may turn it off)."""
    instance_types: list[InstanceType] = Field(default=["m7i.xlarge"], min_length=1)
    """Instance types of system nodes. Default: m7i.xlarge."""
    ami_type: AmiType = "AL2023_x86_64_STANDARD"
    """EKS AMI type of system nodes. Default: AL2023_x86_64_STANDARD."""
    min_size: int = Field(default=2, ge=0)
    """Minimum number of system nodes. Default: 2 (controllers survive one node's loss)."""
    desired_size: int = Field(default=2, ge=0)
    """Number of system nodes at creation; later changes are left to autoscalers. Default: 2."""
    max_size: int = Field(default=4, ge=1)
    """Maximum number of system nodes. Default: 4."""
    disk_size_gib: int = Field(default=50, ge=20, le=16384)
    """Root volume size of system nodes in GiB. Default: 50."""
