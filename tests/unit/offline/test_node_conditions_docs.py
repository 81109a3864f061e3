"""The node-condition table (docs/health.md) is generated from the agent's reasons.yaml, and NVIDIA's
DCGM dashboard is loaded from a pinned upstream commit, only where Prometheus runs."""

from __future__ import annotations

import re

from tests.support.harness import PROJECT_ROOT

from eks_gpu_training.addons.dcgm_dashboard import DASHBOARD_URL, dcgm_dashboard_config_map
from eks_gpu_training.offline import node_conditions

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def test_readme_node_condition_table_matches_the_agents_reasons(reference_dir):
    reasons = node_conditions.load_reasons(reference_dir / "eks-node-monitoring-agent-1.7.0" / "reasons.yaml")
    readme = (PROJECT_ROOT / node_conditions.PAGE).read_text()
    assert readme == node_conditions.updated_readme(readme, reasons), "run `python -m eks_gpu_training.offline.node_conditions --write`"


def test_the_table_lists_every_condition_with_its_repair_wait(reference_dir):
    reasons = node_conditions.load_reasons(reference_dir / "eks-node-monitoring-agent-1.7.0" / "reasons.yaml")
    assert set(reasons) == set(node_conditions.REPAIR_AFTER_MINUTES)
    rows = node_conditions.table(reasons).splitlines()
    assert "| `AcceleratedHardwareReady` (10 min) | `NvidiaXID%dError` | Fatal: the condition turns False | A critical GPU error occurred. |" in rows
    assert "| `AcceleratedHardwareReady` (10 min) | `DCGMError` | Fatal: the condition turns False | Connection to the DCGM host process was lost or could not be established. |" in rows
    assert sum(row.startswith("| `") for row in rows) == sum(len(entries) for entries in reasons.values())


def test_the_dashboard_is_nvidias_file_at_a_pinned_commit():
    assert re.fullmatch(
        r"https://raw\.githubusercontent\.com/NVIDIA/dcgm-exporter/[0-9a-f]{40}/grafana/dcgm-exporter-dashboard\.json", DASHBOARD_URL
    )


def test_the_dashboard_config_map_is_labelled_for_grafanas_sidecar_which_downloads_it():
    config_map = dcgm_dashboard_config_map("gpu-operator")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    # k8s-sidecar downloads a key ending in .url and writes it without the suffix.
    assert config_map["data"] == {"dcgm-exporter-dashboard.json.url": DASHBOARD_URL}


def test_the_dashboard_ships_only_with_the_prometheus_operator(prod_graph, health_graph):
    assert not [c for c in prod_graph.of_type(CONFIG_MAP) if c.inputs["metadata"]["name"] == "dcgm-exporter-dashboard"]
    (dashboard,) = [c for c in health_graph.of_type(CONFIG_MAP) if c.inputs["metadata"]["name"] == "dcgm-exporter-dashboard"]
    assert dashboard.inputs["metadata"]["namespace"] == "gpu-operator"
    assert health_graph.depends_on(dashboard, health_graph.one("kubernetes:core/v1:Namespace", "gpu-training-gpu-operator-namespace"))
