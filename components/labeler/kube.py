"""The Kubernetes side: read the labeler's own Node, and add labels to it with one patch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import urllib3.exceptions
from kubernetes import client, config

from .topology import label_patch

PATCH_CONTENT_TYPE = "application/strategic-merge-patch+json"
"""A strategic merge patch of ``metadata.labels`` adds keys and leaves every other label alone. The
client must be told: for ``patch_node`` it otherwise picks ``application/json-patch+json``."""

REQUEST_TIMEOUT = (5, 30)
"""(connect, read) seconds for each API call, well inside the liveness window."""


@dataclass(frozen=True)
class NodeView:
    """What the labeler reads of its Node."""

    name: str
    provider_id: Optional[str]
    resource_version: Optional[str]
    labels: Mapping[str, str] = field(default_factory=dict)


def in_cluster_api() -> client.CoreV1Api:
    """A client that authenticates with the pod's ServiceAccount token."""
    config.load_incluster_config()
    return client.CoreV1Api()


def read_node(api: client.CoreV1Api, name: str) -> NodeView:
    """GET the Node."""
    node = api.read_node(name, _request_timeout=REQUEST_TIMEOUT)
    metadata, spec = node.metadata, node.spec
    return NodeView(
        name=name,
        provider_id=spec.provider_id if spec else None,
        resource_version=metadata.resource_version if metadata else None,
        labels=dict((metadata.labels if metadata else None) or {}),
    )


def add_node_labels(api: client.CoreV1Api, node: NodeView, labels: Mapping[str, str]) -> Any:
    """PATCH the Node with ``labels``, conditional on the ``resourceVersion`` that was read."""
    return api.patch_node(
        node.name,
        label_patch(labels, node.resource_version),
        _content_type=PATCH_CONTENT_TYPE,
        _request_timeout=REQUEST_TIMEOUT,
    )


def api_status(error: BaseException) -> Optional[int]:
    """The HTTP status of a Kubernetes API error; None for anything else."""
    if isinstance(error, client.exceptions.ApiException):
        return error.status
    return None


def is_transient(error: BaseException) -> bool:
    """Conflict (the node changed since it was read), throttling, server errors and network errors."""
    status = api_status(error)
    if status is not None:
        return status in (409, 429) or status >= 500
    return isinstance(error, (urllib3.exceptions.HTTPError, OSError))
