"""The nodeadm NodeConfig GPU nodes get as user data: a MIME multipart document nodeadm reads, with
the instance-store RAID0 array and the FastImagePull feature gate, in managed pools' launch
templates and in Karpenter's EC2NodeClass ``userData``.

Where the reference folder holds nodeadm's NodeConfig CRD (awslabs/amazon-eks-ami,
``nodeadm/crds/node.eks.aws_nodeconfigs.yaml``, under an ``amazon-eks-ami*`` folder), every
NodeConfig is validated against its schema, closed to unknown fields; without it those tests skip.
"""

from __future__ import annotations

import base64
import email
import email.policy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.crd_check import crd_schema
from eks_gpu_training.addons.gpu_node_pool import ec2_node_class_spec
from eks_gpu_training.aws.node_config import (
    NODE_CONFIG_CONTENT_TYPE,
    node_config_launch_settings,
    node_config_settings,
    node_config_user_data,
)
from eks_gpu_training.platform import parse_platform_args
from tests.support.builders import prod_raw

MANAGED_TEMPLATE = "gpu-training-p5-training-launch-template"
"""The prod stack's managed GPU pool's launch template."""


def node_configs(user_data: str) -> list[dict[str, Any]]:
    """Parse user data as nodeadm does: a MIME multipart document, each NodeConfig part a YAML body."""
    message = email.message_from_string(user_data, policy=email.policy.default)
    assert message.is_multipart()
    assert message.get_content_type() == "multipart/mixed"
    parts = list(message.iter_parts())
    assert [part.get_content_type() for part in parts] == [NODE_CONFIG_CONTENT_TYPE] * len(parts)
    # nodeadm reads the body as YAML text: 7-bit, no base64 transfer encoding.
    assert all(part.get("Content-Transfer-Encoding") == "7bit" for part in parts)
    return [yaml.safe_load(part.get_payload()) for part in parts]


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever it lists an object's properties (a NodeConfig
    key nodeadm does not know is a mistake here, whatever the API server would prune)."""
    closed = {key: _closed(value) if isinstance(value, dict) else value for key, value in schema.items()}
    if "properties" in closed:
        closed["properties"] = {key: _closed(value) for key, value in schema["properties"].items()}
        closed.setdefault("additionalProperties", False)
    return closed


@pytest.fixture(scope="module")
def node_config_schema(reference_dir: Path) -> jsonschema.Draft7Validator:
    found = sorted(reference_dir.glob("amazon-eks-ami*/**/node.eks.aws_nodeconfigs.yaml"))
    if not found:
        pytest.skip(f"nodeadm's NodeConfig CRD (node.eks.aws_nodeconfigs.yaml) is not in {reference_dir}")
    return jsonschema.Draft7Validator(_closed(crd_schema(found[-1])))


def test_user_data_is_the_mime_multipart_nodeconfig_nodeadm_reads():
    # Field names of nodeadm's API (awslabs/amazon-eks-ami, nodeadm/api/v1alpha1): NodeConfig.spec.instance
    # (InstanceOptions).localStorage (LocalStorageOptions).strategy, one of RAID0 | RAID10 | Mount.
    assert node_configs(node_config_user_data()) == [
        {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}}}
    ]


def test_fast_image_pull_turns_on_the_nodeadm_feature_gate_beside_the_raid0_array():
    # NodeConfig.spec.featureGates is a map of nodeadm's Feature (enum InstanceIdNodeName | FastImagePull)
    # to bool (nodeadm/api/v1alpha1/nodeconfig_types.go; doc/examples.md "Enabling fast image pull").
    (node_config,) = node_configs(node_config_user_data(fast_image_pull=True))
    assert node_config["spec"] == {"featureGates": {"FastImagePull": True}, "instance": {"localStorage": {"strategy": "RAID0"}}}
    assert node_config["spec"]["featureGates"]["FastImagePull"] is True
    (gate_only,) = node_configs(node_config_user_data(local_storage_strategy=None, fast_image_pull=True))
    assert gate_only["spec"] == {"featureGates": {"FastImagePull": True}}


def test_user_data_is_the_same_on_every_run():
    # A new boundary each run would mean a new launch template version and a rolling replacement of the nodes.
    assert node_config_user_data(fast_image_pull=True) == node_config_user_data(fast_image_pull=True)
    assert re.search(r'boundary="([^"]+)"', node_config_user_data()).group(1) == "==EKS-GPU-TRAINING-NODECONFIG=="


def test_launch_settings_carry_the_nodeconfig_only_on_al2023_and_only_when_it_says_something():
    assert node_config_launch_settings("BOTTLEROCKET_x86_64_NVIDIA", True) == {}
    assert node_config_launch_settings("AL2023_x86_64_NVIDIA", False) == {}
    for raid0, fast in ((True, False), (True, True), (False, True)):
        settings = node_config_launch_settings("AL2023_x86_64_NVIDIA", raid0, fast)
        (node_config,) = node_configs(base64.b64decode(settings["user_data"]).decode())
        assert ("instance" in node_config["spec"], "featureGates" in node_config["spec"]) == (raid0, fast)


@pytest.mark.parametrize(
    ("local_storage_strategy", "fast_image_pull"), [("RAID0", False), ("RAID0", True), (None, True)], ids=["raid0", "raid0+gate", "gate"]
)
def test_every_nodeconfig_the_project_writes_fits_nodeadms_schema(node_config_schema, local_storage_strategy, fast_image_pull):
    (node_config,) = node_configs(node_config_user_data(local_storage_strategy, fast_image_pull))
    assert [error.message for error in node_config_schema.iter_errors(node_config)] == []


def test_the_schema_check_refuses_a_misspelt_field(node_config_schema):
    wrong = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"featureGate": {"FastImagePull": True}}}
    assert [error.message for error in node_config_schema.iter_errors(wrong)] != []


def test_managed_gpu_pools_carry_the_raid0_array_and_the_gate_in_their_launch_template(prod_graph):
    template = prod_graph.one("aws:ec2/launchTemplate:LaunchTemplate", MANAGED_TEMPLATE)
    user_data = base64.b64decode(template.inputs["userData"]).decode()
    assert user_data == node_config_user_data(fast_image_pull=True)
    (node_config,) = node_configs(user_data)
    assert node_config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
    assert node_config["spec"]["featureGates"] == {"FastImagePull": True}


def test_karpenter_pools_carry_the_gate_in_their_ec2nodeclass_user_data(prod_graph):
    spec = prod_graph.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass").inputs["spec"]
    # Karpenter makes the array itself from instanceStorePolicy; the user data adds only the gate.
    assert spec["instanceStorePolicy"] == "RAID0"
    (node_config,) = node_configs(spec["userData"])
    assert node_config["spec"] == {"featureGates": {"FastImagePull": True}}
    assert spec["userData"] == node_config_user_data(local_storage_strategy=None, fast_image_pull=True)


def test_karpenter_pools_without_the_gate_have_no_user_data():
    raw = prod_raw()
    raw["karpenter"]["gpuNodePools"][0]["fastImagePull"] = False
    pool = parse_platform_args(raw).karpenter.gpu_node_pools[0]
    spec = ec2_node_class_spec(pool, node_role_name="r", subnet_ids=["subnet-1"], security_group_ids=["sg-1"], instance_store_raid0=True)
    assert "userData" not in spec


@pytest.mark.parametrize(("raid0", "fast"), [(True, False), (False, True), (True, True), (False, False)])
def test_user_data_tells_the_settings_it_was_made_from(raid0, fast):
    # The roll check reads a running template's user data back into the keys that made it.
    user_data = node_config_launch_settings("AL2023_x86_64_NVIDIA", raid0, fast).get("user_data")
    assert node_config_settings(user_data) == (raid0, fast)


def test_user_data_made_elsewhere_tells_no_settings():
    assert node_config_settings(base64.b64encode(b"#!/bin/bash\necho hi\n").decode()) is None
