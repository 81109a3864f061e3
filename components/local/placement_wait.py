"""Waiting until the local cluster has placed every pod: the controllers have made their pods and
the scheduler has bound each to a node, or the pods left pending with the scheduler's reasons."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..healthgate.gate_api import list_items
from .errors import LocalClusterError
from .platform import Applier

if TYPE_CHECKING:  # the Kubernetes client is the [local] extra's, imported where it is used
    from kubernetes.client import V1ObjectMeta

UNBOUND = "status.phase=Pending,spec.nodeName="
"""The field selector of a pod no scheduler has bound yet."""


def pending_pods(applier: Applier) -> list[dict[str, Any]]:
    """Pods not bound to a node, with the scheduler's latest reason."""
    pods = applier.core.list_pod_for_all_namespaces(field_selector=UNBOUND).items
    pending = []
    for pod in pods:
        reason = ""
        for condition in (pod.status.conditions if pod.status else None) or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                reason = condition.message or condition.reason or ""
        pending.append({"pod": _object_name(pod.metadata), "reason": reason})
    return pending


def _object_name(metadata: Optional[V1ObjectMeta]) -> str:
    """``namespace/name`` of an object the API server listed (which always carries its metadata)."""
    return f"{metadata.namespace}/{metadata.name}" if metadata is not None else "(an object without metadata)"


def _any_unbound(applier: Applier) -> bool:
    """Whether any pod waits for the scheduler: one item asked for, read raw. With a fleet's
    thousands of DaemonSet pods pending, the whole list every half second was most of the wait's
    own cost and a good part of the API server's."""
    return bool(list_items(applier.core.list_pod_for_all_namespaces, field_selector=UNBOUND, limit=1))


def wait_until_placed(applier: Applier, *, timeout: float, check: Callable[[], None]) -> None:
    """Wait until the controllers have made their pods and every pod is bound to a node."""
    deadline = time.monotonic() + timeout
    settled_since: Optional[float] = None
    while time.monotonic() < deadline:
        check()
        if not _any_unbound(applier) and not _workloads_without_pods(applier):
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since >= 2:
                return
        else:
            settled_since = None
        time.sleep(0.5)
    details = [f"{p['pod']}: {p['reason'] or 'not scheduled yet'}" for p in pending_pods(applier)]
    details += [f"{w}: its controller has not made all its pods" for w in _workloads_without_pods(applier)]
    raise LocalClusterError(
        f"not every pod was placed after {timeout:.0f} s ({len(details)} waiting)",
        "read the reasons below: a pod the stack's fleet cannot hold is a finding about the stack",
        details="  " + "\n  ".join(details))


def _workloads_without_pods(applier: Applier) -> list[str]:
    from kubernetes import client

    apps = client.AppsV1Api(applier.api_client)
    missing = []
    for deployment in apps.list_deployment_for_all_namespaces().items:
        wanted = deployment.spec.replicas if deployment.spec and deployment.spec.replicas is not None else 1
        if ((deployment.status.replicas if deployment.status else None) or 0) < wanted:
            missing.append(f"Deployment {_object_name(deployment.metadata)}")
    for daemonset in apps.list_daemon_set_for_all_namespaces().items:
        status, generation = daemonset.status, daemonset.metadata.generation if daemonset.metadata else None
        if status is None or status.observed_generation != generation or (
            (status.current_number_scheduled or 0) < (status.desired_number_scheduled or 0)
        ):
            missing.append(f"DaemonSet {_object_name(daemonset.metadata)}")
    return missing
