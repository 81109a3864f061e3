"""Small pieces of Kubernetes scheduling semantics, for asserting on generated values."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from eks_gpu_training.aws.gpu_node_group import gpu_taint

EKS_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
"""EKS node group API spelling of taint effects -> Kubernetes spelling."""


def gpu_node_taint() -> dict[str, str]:
    """The GPU taint as it appears on a Kubernetes node."""
    taint = gpu_taint()
    return {**taint, "effect": EKS_TAINT_EFFECTS[taint["effect"]]}


def toleration_matches(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """Whether one toleration tolerates a taint (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        if not toleration.get("key"):
            return False  # an empty key is only valid with Exists
        return (toleration.get("value") or "") == taint.get("value", "")
    return False


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Whether any toleration in the list tolerates the taint."""
    return any(toleration_matches(t, taint) for t in tolerations or [])
