"""The in-cluster-only mode: deploy the stack's Kubernetes half to a cluster whose AWS half (VPC,
cluster, node groups, IAM) another program or team manages, through a kubeconfig alone."""

from __future__ import annotations

import ipaddress
from typing import Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _Model
from .inputs import InputText


class InClusterConfig(_Model):
    """Deploy only what needs Kubernetes alone (GPU Operator, EFA device plugin, Kueue and its queues, scheduling policies, training jobs, smoke test, pre-flight checks, the verify role) to the cluster a kubeconfig reaches: no AWS provider, nothing created in AWS."""

    enabled: bool = False
    """Deploy the in-cluster half alone (`GpuTrainingInCluster`). Default: false (the whole stack, `GpuTrainingPlatform`)."""
    kubeconfig: Optional[InputText] = None
    """The kubeconfig: a file path or the document itself (what the Kubernetes provider's `kubeconfig` takes); in a program it may be an Output. Required when `enabled`."""
    context: Optional[str] = Field(default=None, min_length=1)
    """The kubeconfig context to use. Default: the kubeconfig's current context."""
    api_server_cidrs: list[str] = []
    """Where the cluster's API server connects from (the cluster's subnets' CIDRs, e.g. `10.0.0.0/18`): only these reach the Kueue, JobSet and Trainer webhooks (their NetworkPolicies). Default: none, the webhook ports open to every source (the half reads nothing from AWS)."""

    @field_validator("api_server_cidrs")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr)
            except ValueError:
                raise PydanticCustomError(
                    "cidr", f"'{cidr}' is not a network such as 10.0.0.0/18 (an address and a prefix length, host bits zero)"
                ) from None
        return value
