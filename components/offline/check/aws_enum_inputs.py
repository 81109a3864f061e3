"""AWS enumeration inputs against botocore's service models.

Each rule names an input by the end of its key path and the model shape its values must come
from; any ``aws:*`` or ``eks:*`` resource whose inputs have such a path is checked, so resources
other components add are covered without a rule of their own. Kubernetes objects that select EC2
instance types by the well-known node labels (NodePool requirements, node selectors, node
affinity) are checked the same way.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, Optional

from ...facts.aws_enums import ec2_instance_types, enum_values, suggestion
from ..render.markers import is_placeholder

LIST_ITEM = "[]"

ENUM_INPUTS: tuple[tuple[tuple[str, ...], str, str, Optional[str]], ...] = (
    # (key path suffix, service, shape, only for types starting with)
    (("instanceType",), "ec2", "InstanceType", None),
    (("instanceTypes", LIST_ITEM), "ec2", "InstanceType", None),
    (("amiType",), "eks", "AMITypes", None),
    (("capacityType",), "eks", "CapacityTypes", None),
    (("taints", LIST_ITEM, "effect"), "eks", "TaintEffect", None),
    (("enabledClusterLogTypes", LIST_ITEM), "eks", "LogType", None),
    (("authenticationMode",), "eks", "AuthenticationMode", None),
    (("accessScope", "type"), "eks", "AccessScopeType", None),
    (("resolveConflictsOnCreate",), "eks", "ResolveConflicts", None),
    (("resolveConflictsOnUpdate",), "eks", "ResolveConflicts", None),
    (("strategy",), "ec2", "PlacementStrategy", "aws:ec2/placementGroup:"),
    (("spreadLevel",), "ec2", "SpreadLevel", "aws:ec2/placementGroup:"),
    (("volumeType",), "ec2", "VolumeType", None),
    (("metadataOptions", "httpTokens"), "ec2", "LaunchTemplateHttpTokensState", None),
    (("metadataOptions", "httpEndpoint"), "ec2", "LaunchTemplateInstanceMetadataEndpointState", None),
    (("instanceMarketOptions", "marketType"), "ec2", "MarketType", None),
    (("tagSpecifications", LIST_ITEM, "resourceType"), "ec2", "ResourceType", None),
    (("networkInterfaces", LIST_ITEM, "interfaceType"), "ec2", "NetworkInterfaceType", None),
    (("capacityReservationPreference",), "ec2", "CapacityReservationPreference", None),
    (("vpcEndpointType",), "ec2", "VpcEndpointType", None),
    (("connectivityType",), "ec2", "ConnectivityType", "aws:ec2/natGateway:"),
    (("domain",), "ec2", "DomainType", "aws:ec2/eip:"),
    (("deploymentType",), "fsx", "LustreDeploymentType", "aws:fsx/lustreFileSystem:"),
    (("storageType",), "fsx", "StorageType", "aws:fsx/"),
    (("dataCompressionType",), "fsx", "DataCompressionType", None),
    (("events", LIST_ITEM), "fsx", "EventType", "aws:fsx/dataRepositoryAssociation:"),
    (("updateConfig", "updateStrategy"), "eks", "NodegroupUpdateStrategies", None),
    (("nodeRepairConfigOverrides", LIST_ITEM, "repairAction"), "eks", "RepairAction", None),
)
"""Inputs whose values are an AWS API enumeration, by the end of their key path."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_FAMILY_LABEL = "karpenter.k8s.aws/instance-family"


def _leaves(value: Any, path: tuple[str, ...] = (), shown: str = "") -> Iterator[tuple[tuple[str, ...], str, Any]]:
    """(key path with ``[]`` for list items, printable path, value) of every scalar."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)), f"{shown}.{key}" if shown else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, LIST_ITEM), f"{shown}[{index}]")
    else:
        yield path, shown, value


def check_resource_inputs(resource: dict[str, Any]) -> Iterator[str]:
    """A problem line for each enumeration input of an AWS (or pulumi-eks) resource that the AWS
    API would refuse."""
    type_ = resource["type"]
    if not type_.startswith(("aws:", "eks:")):
        return
    for path, shown, value in _leaves(resource.get("inputs") or {}):
        if not isinstance(value, str) or is_placeholder(value):
            continue
        for suffix, service, shape, type_prefix in ENUM_INPUTS:
            if path[-len(suffix):] != suffix or (type_prefix and not type_.startswith(type_prefix)):
                continue
            allowed = enum_values(service, shape)
            if value not in allowed:
                yield (
                    f"{type_} {resource['name']}: {shown}: '{value}' is not a value of botocore {service} {shape}"
                    f"{suggestion(value, allowed)}"
                )


@functools.cache
def _instance_families() -> frozenset[str]:
    return frozenset(t.split(".", 1)[0] for t in ec2_instance_types())


def _selected(obj: Any) -> Iterator[tuple[str, str, list[Any]]]:
    """(printable path, label key, values) of node label selections anywhere in an object: node
    selectors (``{label: value}``) and requirements (``{key, operator, values}``)."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, shown = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("key"), str) and isinstance(value.get("values"), list):
                yield f"{shown} ({value['key']})", value["key"], value["values"]
            for key, item in value.items():
                child = f"{shown}.{key}" if shown else str(key)
                if key == "nodeSelector" and isinstance(item, dict):
                    for label, selected in item.items():
                        yield f"{child}[{label}]", label, [selected]
                stack.append((item, child))
        elif isinstance(value, list):
            stack.extend((item, f"{shown}[{i}]") for i, item in enumerate(value))


def check_manifest_instance_types(obj: dict[str, Any]) -> Iterator[str]:
    """A problem line for each EC2 instance type or family a Kubernetes object selects that EC2
    does not have."""
    for shown, label, values in _selected(obj):
        if label == INSTANCE_TYPE_LABEL:
            allowed, what = ec2_instance_types(), "an EC2 instance type (botocore ec2 InstanceType)"
        elif label == INSTANCE_FAMILY_LABEL:
            allowed, what = _instance_families(), "an EC2 instance family (botocore ec2 InstanceType)"
        else:
            continue
        for value in values:
            if isinstance(value, str) and not is_placeholder(value) and value not in allowed:
                yield f"{shown}: '{value}' is not {what}{suggestion(value, allowed)}"
