"""EKS add-on configuration values against the configuration schema the add-on publishes."""

from __future__ import annotations

import json

from eks_gpu_training.offline.check.addons import check_addon, schema_path

TOLERATE_GPU = {"dcgmAgent": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


def addon(configuration, version="v1.7.0-eksbuild.1", name="eks-node-monitoring-agent"):
    return {
        "type": "aws:eks/addon:Addon",
        "name": "monitoring",
        "inputs": {"addonName": name, "addonVersion": version, "configurationValues": configuration},
    }


def test_valid_configuration_values_pass(reference_dir):
    assert list(check_addon(addon(json.dumps(TOLERATE_GPU)), reference_dir)) == []


def test_a_key_the_schema_lacks_fails_and_is_named(reference_dir):
    bad = {"dcgmAgent": {"tolerationz": []}}
    (outcome,) = check_addon(addon(json.dumps(bad)), reference_dir)
    assert outcome[0] == "fail"
    assert "configurationValues.dcgmAgent: Additional properties are not allowed ('tolerationz' was unexpected)" in outcome[1]
    assert "eks-node-monitoring-agent-1.7.0/configuration.schema.json" in outcome[1]


def test_a_value_of_the_wrong_type_fails(reference_dir):
    (outcome,) = check_addon(addon(json.dumps({"dcgmAgent": {"tolerations": "all"}})), reference_dir)
    assert outcome[0] == "fail" and "configurationValues.dcgmAgent.tolerations" in outcome[1]


def test_the_schema_is_found_by_version_or_as_the_only_one(reference_dir):
    assert schema_path(reference_dir, "eks-node-monitoring-agent", "v1.7.0-eksbuild.3")[0].parent.name == "eks-node-monitoring-agent-1.7.0"
    # A version EKS picks at deployment: the reference's one schema of that add-on.
    assert schema_path(reference_dir, "eks-node-monitoring-agent", "<unknown: output of ...>")[0] is not None
    path, reason = schema_path(reference_dir, "eks-node-monitoring-agent", "v9.9.9-eksbuild.1")
    assert path is None and "no eks-node-monitoring-agent 9.9.9" in reason


def test_values_known_only_at_deployment_or_without_a_schema_are_skipped_and_said_so(reference_dir):
    (outcome,) = check_addon(addon("<unknown: output of x>"), reference_dir)
    assert outcome[0] == "skip"
    (outcome,) = check_addon(addon(json.dumps({"a": 1}), name="vpc-cni"), reference_dir)
    assert outcome[0] == "skip" and "vpc-cni" in outcome[1]
    (outcome,) = check_addon(addon(json.dumps(TOLERATE_GPU)), None)
    assert outcome == ("skip", "aws:eks/addon:Addon monitoring (eks-node-monitoring-agent): configuration values not checked: the upstream reference folder is absent")
