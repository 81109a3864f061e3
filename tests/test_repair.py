"""Repair settings are visible where a reviewer looks: the render's resources.json."""

from __future__ import annotations

import json

from eks_gpu_training.offline.render.files import RESOURCES_FILE


def _resources(rendered_stack) -> list[dict]:
    _, out, _ = rendered_stack
    return json.loads((out / RESOURCES_FILE).read_text())["resources"]


def test_karpenters_node_repair_gate_is_in_the_rendered_release_values(rendered_stack):
    (release,) = [r for r in _resources(rendered_stack) if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("name") == "karpenter"]
    assert release["inputs"]["values"]["settings"]["featureGates"]["nodeRepair"] is True


def test_the_node_monitoring_agent_and_its_gpu_toleration_are_in_the_render(rendered_stack):
    (addon,) = [r for r in _resources(rendered_stack) if r["type"] == "aws:eks/addon:Addon" and r["inputs"]["addonName"] == "eks-node-monitoring-agent"]
    assert json.loads(addon["inputs"]["configurationValues"])["dcgmAgent"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert addon["inputs"]["addonVersion"].startswith("<unknown: version of aws:eks/getAddonVersion eks-node-monitoring-agent on Kubernetes 1.34")
