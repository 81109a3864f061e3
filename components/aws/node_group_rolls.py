"""What an update would roll in a running managed node group: the plan against what runs, in words.

EKS replaces every node of a managed node group when UpdateNodegroupVersion changes its
``version``, ``releaseVersion`` or launch template version
(docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html). The node groups
follow their template's latest version, and the provider makes a new version whenever the
template's data changes (hashicorp/terraform-provider-aws ``ec2_launch_template.go``,
``resourceLaunchTemplateUpdate``). So a pool rolls when:

- its running ``version`` or pinned ``releaseVersion`` differs from the plan's;
- the planned template data differs from the running template's latest version;
- the group does not run the latest version (an update stopped half-way, e.g. on
  ``PodEvictionFailure``): sending it finishes that roll.

What runs is read before anything is registered: DescribeNodegroup (``node_group_sizes``) and the
template's latest version (``aws.ec2.get_launch_template``). The plan is built by the very functions
the components create the template with; a planned value that is an Output is unknown before
deployment and skipped, so the EFA interfaces' security groups are never compared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import pulumi
import pulumi_aws as aws

from ..config import Problem
from .node_config import node_config_settings


@dataclass(frozen=True)
class RunningLaunchTemplate:
    """The latest version of a running launch template."""

    latest_version: int
    """The template's latest version number."""
    parts: Mapping[str, Any]
    """Its data as ``template_parts`` gives it."""


@dataclass(frozen=True)
class RunningNodeGroup:
    """What a running managed node group runs (DescribeNodegroup)."""

    version: Optional[str] = None
    """Its Kubernetes version."""
    release_version: Optional[str] = None
    """Its AMI release version."""
    launch_template_version: Optional[str] = None
    """The version of its launch template the nodes run; None without a template."""
    launch_template: Optional[RunningLaunchTemplate] = None
    """Its launch template's latest version; None without a template."""


@dataclass(frozen=True)
class PlannedNodeGroup:
    """What the plan sends a node group."""

    version: Optional[pulumi.Input[str]]
    """The ``version`` input; None (or an Output) is not compared."""
    version_source: str
    """Where ``version`` comes from, as the message says it: ``cluster.kubernetesVersion is 1.35``."""
    release_version: Optional[str]
    """The pinned ``releaseVersion``; None follows the latest AMI and is not compared."""
    launch_template: Mapping[str, Any]
    """The template data, as ``aws.ec2.LaunchTemplate`` inputs (``launch_template_data``)."""


