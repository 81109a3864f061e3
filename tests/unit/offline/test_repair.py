"""Repair settings are visible where a reviewer looks: the render's resources.json."""

from __future__ import annotations

import json

import yaml

from eks_gpu_training.config import NODE_MONITORING_CONDITIONS, KarpenterConfig
from eks_gpu_training.offline.check.repair import check_repair_reasons
from eks_gpu_training.facts.node_monitoring import REPAIR_AFTER_MINUTES
from eks_gpu_training.offline.render.files import RESOURCES_FILE
from tests.support.harness import run_main, stack_config


def _resources(rendered_stack) -> list[dict]:
    _, out, _ = rendered_stack
    return json.loads((out / RESOURCES_FILE).read_text())["resources"]


def test_karpenters_node_repair_gate_is_in_the_rendered_release_values(rendered_stack):
    (release,) = [r for r in _resources(rendered_stack) if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("name") == "karpenter"]
    assert release["inputs"]["values"]["settings"]["featureGates"]["nodeRepair"] is True


def test_karpenters_alpha_node_repair_is_off_unless_a_stack_opts_in():
    # The gate force-terminates a node without a drain; a stack that does not ask for it gets Karpenter's own default.
    assert KarpenterConfig().node_repair is False
    config = stack_config("dev")
    config["eks-gpu-training:karpenter"] = {k: v for k, v in config["eks-gpu-training:karpenter"].items() if k != "nodeRepair"}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    (release,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "karpenter"]
    assert release.inputs["values"]["settings"]["featureGates"] == {"reservedCapacity": True, "nodeRepair": False}


def test_the_node_monitoring_agent_and_its_gpu_toleration_are_in_the_render(rendered_stack):
    (addon,) = [r for r in _resources(rendered_stack) if r["type"] == "aws:eks/addon:Addon" and r["inputs"]["addonName"] == "eks-node-monitoring-agent"]
    # The GPU taint, and the health gate's: the host engine runs on a node before it is admitted and while it is quarantined.
    assert json.loads(addon["inputs"]["configurationValues"])["dcgmAgent"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "eks-gpu-training/unverified", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "eks-gpu-training/unhealthy", "operator": "Exists", "effect": "NoExecute"},
    ]
    assert addon["inputs"]["addonVersion"].startswith("<unknown: version of aws:eks/getAddonVersion eks-node-monitoring-agent on Kubernetes 1.35")


def test_managed_gpu_pools_repair_is_in_the_render_for_expensive_nodes(rendered_stack):
    stack, _, _ = rendered_stack
    groups = {r["name"]: r["inputs"] for r in _resources(rendered_stack) if r["type"] == "aws:eks/nodeGroup:NodeGroup"}
    gpu_groups = {name: inputs for name, inputs in groups.items() if inputs.get("taints")}
    assert gpu_groups, stack
    for inputs in gpu_groups.values():
        # On, one node at a time, halting when more than half the pool is unhealthy.
        assert inputs["nodeRepairConfig"] == {"enabled": True, "maxParallelNodesRepairedCount": 1, "maxUnhealthyNodeThresholdPercentage": 50}


def test_the_repair_conditions_are_the_ones_the_agent_sets(reference_dir):
    reasons = yaml.safe_load((reference_dir / "eks-node-monitoring-agent-1.7.0" / "reasons.yaml").read_text())
    assert set(NODE_MONITORING_CONDITIONS) == set(reasons) == set(REPAIR_AFTER_MINUTES)


def _node_group(*overrides: dict) -> dict:
    return {"type": "aws:eks/nodeGroup:NodeGroup", "name": "ng", "inputs": {"nodeRepairConfig": {"enabled": True, "nodeRepairConfigOverrides": list(overrides)}}}


def _override(condition: str, reason: str) -> dict:
    return {"nodeMonitoringCondition": condition, "nodeUnhealthyReason": reason, "minRepairWaitTimeMins": 10, "repairAction": "Reboot"}


def test_check_accepts_reasons_the_agent_reports_numbered_ones_included():
    group = _node_group(_override("AcceleratedHardwareReady", "NvidiaXID79Error"), _override("AcceleratedHardwareReady", "DCGMHealthCode112"), _override("KernelReady", "ForkFailedOutOfPIDs"))
    assert list(check_repair_reasons(group)) == []


def test_check_fails_an_override_whose_reason_would_never_match():
    group = _node_group(_override("AcceleratedHardwareReady", "NvidiaXid79Error"), _override("KernelReady", "NvidiaNVLinkError"), _override("AcceleratedHardwareReady", "NvidiaNVLinkErorr"))
    assert list(check_repair_reasons(group)) == [
        ("fail", "aws:eks/nodeGroup:NodeGroup ng: nodeRepairConfig.nodeRepairConfigOverrides[0].nodeUnhealthyReason: 'NvidiaXid79Error' is not a reason the 1.7.0 agent reports for AcceleratedHardwareReady, so the override would never apply"),
        ("fail", "aws:eks/nodeGroup:NodeGroup ng: nodeRepairConfig.nodeRepairConfigOverrides[1].nodeUnhealthyReason: 'NvidiaNVLinkError' is not a reason the 1.7.0 agent reports for KernelReady, so the override would never apply"),
        ("fail", "aws:eks/nodeGroup:NodeGroup ng: nodeRepairConfig.nodeRepairConfigOverrides[2].nodeUnhealthyReason: 'NvidiaNVLinkErorr' is not a reason the 1.7.0 agent reports for AcceleratedHardwareReady, so the override would never apply; did you mean 'NvidiaNVLinkError'?"),
    ]
