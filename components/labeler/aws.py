"""The EC2 side: one ``DescribeInstanceTopology`` call for the node's own instance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import boto3
import botocore.config
import botocore.exceptions

THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestThrottled"}
)
"""Error codes EC2 (``RequestLimitExceeded``) and the AWS SDKs' shared retry rules use for throttling."""

TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout", "RequestExpired"}
)
"""Server-side error codes worth retrying as they are."""

CLIENT_CONFIG = botocore.config.Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=5,
    read_timeout=20,
    user_agent_extra="eks-gpu-training-topology-labeler",
)
"""botocore retries a blip quickly by itself; longer throttling is left to the labeler's own backoff,
which waits minutes rather than seconds. The timeouts keep one call well inside the liveness window."""


@dataclass(frozen=True)
class InstanceTopology:
    """What EC2 reports of one instance's place in the network."""

    instance_type: str
    network_nodes: tuple[str, ...]


def ec2_client(region: str) -> Any:
    """An EC2 client for the node's region; credentials come from EKS Pod Identity."""
    return boto3.client("ec2", region_name=region, config=CLIENT_CONFIG)


def describe_topology(client: Any, instance_id: str) -> Optional[InstanceTopology]:
    """The instance's topology, or None when EC2 has none for it: the instance type is not
    supported (EC2 then leaves it out of ``Instances``) or the data is not there yet."""
    response = client.describe_instance_topology(InstanceIds=[instance_id])
    for instance in response.get("Instances", []):
        if instance.get("InstanceId") == instance_id and instance.get("NetworkNodes"):
            return InstanceTopology(instance.get("InstanceType", ""), tuple(instance["NetworkNodes"]))
    return None


def error_code(error: BaseException) -> Optional[str]:
    """The AWS error code of a botocore ``ClientError``; None for anything else."""
    if isinstance(error, botocore.exceptions.ClientError):
        return error.response.get("Error", {}).get("Code")
    return None


def is_throttling(error: BaseException) -> bool:
    """Whether EC2 asked the caller to slow down."""
    return error_code(error) in THROTTLING_CODES


def is_transient(error: BaseException) -> bool:
    """Whether the call may succeed as it is a little later (throttling, server errors, network)."""
    if isinstance(error, botocore.exceptions.ClientError):
        code = error_code(error)
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in THROTTLING_CODES or code in TRANSIENT_CODES or status >= 500
    return isinstance(
        error,
        (
            botocore.exceptions.ConnectionError,
            botocore.exceptions.HTTPClientError,
            botocore.exceptions.CredentialRetrievalError,
        ),
    )