def _known(value: Any) -> bool:
    if isinstance(value, pulumi.Output):
        return False
    if isinstance(value, Mapping):
        return all(_known(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_known(v) for v in value)
    return True


def _block(data: Mapping[str, Any], *names: str) -> Mapping[str, Any]:
    """A nested block, given as a mapping (LaunchTemplate inputs) or as the one-element list the data
    source describes it as, under any of ``names`` (``placement``, ``placements``); empty when absent."""
    for name in names:
        value = data.get(name)
        if isinstance(value, (list, tuple)):
            return value[0] if value else {}
        if value is not None:
            return value
    return {}


def _text(value: Any) -> Optional[str]:
    return value or None  # the data source describes an unset string as ""


def _flag(value: Any) -> Optional[bool]:
    # The inputs take "true"/"false"; the data source gives strings for volumes, booleans for interfaces.
    return value if value is None or isinstance(value, bool) else str(value).lower() == "true"


def _number(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def template_parts(data: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a launch template's data the roll check compares, each in one plain shape, from
    ``aws.ec2.LaunchTemplate`` inputs (the plan) or from ``aws.ec2.get_launch_template`` (what runs):
    both spell the same fields, the data source with plural names, one-element lists for blocks and
    "" for what is unset. Only the fields the library sets are read; a part that holds an Output is
    left out, so it is not compared."""
    volumes = sorted(
        (
            {
                "device_name": mapping.get("device_name"),
                "volume_size": _number(_block(mapping, "ebs").get("volume_size")),
                "volume_type": _block(mapping, "ebs").get("volume_type"),
                "throughput": _number(_block(mapping, "ebs").get("throughput")),
                "encrypted": _flag(_block(mapping, "ebs").get("encrypted")),
                "delete_on_termination": _flag(_block(mapping, "ebs").get("delete_on_termination")),
            }
            for mapping in data.get("block_device_mappings") or []
        ),
        key=lambda volume: str(volume["device_name"]),
    )
    metadata = _block(data, "metadata_options")
    interfaces = sorted(
        (
            {
                "network_card_index": _number(interface.get("network_card_index")),
                "device_index": _number(interface.get("device_index")),
                "interface_type": interface.get("interface_type"),
                "delete_on_termination": _flag(interface.get("delete_on_termination")),
            }
            for interface in data.get("network_interfaces") or []
        ),
        key=lambda interface: (interface["network_card_index"] or 0, interface["device_index"] or 0),
    )
    capacity = _block(data, "capacity_reservation_specification", "capacity_reservation_specifications")
    parts = {
        "description": _text(data.get("description")),
        "volumes": volumes,
        "metadata": {key: metadata.get(key) for key in ("http_endpoint", "http_tokens")}
        | {"http_put_response_hop_limit": _number(metadata.get("http_put_response_hop_limit"))},
        "placement_group": _text(_block(data, "placement", "placements").get("group_name")),
        "tags": {spec.get("resource_type"): dict(spec.get("tags") or {}) for spec in data.get("tag_specifications") or []},
        "user_data": _text(data.get("user_data")),
        "interfaces": interfaces,
        "capacity_reservation": _text(
            _block(capacity, "capacity_reservation_target", "capacity_reservation_targets").get("capacity_reservation_id")
        ),
        "market_type": _text(_block(data, "instance_market_options").get("market_type")),
        "instance_type": _text(data.get("instance_type")),
    }
    return {part: value for part, value in parts.items() if _known(value)}


DESCRIBED_FIELDS = (
    "description", "block_device_mappings", "metadata_options", "placements", "tag_specifications", "user_data",
    "network_interfaces", "capacity_reservation_specifications", "instance_market_options", "instance_type",
)
"""The fields of ``aws.ec2.get_launch_template``'s result that ``template_parts`` reads."""


def running_launch_template(
    template_id: str, region: Optional[str] = None, invoke: Optional[pulumi.InvokeOptions] = None
) -> RunningLaunchTemplate:
    """The running template's latest version (DescribeLaunchTemplates, DescribeLaunchTemplateVersions)."""
    described = aws.ec2.get_launch_template(id=template_id, region=region, opts=invoke)
    data = {field: getattr(described, field) for field in DESCRIBED_FIELDS}
    return RunningLaunchTemplate(latest_version=int(described.latest_version), parts=template_parts(data))


def running_state(group: Any, region: Optional[str] = None, invoke: Optional[pulumi.InvokeOptions] = None) -> RunningNodeGroup:
    """What the node group ``group`` (``node_group_sizes.running_node_group``) runs, with its launch
    template's latest version."""
    templates = group.launch_templates or []
    template = running_launch_template(templates[0].id, region, invoke) if templates else None
    return RunningNodeGroup(
        version=group.version,
        release_version=group.release_version,
        launch_template_version=templates[0].version if templates else None,
        launch_template=template,
    )


def _or_none(value: Any) -> str:
    return "none" if value is None else str(value)


def _instance_tags(tags: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    return {key: value for key, value in tags.get("instance", {}).items() if key != "Name"}


def _volumes_change(running: list[dict[str, Any]], planned: list[dict[str, Any]]) -> str:
    def unsized(volumes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**volume, "volume_size": None} for volume in volumes]

    if len(running) == len(planned) == 1 and unsized(running) == unsized(planned):
        return f"rootVolumeSizeGib {running[0]['volume_size']} → {planned[0]['volume_size']}"
    return f"the root volume {running} → {planned}"


def _user_data_change(running: Optional[str], planned: Optional[str]) -> str:
    was, will = node_config_settings(running), node_config_settings(planned)
    if was is None or will is None:
        return "the nodes' user data (the nodeadm NodeConfig of fastImagePull and storage.instanceStore) is not the running template's"
    changes = []
    if was[1] != will[1]:
        changes.append(f"fastImagePull {str(was[1]).lower()} → {str(will[1]).lower()}")
    if was[0] != will[0]:
        changes.append(f"storage.instanceStore {'raid0' if was[0] else 'none'} → {'raid0' if will[0] else 'none'}")
    return " and ".join(changes) + " (the nodeadm NodeConfig in the user data)"


def _interfaces_change(running: list[dict[str, Any]], planned: list[dict[str, Any]]) -> str:
    if len(running) != len(planned):
        return f"efa: {len(running)} → {len(planned)} EFA network interfaces"
    return f"the EFA network interfaces {running} → {planned}"


PART_CHANGES: dict[str, Callable[[Any, Any], str]] = {
    "description": lambda was, will: f"the template description {was!r} → {will!r} (written by this library)",
    "volumes": _volumes_change,
    "metadata": lambda was, will: f"the instance metadata options {was} → {will} (set by this library)",
    "placement_group": lambda was, will: f"placementGroup: the nodes' placement group {_or_none(was)} → {_or_none(will)}",
    "tags": lambda was, will: (
        f"instanceTags {_instance_tags(was)} → {_instance_tags(will)}"
        if _instance_tags(was) != _instance_tags(will) else f"the instance and volume tags {was} → {will}"
    ),
    "user_data": _user_data_change,
    "interfaces": _interfaces_change,
    "capacity_reservation": lambda was, will: f"capacityReservationId {_or_none(was)} → {_or_none(will)}",
    "market_type": lambda was, will: f"capacityType: the instance market {_or_none(was)} → {_or_none(will)}",
    "instance_type": lambda was, will: f"instanceTypes (capacityType CAPACITY_BLOCK) {_or_none(was)} → {_or_none(will)}",
}
"""How each part of ``template_parts`` that changes is told: the configuration key behind it and
its running and planned values."""


def template_changes(planned: Mapping[str, Any], running: Mapping[str, Any]) -> list[str]:
    """What differs between the planned template data (``template_parts`` of the plan) and the running
    template's; parts the plan leaves out (Outputs) are not compared."""
    return [
        f"{PART_CHANGES[part](running.get(part), value)} makes a new launch template version"
        for part, value in planned.items()
        if running.get(part) != value
    ]


def roll_reasons(planned: PlannedNodeGroup, running: RunningNodeGroup) -> list[str]:
    """Why an update of the running node group with the planned settings rolls its nodes; empty when
    it does not."""
    reasons = []
    if isinstance(planned.version, str) and running.version is not None and planned.version != running.version:
        reasons.append(
            f"the node group runs Kubernetes {running.version} while {planned.version_source}: it is moved to {planned.version}"
        )
    if planned.release_version is not None and running.release_version is not None and planned.release_version != running.release_version:
        reasons.append(f"releaseVersion moves the running nodes from {running.release_version} to {planned.release_version}")
    template = running.launch_template
    if template is None:
        return reasons
    if running.launch_template_version is not None and running.launch_template_version != str(template.latest_version):
        reasons.append(
            f"the node group runs launch template version {running.launch_template_version}, not the latest "
            f"{template.latest_version} (an earlier update stopped half-way): the update moves it to the latest"
        )
    reasons += template_changes(template_parts(planned.launch_template), template.parts)
    return reasons


def roll_problem(path: str, reasons: list[str], control_plane_moves: bool = False) -> Problem:
    """The refusal of a roll of a pool that did not opt in to ``forceUpdateVersion`` (``path``), for
    ``reasons``: a running job's PodDisruptionBudget keeps every one of its pods, so EKS cannot evict
    them and gives up after 15 minutes with ``PodEvictionFailure``
    (docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html); with the opt-in EKS
    evicts them (UpdateNodegroupVersion ``force``), for a version and a launch-template roll alike."""
    why = f"{reasons[0]}, which rolls the pool's nodes" if len(reasons) == 1 else "; ".join(reasons) + "; each rolls the pool's nodes"
    after = ", after the control plane has moved" if control_plane_moves else ""
    return Problem(
        path,
        f"{why}; a running job's PodDisruptionBudget would make EKS give up after 15 minutes with PodEvictionFailure{after}. "
        "Stop or hold the pool's jobs (ClusterQueue stopPolicy HoldAndDrain) and set forceUpdateVersion: true for this change "
        "(EKS then evicts whatever still runs)",
    )
