"""The in-cluster-only mode: deploy the stack's Kubernetes half to a cluster whose AWS half (VPC,
cluster, node groups, IAM) another program or team manages, through a kubeconfig alone."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

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

