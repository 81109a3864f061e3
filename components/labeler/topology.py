"""Pure logic of the labeler: where the node's instance is, and which topology labels it lacks.

Nothing here talks to AWS or Kubernetes, so every rule is tested directly on plain data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

LAYER_LABEL_PREFIX = "topology.k8s.aws/network-node-layer-"
"""Prefix of the network-topology labels; layer 1 is the top of the hierarchy, the highest layer the
switch closest to the instance (the names EKS's cloud-controller-manager and Karpenter use)."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Well-known node label with the EC2 instance type (for reporting only)."""

REGION_LABEL = "topology.kubernetes.io/region"
"""Well-known node label with the node's region (set by the cloud provider at node initialisation)."""

# The zone may be empty: the AWS cloud provider accepts ``aws:////i-...`` (kubernetes/cloud-provider-aws
# parses the instance id from the last path segment and ignores an empty zone).
_PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[a-z0-9-]*)/(?P<instance_id>i-[0-9a-f]{8,17})$")
# An AZ name (us-west-2b, us-gov-west-1a, cn-north-1a) or a Local/Wavelength Zone name
# (us-west-2-lax-1a, us-east-1-wl1-bos-wlz-1) starts with its parent region's name.
_ZONE = re.compile(r"^(?P<region>[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)(?:[a-z]|-[a-z0-9-]+)$")
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


def layer_label(layer: int) -> str:
    """The label key of a network layer, counted from 1 at the top."""
    return f"{LAYER_LABEL_PREFIX}{layer}"


@dataclass(frozen=True)
class InstanceLocation:
    """Where a node's EC2 instance runs, read from the Node's ``spec.providerID``."""

    instance_id: str
    zone: str
    """Empty when the provider id names no zone (``aws:////i-...``)."""
    region: Optional[str]
    """None when the provider id names no zone: the caller finds the region elsewhere."""


def region_of_zone(zone: str) -> str:
    """The region an availability zone (or Local/Wavelength Zone) belongs to."""
    match = _ZONE.match(zone)
    if match is None:
        raise ValueError(f"{zone!r} is not an availability zone name")
    return match.group("region")


def parse_provider_id(provider_id: Optional[str]) -> InstanceLocation:
    """Instance id, zone and region from an EC2 node's ``spec.providerID``
    (``aws:///us-west-2b/i-0123456789abcdef0``, or ``aws:////i-...`` without a zone, then with no
    region); ``ValueError`` for anything else (no provider id yet, Fargate, hybrid nodes)."""
    match = _PROVIDER_ID.match(provider_id or "")
    if match is None:
        raise ValueError(f"{provider_id!r} is not an EC2 provider id (aws:///<zone>/<instance-id>)")
    zone = match.group("zone")
    return InstanceLocation(
        instance_id=match.group("instance_id"), zone=zone, region=region_of_zone(zone) if zone else None
    )


def topology_labels(network_nodes: Sequence[str]) -> dict[str, str]:
    """The label set for ``NetworkNodes`` as EC2 returns them (top to bottom, three layers or, on
    some newer instance types, four). A layer whose value is no valid label value is left out
    (``invalid_layers`` names it); the others keep their layer numbers, so they stay true."""
    return {
        layer_label(layer): node
        for layer, node in enumerate(network_nodes, start=1)
        if isinstance(node, str) and _LABEL_VALUE.match(node)
    }


def invalid_layers(network_nodes: Sequence[str]) -> dict[str, object]:
    """Layers whose network node is not a valid Kubernetes label value: ``{label key: value}``."""
    return {
        layer_label(layer): node
        for layer, node in enumerate(network_nodes, start=1)
        if not (isinstance(node, str) and _LABEL_VALUE.match(node))
    }


def missing_labels(network_nodes: Sequence[str], existing: Mapping[str, str]) -> dict[str, str]:
    """The topology labels the node lacks. A label already present is never part of the result,
    whatever its value: the labeler only fills gaps."""
    return {key: value for key, value in topology_labels(network_nodes).items() if key not in existing}


def differing_labels(network_nodes: Sequence[str], existing: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Topology labels present with a value other than EC2's: ``{key: (on the node, from EC2)}``.
    They are reported, never changed."""
    return {
        key: (existing[key], value)
        for key, value in topology_labels(network_nodes).items()
        if key in existing and existing[key] != value
    }


def label_patch(labels: Mapping[str, str], resource_version: Optional[str]) -> dict:
    """The Node patch that adds ``labels``. With the ``resourceVersion`` that was read, the API server
    rejects the patch (409 Conflict) if the node changed in between, so a label another controller set
    meanwhile is never overwritten; the labeler then reads the node again."""
    metadata: dict = {"labels": dict(labels)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}
