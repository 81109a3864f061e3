"""Objects the cluster tier's tests make: probe pods, and new runs of a stack's training job."""

from __future__ import annotations

import copy
import uuid
from typing import Any, Optional

from eks_gpu_training.workloads.kueue_queues import LOCAL_QUEUE

from tests.support.kueue import QUEUE_LABEL

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def pod_manifest(name: str, namespace: str, *, requests: Optional[dict[str, str]] = None,
                 tolerations: Optional[list[dict[str, str]]] = None, node_selector: Optional[dict[str, str]] = None,
                 priority_class: Optional[str] = None, labels: Optional[dict[str, str]] = None,
                 **spec: Any) -> dict[str, Any]:
    """A pause pod; an extended resource requested (``nvidia.com/gpu``) is its limit too, as the API requires."""
    container: dict[str, Any] = {"name": "main", "image": PAUSE_IMAGE}
    if requests:
        limits = {k: v for k, v in requests.items() if "/" in k}
        container["resources"] = {"requests": dict(requests), **({"limits": limits} if limits else {})}
    pod_spec: dict[str, Any] = {"containers": [container], **spec}
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": pod_spec,
    }


def submitted_run(job: dict[str, Any], name: str, *, parallelism: Optional[int] = None) -> dict[str, Any]:
    """A new run of a rendered Job under ``name``, submitted to the queue a user submits to
    (``gpu-queue``) instead of the one the stack holds its own job in; ``parallelism`` pods, else
    the job's own."""
    run = copy.deepcopy(job)
    run["metadata"] = {"name": name, "namespace": job["metadata"]["namespace"],
                       "labels": {**job["metadata"]["labels"], QUEUE_LABEL: LOCAL_QUEUE}}
    run["spec"]["template"]["metadata"]["labels"][QUEUE_LABEL] = LOCAL_QUEUE
    if parallelism is not None:
        run["spec"]["parallelism"] = run["spec"]["completions"] = parallelism
    return run


def submitted_group_run(obj: dict[str, Any], name: str, *, nodes: Optional[int] = None) -> dict[str, Any]:
    """A new run of a rendered JobSet or TrainJob under ``name``, submitted to ``gpu-queue``;
    ``nodes`` pods (one per node), else the object's own."""
    run = copy.deepcopy(obj)
    run["metadata"] = {"name": name, "namespace": obj["metadata"]["namespace"],
                       "labels": {**obj["metadata"]["labels"], QUEUE_LABEL: LOCAL_QUEUE}}
    if nodes is not None and run["kind"] == "JobSet":
        (replicated,) = run["spec"]["replicatedJobs"]
        replicated["template"]["spec"]["parallelism"] = replicated["template"]["spec"]["completions"] = nodes
    elif nodes is not None:
        run["spec"]["trainer"]["numNodes"] = nodes
    return run
