"""EKS add-on configuration values against the configuration schema the add-on publishes, as the
package ships it."""

from __future__ import annotations

import json

from eks_gpu_training.offline.agent_data import configuration_schema
from eks_gpu_training.offline.check.addons import check_addon

TOLERATE_GPU = {"dcgmAgent": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}


def addon(configuration, version="v1.7.0-eksbuild.1", name="eks-node-monitoring-agent"):
    return {
        "type": "aws:eks/addon:Addon",
        "name": "monitoring",
        "inputs": {"addonName": name, "addonVersion": version, "configurationValues": configuration},
    }


def test_valid_configuration_values_pass():
    assert list(check_addon(addon(json.dumps(TOLERATE_GPU)))) == []


def test_a_key_the_schema_lacks_fails_and_is_named():
    bad = {"dcgmAgent": {"tolerationz": []}}
    (outcome,) = check_addon(addon(json.dumps(bad)))
    assert outcome[0] == "fail"
    assert "configurationValues.dcgmAgent: Additional properties are not allowed ('tolerationz' was unexpected)" in outcome[1]
    assert "eks-node-monitoring-agent 1.7.0 configuration.schema.json" in outcome[1]


def test_a_value_of_the_wrong_type_fails():
    (outcome,) = check_addon(addon(json.dumps({"dcgmAgent": {"tolerations": "all"}})))
    assert outcome[0] == "fail"
    assert "configurationValues.dcgmAgent.tolerations" in outcome[1]


def test_the_schema_is_found_by_version_or_stands_in_for_one_known_at_deployment():
    assert configuration_schema("eks-node-monitoring-agent", "1.7.0")[0] is not None
    # A version EKS picks at deployment: the shipped schema stands in.
    assert configuration_schema("eks-node-monitoring-agent", None)[0] is not None
    schema, reason = configuration_schema("eks-node-monitoring-agent", "9.9.9")
    assert schema is None
    assert "not 9.9.9" in reason


def test_values_known_only_at_deployment_or_without_a_schema_are_skipped_and_said_so():
    (outcome,) = check_addon(addon("<unknown: output of x>"))
    assert outcome[0] == "skip"
    (outcome,) = check_addon(addon(json.dumps({"a": 1}), name="vpc-cni"))
    assert outcome[0] == "skip"
    assert "vpc-cni" in outcome[1]
    (outcome,) = check_addon(addon(json.dumps(TOLERATE_GPU), version="v9.9.9-eksbuild.1"))
    assert outcome[0] == "skip"
    assert "not 9.9.9" in outcome[1]
