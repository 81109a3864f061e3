"""The configuration of ``eks-gpu-training-verify``'s access: an optional read-only ClusterRole the
stack ships for the people and pipelines that run the command."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _Model

VERIFIER_GROUP = "eks-gpu-training-verifiers"
"""Kubernetes group the verifier ClusterRole is bound to by default."""


class VerifyConfig(_Model):
    """Read-only access for `eks-gpu-training-verify`: a ClusterRole with get and list on exactly what the command reads, bound to a Kubernetes group."""

    cluster_role: bool = False
    """Create the ClusterRole `eks-gpu-training-verify` and bind it to `group`. Default: false (the command then needs credentials that may read the same objects, e.g. the cluster admin's)."""
    group: str = Field(default=VERIFIER_GROUP, min_length=1, max_length=253)
    """Kubernetes group the ClusterRole is bound to; give an IAM principal this group with an EKS access entry (`aws eks create-access-entry --kubernetes-groups`). Default: eks-gpu-training-verifiers."""

    @field_validator("group")
    @classmethod
    def _not_system(cls, value: str) -> str:
        # Kubernetes reserves the system: prefix for its own users and groups (RBAC "Referring to
        # subjects"), and an EKS access entry refuses a group named so.
        if value.startswith("system:"):
            raise PydanticCustomError("reserved", f"'{value}': the 'system:' prefix is reserved for Kubernetes' own groups")
        return value
