"""What a change to each node-group configuration key, and to the cluster keys beside them, does to
running nodes: the table of docs/operations.md "What a change does to running nodes and jobs", as
plain data.

The classification follows the EKS API: a node group field that ``UpdateNodegroupConfig`` takes
is updated in place; one that ``UpdateNodegroupVersion`` takes (``version``, ``releaseVersion``,
``launchTemplate``) rolls the nodes, a few at a time (``updateConfig``); a field only
``CreateNodegroup`` takes cannot change on a node group, so the provider replaces the node group
(docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html,
API_UpdateNodegroupVersion.html). Tests check every row against botocore's EKS model.

Replacing a node group deletes every node of the pool. Node groups are named from a prefix
(``nodeGroupNamePrefix``), so the provider creates the new group before it deletes the old one
instead of failing on a name clash; the old group's nodes still go, and a protected pool's
replacement (``cluster.protect``, or the pool's own ``protect``) is refused until the pool's
protection is turned off, which leaves the cluster's and the file system's on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

IN_PLACE = "updates in place"
ROLLS_NODES = "rolls nodes"
REPLACES_POOL = "replaces the pool"
NO_NODE_CHANGE = "no change to nodes"

REFUSED = "refused for a running GPU pool without `forceUpdateVersion`"
"""What the table says of a roll ``platform.rolls`` refuses: under a running job's
PodDisruptionBudget EKS would give up with PodEvictionFailure."""

LAUNCH_TEMPLATE = "launchTemplate"
"""The EKS field a launch-template setting reaches: a new template version, rolled out through
UpdateNodegroupVersion."""


@dataclass(frozen=True)
class ChangeEffect:
    """What changing one configuration key does to running nodes."""

    key: str
    """Configuration key path, e.g. ``gpuNodeGroups[].instanceTypes``."""
    effect: str
    """IN_PLACE, ROLLS_NODES, REPLACES_POOL or NO_NODE_CHANGE."""
    eks_field: Optional[str]
    """The CreateNodegroup field the key sets (``launchTemplate`` for template settings); None when
    the key never reaches the node group."""
    why: str
    """One line of the table in docs/operations.md."""
    refused: bool = False
    """Whether the roll of a running managed GPU pool is refused without ``forceUpdateVersion``
    (``platform.rolls``); the table says so after ``why``."""

    def explained(self) -> str:
        """``why``, and the refusal when there is one."""
        return f"{self.why}; {REFUSED}" if self.refused else self.why


_SENDS_RUNNING_SIZE = (
    "EKS takes the whole scaling config, and the update sends the running group's desired size (read with DescribeNodegroup "
    "before anything registers), not the one in Pulumi's state, so a pool an autoscaler or a person resized keeps its nodes"
)
_RESIZED_BY_HAND = (
    "while the bounds are the running group's, desiredSize is ignored: a pool an autoscaler or a person resized shows no "
    "change in a preview (`--expect-no-changes` passes) and an update leaves its scaling config alone"
)
_RAISE_MIN = (
    f"scaling limits change without touching running nodes; {_SENDS_RUNNING_SIZE}. Raised above the running size, it "
    "launches nodes up to it (EKS requires minSize <= desiredSize)"
)
_LOWER_MAX = (
    f"scaling limits change without touching running nodes; {_SENDS_RUNNING_SIZE}. Lowered below the running size, it "
    "terminates nodes down to it, EKS picking which: lower it between jobs"
)

_POOL = "gpuNodeGroups[]"
_SYSTEM = "systemNodeGroup"

CHANGE_EFFECTS: tuple[ChangeEffect, ...] = (
    ChangeEffect(f"{_POOL}.name", REPLACES_POOL, "nodegroupName", "a new pool: every resource of the pool is created anew, the old pool deleted"),
    ChangeEffect(f"{_POOL}.instanceTypes", REPLACES_POOL, "instanceTypes", "instance types are fixed at creation"),
    ChangeEffect(
        f"{_POOL}.instanceTypes (capacityType CAPACITY_BLOCK)",
        ROLLS_NODES,
        LAUNCH_TEMPLATE,
        "a Capacity Block pool names its one type in the launch template, not the node group (EKS refuses it in both)",
        refused=True,
    ),
    ChangeEffect(f"{_POOL}.availabilityZone", REPLACES_POOL, "subnets", "subnets are fixed at creation"),
    ChangeEffect(f"{_POOL}.subnetIds", REPLACES_POOL, "subnets", "subnets are fixed at creation"),
    ChangeEffect(f"{_POOL}.capacityType", REPLACES_POOL, "capacityType", "capacity type is fixed at creation"),
    ChangeEffect(f"{_POOL}.amiType", REPLACES_POOL, "amiType", "AMI type is fixed at creation"),
    ChangeEffect(
        f"{_POOL}.placementGroup",
        ROLLS_NODES,
        LAUNCH_TEMPLATE,
        "a new template version places new nodes in the new group; leaving mode create deletes the pool's group, "
        "which a protected pool refuses: set the pool's `protect: false` and `pulumi up` before that change",
        refused=True,
    ),
    ChangeEffect(f"{_POOL}.efa", ROLLS_NODES, LAUNCH_TEMPLATE, "network interfaces live in the launch template", refused=True),
    ChangeEffect(f"{_POOL}.capacityReservationId", ROLLS_NODES, LAUNCH_TEMPLATE, "the reservation target lives in the launch template", refused=True),
    ChangeEffect(f"{_POOL}.rootVolumeSizeGib", ROLLS_NODES, LAUNCH_TEMPLATE, "the root volume lives in the launch template", refused=True),
    ChangeEffect(
        f"{_POOL}.instanceTags", ROLLS_NODES, LAUNCH_TEMPLATE, "instance tags live in the launch template (opt-in for that reason)", refused=True
    ),
    ChangeEffect(
        f"{_POOL}.releaseVersion",
        ROLLS_NODES,
        "releaseVersion",
        "new AMI, node by node",
        refused=True,
    ),
    ChangeEffect(
        "cluster.kubernetesVersion",
        ROLLS_NODES,
        "version",
        "control plane first, then every node group follows the version; the EKS add-ons move to their builds for "
        "the version, in place",
        refused=True,
    ),
    ChangeEffect(
        "cluster.create: false, upgraded by its owners",
        ROLLS_NODES,
        "version",
        "not a key: the team that owns an adopted cluster moved its control plane, and the node groups follow the "
        "cluster's live version, so the next `pulumi up` moves them to it",
        refused=True,
    ),
    ChangeEffect(
        f"{_POOL} behind the cluster's version",
        ROLLS_NODES,
        "version",
        "not a key: an upgrade that stopped after the control plane moved (PodEvictionFailure) left the node group on the "
        "old version, and the next `pulumi up` moves it to the cluster's",
        refused=True,
    ),
    ChangeEffect(
        f"{_POOL} on an older launch template version",
        ROLLS_NODES,
        LAUNCH_TEMPLATE,
        "not a key: a roll onto a new template version stopped half-way, and the next `pulumi up` moves the node group "
        "to the template's latest version",
        refused=True,
    ),
    ChangeEffect(
        "storage.instanceStore", ROLLS_NODES, LAUNCH_TEMPLATE, "the RAID0 NodeConfig is the launch template's user data (AL2023 GPU pools)",
        refused=True,
    ),
    ChangeEffect(
        f"{_POOL}.fastImagePull",
        ROLLS_NODES,
        LAUNCH_TEMPLATE,
        "the FastImagePull feature gate is in the NodeConfig of the launch template's user data: turning it on or off makes a new "
        "template version, and EKS replaces the nodes to move them to it (docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html; "
        "API_UpdateNodegroupVersion `launchTemplate`)",
        refused=True,
    ),
    ChangeEffect(f"{_POOL}.labels", IN_PLACE, "labels", "labels are updated on running nodes"),
    ChangeEffect(
        f"{_POOL}.minSize",
        IN_PLACE,
        "scalingConfig",
        _RAISE_MIN,
    ),
    ChangeEffect(
        f"{_POOL}.maxSize",
        IN_PLACE,
        "scalingConfig",
        _LOWER_MAX,
    ),
    ChangeEffect(f"{_POOL}.desiredSize", NO_NODE_CHANGE, None, f"used at creation only; later the autoscaler or a person owns it: {_RESIZED_BY_HAND}, and new bounds are sent with the running size moved into them"),
    ChangeEffect(f"{_POOL}.updateMaxUnavailable", IN_PLACE, "updateConfig", "applies to the next roll"),
    ChangeEffect(f"{_POOL}.updateStrategy", IN_PLACE, "updateConfig", "applies to the next roll"),
    ChangeEffect(f"{_POOL}.nodeRepair", IN_PLACE, "nodeRepairConfig", "repair settings change without touching nodes"),
    ChangeEffect(
        f"{_POOL}.forceUpdateVersion",
        NO_NODE_CHANGE,
        None,
        "applies to the next roll: EKS then evicts pods a PodDisruptionBudget protects instead of failing the roll",
    ),
    ChangeEffect(
        f"{_POOL}.protect",
        NO_NODE_CHANGE,
        None,
        "Pulumi state of the node group and its created placement group (the preview shows the `protect` change, no provider "
        "call); false lets a change that replaces the pool or deletes its placement group through while `cluster.protect` keeps "
        "the cluster and FSx protected. Pulumi refuses a replacement only when the state and the program both protect "
        "(pulumi/pulumi `pkg/resource/deploy/step_generator.go`), but a deletion by the state alone (`DeleteStep.Apply`), "
        "so apply false in its own `pulumi up` first",
    ),
    ChangeEffect("tags", IN_PLACE, None, "EKS TagResource; stack tags never reach launch templates or Karpenter's EC2NodeClasses, so no node rolls or drifts"),
    ChangeEffect(
        "cluster.protect",
        IN_PLACE,
        None,
        "Pulumi state, and the created cluster's EKS deletion protection (UpdateClusterConfig `deletionProtection`); no node, "
        "job or data is touched. EKS refuses DeleteCluster while it is on, so turn it off and `pulumi up` before `pulumi destroy` "
        "(docs.aws.amazon.com/eks/latest/userguide/deletion-protection.html)",
    ),
    ChangeEffect(
        "cluster.supportType",
        IN_PLACE,
        None,
        "the created cluster's upgrade policy (UpdateClusterConfig `upgradePolicy`); no node, job or data is touched. It acts "
        "when the version's standard support ends: `EXTENDED` then bills $0.60 instead of $0.10 per cluster-hour, `STANDARD` "
        "has EKS upgrade the control plane, not the nodes or add-ons (docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html)",
    ),
    ChangeEffect(
        "cluster.adminPrincipalArns",
        NO_NODE_CHANGE,
        None,
        "an admin added gets its own access entry and cluster-admin policy association (EKS CreateAccessEntry, "
        "AssociateAccessPolicy); one removed loses only its own (DeleteAccessEntry): each entry is named after its "
        "principal, so the others, every node and every job are untouched. The cluster's creator, recorded in its "
        "`eks-gpu-training/creator-principal` tag, gets none whoever runs `pulumi up`: EKS made its entry itself "
        "(docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html)",
    ),
    ChangeEffect(
        "cluster.creatorPrincipalArn",
        NO_NODE_CHANGE,
        None,
        "read only for a running cluster without the `eks-gpu-training/creator-principal` tag: the first `pulumi up` "
        "with it writes the tag on the EKS cluster in place (TagResource) and plans no entry for that principal; once "
        "the tag is there it must agree with it (a first deployment records the principal running it). No node, job "
        "or data is touched",
    ),
    ChangeEffect(f"{_SYSTEM}.instanceTypes", REPLACES_POOL, "instanceTypes", "instance types are fixed at creation"),
    ChangeEffect(f"{_SYSTEM}.amiType", REPLACES_POOL, "amiType", "AMI type is fixed at creation"),
    ChangeEffect(f"{_SYSTEM}.diskSizeGib", ROLLS_NODES, LAUNCH_TEMPLATE, "the root volume lives in the launch template"),
    ChangeEffect(f"{_SYSTEM}.releaseVersion", ROLLS_NODES, "releaseVersion", "new AMI, node by node"),
    ChangeEffect(
        f"{_SYSTEM}.minSize",
        IN_PLACE,
        "scalingConfig",
        _RAISE_MIN,
    ),
    ChangeEffect(
        f"{_SYSTEM}.maxSize",
        IN_PLACE,
        "scalingConfig",
        _LOWER_MAX,
    ),
    ChangeEffect(f"{_SYSTEM}.desiredSize", NO_NODE_CHANGE, None, f"used at creation only; {_RESIZED_BY_HAND}, and new bounds are sent with the running size moved into them"),
)
"""Every node-group key and what its change does."""


def change_effect(key: str) -> ChangeEffect:
    """What changing ``key`` does to running nodes; KeyError for a key no node group reads."""
    for row in CHANGE_EFFECTS:
        if row.key == key:
            return row
    raise KeyError(key)


def effect_of(eks_field: str, updatable_in_place: frozenset[str], updatable_by_version: frozenset[str]) -> str:
    """The effect of changing a CreateNodegroup field, from the fields of EKS's two update calls."""
    if eks_field in updatable_in_place:
        return IN_PLACE
    if eks_field in updatable_by_version:
        return ROLLS_NODES
    return REPLACES_POOL


def change_table() -> str:
    """The table of docs/operations.md (markdown)."""
    rows = ["| Key | A change | Why |", "| --- | --- | --- |"]
    rows += [f"| `{row.key}` | {row.effect} | {row.explained()} |" for row in CHANGE_EFFECTS]
    return "\n".join(rows)
