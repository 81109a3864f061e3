"""What a configuration change does to running nodes: the classification, checked against the
EKS API model in botocore, and the table in docs/operations.md that shows it."""

from __future__ import annotations

import botocore.session
import pytest

from eks_gpu_training.aws.node_group_changes import (
    CHANGE_EFFECTS,
    IN_PLACE,
    LAUNCH_TEMPLATE,
    NO_NODE_CHANGE,
    REPLACES_POOL,
    ROLLS_NODES,
    change_effect,
    change_table,
    effect_of,
)
from eks_gpu_training.config import GpuNodeGroupConfig, SystemNodeGroupConfig
from tests.support.harness import PROJECT_ROOT

SECTION = "## What a change does to running nodes and jobs"


def _members(operation: str) -> frozenset[str]:
    model = botocore.session.get_session().get_service_model("eks")
    return frozenset(model.operation_model(operation).input_shape.members)


IDENTIFIERS = frozenset({"clusterName", "nodegroupName", "clientRequestToken"})
"""Members of the update calls that name the node group (or the request) rather than change it."""
CREATE = _members("CreateNodegroup")
UPDATE_CONFIG = _members("UpdateNodegroupConfig") - IDENTIFIERS
UPDATE_VERSION = _members("UpdateNodegroupVersion") - IDENTIFIERS


@pytest.mark.parametrize("row", [r for r in CHANGE_EFFECTS if r.eks_field is not None], ids=lambda r: r.key)
def test_each_key_has_the_effect_the_eks_update_apis_give_its_field(row):
    # A field UpdateNodegroupConfig takes changes in place; one only UpdateNodegroupVersion takes
    # (version, releaseVersion, launchTemplate) rolls the nodes; one only CreateNodegroup takes
    # forces a new node group.
    assert row.eks_field in CREATE
    assert row.effect == effect_of(row.eks_field, UPDATE_CONFIG, UPDATE_VERSION)


def test_launch_template_settings_roll_nodes_through_update_nodegroup_version():
    assert LAUNCH_TEMPLATE in UPDATE_VERSION
    assert LAUNCH_TEMPLATE not in UPDATE_CONFIG
    assert change_effect("gpuNodeGroups[].rootVolumeSizeGib").effect == ROLLS_NODES
    assert change_effect("gpuNodeGroups[].instanceTags").effect == ROLLS_NODES


def test_replacing_fields_are_the_ones_eks_takes_only_at_creation():
    replacing = {r.eks_field for r in CHANGE_EFFECTS if r.effect == REPLACES_POOL}
    assert replacing == {"nodegroupName", "instanceTypes", "subnets", "capacityType", "amiType"}
    assert not replacing & (UPDATE_CONFIG | UPDATE_VERSION)


def test_stack_tags_and_sizes_never_touch_running_nodes():
    assert change_effect("tags").effect == IN_PLACE
    assert change_effect("gpuNodeGroups[].desiredSize").effect == NO_NODE_CHANGE
    assert change_effect("gpuNodeGroups[].minSize").effect == IN_PLACE


def test_every_node_group_key_is_classified():
    # A new pool or system setting must say what its change does before it can ship.
    pool_keys = {f"gpuNodeGroups[].{field.alias}" for field in GpuNodeGroupConfig.model_fields.values()}
    system_keys = {f"systemNodeGroup.{field.alias}" for field in SystemNodeGroupConfig.model_fields.values()}
    classified = {row.key for row in CHANGE_EFFECTS}
    assert pool_keys - classified == set()
    assert system_keys - classified == {"systemNodeGroup.enabled"}


def test_operations_doc_has_the_change_table():
    operations = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    assert SECTION in operations
    assert change_table() in operations.split(SECTION, 1)[1]


def test_every_roll_of_a_gpu_pool_says_it_is_refused_without_the_opt_in():
    # platform.rolls refuses each of these for a running pool; the system node group runs no job.
    gpu_rolls = [r for r in CHANGE_EFFECTS if r.effect == ROLLS_NODES and not r.key.startswith("systemNodeGroup")]
    assert [r.key for r in gpu_rolls if not r.refused] == []
    assert [r.key for r in CHANGE_EFFECTS if r.refused and r.effect != ROLLS_NODES] == []
    assert not any(r.refused for r in CHANGE_EFFECTS if r.key.startswith("systemNodeGroup"))
    assert "refused for a running GPU pool without `forceUpdateVersion`" in change_effect("gpuNodeGroups[].rootVolumeSizeGib").explained()
