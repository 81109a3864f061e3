"""The cluster's configuration: the EKS cluster itself and the system node group (the network is in ``network``)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from ..facts.iam_principals import PRINCIPAL_ARN_PATTERN, iam_principal
from ..facts.kubernetes_versions import DEFAULT_KUBERNETES_VERSION
from .base import SUPPORTED_KUBERNETES_VERSIONS, AmiType, InstanceType, _enum_error, _Model, supported_version
from .problems import Problem, _collector
from .inputs import NodeCount, PositiveNodeCount, ResourceInput, TextOrOutput, is_unknown

ClusterName = Annotated[TextOrOutput, ResourceInput(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$", "an EKS cluster name")]
"""An EKS cluster name, or an Output that names one (e.g. a stack reference's)."""
SecurityGroupId = Annotated[TextOrOutput, ResourceInput(r"^sg-[0-9a-f]{8,17}$", "a security group ID", "sg-...")]
"""A security group ID, or the ``id`` Output of a security group made in the same program."""
PRINCIPAL_ARN_HINT = "arn:<partition>:iam::<account>:role/<name>"
PrincipalArn = Annotated[TextOrOutput, ResourceInput(PRINCIPAL_ARN_PATTERN, "an IAM role or user ARN", PRINCIPAL_ARN_HINT)]
"""An IAM role or user ARN, or the ``arn`` Output of a role made in the same program."""

WORLD_CIDR = "0.0.0.0/0"
"""The CIDR that opens a public API endpoint to the whole internet; it must be written out."""

ENDPOINT_DOC = "docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html"
"""EKS cluster-endpoint documentation: who can reach a public and a private API endpoint."""

UPGRADE_POLICY_DOC = "docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html"
"""EKS cluster upgrade policy: what a cluster does at the end of its version's standard support."""

DEFAULT_SUPPORT_TYPE = "EXTENDED"
"""EKS's own upgrade policy for a cluster created through its API (UpgradePolicyRequest: "The default
value is EXTENDED"; docs.aws.amazon.com/eks/latest/userguide/enable-extended-support.html): the
default here too, so a cluster this stack already runs keeps the policy it has."""

RELEASE_VERSION_PATTERN = r"^\d+\.\d+\.\d+-\d{8}$|^\d+\.\d+\.\d+(-[0-9a-f]{7,8})?$"
"""An EKS AMI release version: ``1.34.2-20251120`` (Amazon Linux) or ``1.50.0-ab12cd34``
(Bottlerocket), as listed on github.com/awslabs/amazon-eks-ami/releases and the Bottlerocket releases."""


class ClusterConfig(_Model):
    """The EKS cluster: created here with pulumi-eks, or an existing one adopted by name."""

    name: ClusterName
    """EKS cluster name (required): the cluster to create, or the existing one to adopt."""
    create: bool = True
    """Create the cluster (true) or adopt an existing cluster of that name (false). Default: true."""
    kubernetes_version: Annotated[str, supported_version(SUPPORTED_KUBERNETES_VERSIONS)] = DEFAULT_KUBERNETES_VERSION
    """Kubernetes version of a created cluster (components/facts/kubernetes_versions.py lists what each needs). Default: 1.35."""
    endpoint_public_access: bool = True
    """Expose the API server endpoint publicly (a created cluster); needs `endpointPublicAccessCidrs`. Default: true."""
    endpoint_public_access_cidrs: list[str] = []
    """IPv4 CIDRs that may reach the public endpoint (a created cluster); required with a public endpoint, `0.0.0.0/0` opens it to the internet and must be written out. Default: none."""
    endpoint_private_access: bool = True
    """Expose the API server endpoint inside the VPC (a created cluster). Default: true."""
    endpoint_private_access_cidrs: list[str] = []
    """CIDRs (VPN, CI runners, peered VPCs) let in on port 443 of the cluster security group to reach the private endpoint (a created cluster). Default: none (only the cluster's own nodes)."""
    endpoint_private_access_security_group_ids: list[SecurityGroupId] = []
    """Security groups (e.g. a CI runner's) let in on port 443 of the cluster security group to reach the private endpoint (a created cluster). Default: none."""
    protect: bool = False
    """Protect the cluster, GPU node groups and their placement groups (unless a pool sets its own `protect`) and the FSx file system from deletion (Pulumi `protect`), and turn on a created cluster's EKS deletion protection: destroying or replacing them fails until this is off and applied. Default: false."""
    support_type: str = DEFAULT_SUPPORT_TYPE
    """What EKS does when `kubernetesVersion` leaves standard support (a created cluster; `upgradePolicy.supportType`): `EXTENDED` keeps it up to 12 more months at extended support's price (aws.amazon.com/eks/pricing); `STANDARD` upgrades the control plane itself. Default: EXTENDED (EKS's own default)."""
    admin_principal_arns: list[PrincipalArn] = []
    """IAM role/user ARNs granted cluster-admin through EKS access entries (a created cluster), one entry each. The principal that created the cluster (its `eks-gpu-training/creator-principal` tag) is left out, since EKS gave it an entry: list people and the CI role alike. Default: none."""
    creator_principal_arn: Optional[str] = None
    """The IAM role or user that created the running cluster, for one without the `eks-gpu-training/creator-principal` tag (an older library version, or a `name` that is an Output): left out of `adminPrincipalArns`' entries and written to the tag. Default: none (the tag, else who runs `pulumi up`)."""
    enabled_log_types: list[str] = ["api", "audit", "authenticator"]
    """Control-plane log types sent to CloudWatch (a created cluster). Default: api, audit, authenticator."""
    coredns_version: Optional[str] = Field(default=None, pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
    """Build of the `coredns` EKS add-on to pin (a created cluster). Default: EKS's default build for the cluster's Kubernetes version, looked up at deployment (it moves with the version, not with each new build)."""
    pod_identity_agent_version: Optional[str] = Field(default=None, pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
    """Build of the `eks-pod-identity-agent` EKS add-on to pin (a created cluster). Default: EKS's default build for the cluster's Kubernetes version, looked up at deployment (it moves with the version, not with each new build)."""
    node_ssm_access: bool = False
    """Attach AmazonSSMManagedInstanceCore to every node role this stack creates, so Session Manager can open a shell on a node (root on every job's data). Default: false."""

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _quoted_version(cls, value: object) -> object:
        # YAML reads an unquoted 1.30 as the number 1.3; the version must reach EKS as text.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise PydanticCustomError(
                "unquoted_version",
                f"{value!r} was read as a number (YAML reads an unquoted 1.30 as 1.3); quote the version, "
                f"e.g. kubernetesVersion: \"{SUPPORTED_KUBERNETES_VERSIONS[-1]}\"",
            )
        return value

    @field_validator("creator_principal_arn")
    @classmethod
    def _creator(cls, value: Optional[str]) -> Optional[str]:
        # Compared with the running cluster's tag before anything registers, so never an Output.
        if value is not None and iam_principal(value) is None:
            raise PydanticCustomError("principal_arn", f"'{value}' is not an IAM role or user ARN ({PRINCIPAL_ARN_HINT})")
        return value

    @field_validator("endpoint_public_access_cidrs")
    @classmethod
    def _public_cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            _check_cidr(value, ipv6=False)
        return values

    @field_validator("endpoint_private_access_cidrs")
    @classmethod
    def _private_cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            _check_cidr(value, ipv6=True)
        return values

    @field_validator("support_type")
    @classmethod
    def _support_type(cls, value: str) -> str:
        allowed = aws_enums.eks_support_types()
        if value not in allowed:
            raise PydanticCustomError(
                "aws_enum",
                f"'{value}' is not an EKS support type (botocore eks SupportType); allowed: {', '.join(sorted(allowed))} "
                f"({UPGRADE_POLICY_DOC})",
            )
        return value

    @field_validator("enabled_log_types")
    @classmethod
    def _log_types(cls, values: list[str]) -> list[str]:
        allowed = aws_enums.eks_log_types()
        for value in values:
            if value not in allowed:
                raise _enum_error(value, allowed, "an EKS log type", "botocore eks LogType")
        return values


def _check_cidr(value: str, ipv6: bool) -> None:
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise PydanticCustomError("cidr", f"'{value}' is not a CIDR block ({error})") from None
    if network.version == 6 and not ipv6:
        raise PydanticCustomError("cidr", f"'{value}' is IPv6; EKS public access CIDRs are IPv4")


def validate_cluster_endpoint(cluster: ClusterConfig, path: str = "cluster") -> list[Problem]:
    """Who can reach the API endpoint of a created cluster. `pulumi up` installs Helm releases and
    Kubernetes objects through it, so a cluster nobody can reach fails halfway through its first
    deployment. EKS: with private access, "you must ensure that your Amazon EKS control plane
    security group contains rules to allow ingress traffic on port 443 from your connected
    network" (``ENDPOINT_DOC``)."""
    problems, problem = _collector(path)
    if not cluster.create:
        return problems
    private_sources = cluster.endpoint_private_access_cidrs or cluster.endpoint_private_access_security_group_ids
    if not (cluster.endpoint_public_access or cluster.endpoint_private_access):
        problem("endpointPrivateAccess", "must be true when endpointPublicAccess is false: EKS needs one API endpoint on")
    if cluster.endpoint_public_access and not cluster.endpoint_public_access_cidrs:
        problem(
            "endpointPublicAccessCidrs",
            "is required with endpointPublicAccess true: list the networks that may reach the public API "
            f"endpoint, or write {WORLD_CIDR} to open it to the whole internet deliberately",
        )
    if not cluster.endpoint_public_access and cluster.endpoint_public_access_cidrs:
        problem("endpointPublicAccessCidrs", "is set but endpointPublicAccess is false; remove it or turn the public endpoint on")
    if not cluster.endpoint_private_access and private_sources:
        key = "endpointPrivateAccessCidrs" if cluster.endpoint_private_access_cidrs else "endpointPrivateAccessSecurityGroupIds"
        problem(key, "is set but endpointPrivateAccess is false; remove it or turn the private endpoint on")
    if cluster.endpoint_private_access and not cluster.endpoint_public_access and not private_sources:
        problem(
            "endpointPrivateAccessCidrs",
            "a private-only endpoint is reachable only from the cluster security group, which opens port 443 "
            "to nothing else, and `pulumi up` installs Helm releases through it; list the networks "
            "`pulumi up` runs from (endpointPrivateAccessCidrs) or their security groups "
            f"(endpointPrivateAccessSecurityGroupIds) ({ENDPOINT_DOC})",
        )
    return problems


class SystemNodeGroupConfig(_Model):
    """A small untainted managed node group for controllers (Karpenter, the GPU Operator's operator, CoreDNS)."""

    enabled: bool = True
    """Create the system node group. Default: true; a stack whose cluster is adopted, or that deploys only its in-cluster half (`inCluster`), gets none unless `systemNodeGroup` is given."""
    instance_types: list[InstanceType] = Field(default=["m7i.xlarge"], min_length=1)
    """Instance types of system nodes. Default: m7i.xlarge."""
    ami_type: AmiType = "AL2023_x86_64_STANDARD"
    """EKS AMI type of system nodes. Default: AL2023_x86_64_STANDARD."""
    min_size: NodeCount = 2
    """Minimum number of system nodes. Default: 2 (controllers survive one node's loss)."""
    desired_size: NodeCount = 2
    """Number of system nodes at creation; later the size is left to autoscalers and people, and `pulumi up` keeps the running size. Default: 2."""
    max_size: PositiveNodeCount = 4
    """Maximum number of system nodes. Default: 4."""
    disk_size_gib: int = Field(default=50, ge=20, le=16384)
    """Encrypted gp3 root volume of system nodes in GiB. Default: 50."""
    release_version: Optional[str] = Field(default=None, pattern=RELEASE_VERSION_PATTERN)
    """EKS AMI release version to pin, e.g. 1.34.2-20251120; changing it rolls the nodes. Default: none (the latest AMI for the cluster version at creation)."""


def validate_admin_principals(cluster: ClusterConfig, path: str = "cluster") -> list[Problem]:
    """``adminPrincipalArns`` names each principal once: EKS keeps one access entry per principal and
    refuses a second, and two ARNs that differ only in the path or the name's case are one principal
    (``facts/iam_principals.py``), whose entry has one resource name. Outputs are not compared."""
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, arn in enumerate(cluster.admin_principal_arns):
        principal = None if is_unknown(arn) else iam_principal(arn)
        if principal is None:
            continue
        if principal.key in first:
            j = first[principal.key]
            other = cluster.admin_principal_arns[j]
            twice = f"is listed twice (as [{j}])" if arn == other else f"names the same principal as [{j}] ('{other}')"
            problems.append(
                Problem(
                    f"{path}.adminPrincipalArns[{i}]",
                    f"'{arn}' {twice}; EKS keeps one access entry per principal (IAM names are unique in an "
                    "account whatever the path, and case-insensitive) and refuses to create the second",
                )
            )
        first.setdefault(principal.key, i)
    return problems
