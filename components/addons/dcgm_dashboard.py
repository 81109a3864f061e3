"""NVIDIA's DCGM exporter Grafana dashboard, as a ConfigMap Grafana's dashboard sidecar loads.

The dashboard is NVIDIA's own, unmodified: ``dashboards/dcgm-exporter-dashboard.json`` is
``grafana/dcgm-exporter-dashboard.json`` of github.com/NVIDIA/dcgm-exporter (Apache-2.0) at commit
``DASHBOARD_COMMIT`` (git blob ``DASHBOARD_BLOB``). It charts the metrics the GPU Operator's DCGM
exporter serves (temperature, power, SM clocks, utilisation, framebuffer, tensor cores), so it is
shipped only where the stack also makes the exporter's ServiceMonitor (``gpuOperator.prometheusOperator``).

Grafana's sidecar (kube-prometheus-stack's ``grafana.sidecar.dashboards``) loads every ConfigMap
labelled ``grafana_dashboard: "1"`` in the namespaces it searches (kube-prometheus-stack:
``searchNamespace: ALL``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DASHBOARD_FILE = Path(__file__).with_name("dashboards") / "dcgm-exporter-dashboard.json"
DASHBOARD_SOURCE = "https://github.com/NVIDIA/dcgm-exporter/blob/{commit}/grafana/dcgm-exporter-dashboard.json"
DASHBOARD_COMMIT = "d5e5f510a1b6b393f39a43293ccd9dc985defc79"
"""The dcgm-exporter commit the file was taken at (the file last changed in cffaeb8, 2023-08-11)."""
DASHBOARD_BLOB = "c16810412c8f80d23eaea572fd1cfccb82f5977c"
"""``git hash-object`` of the file: a test checks the copy is byte for byte NVIDIA's."""

GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")
"""The label Grafana's dashboard sidecar selects (kube-prometheus-stack's default ``label``/``labelValue``)."""
CONFIG_MAP_NAME = "dcgm-exporter-dashboard"


def dcgm_dashboard_config_map(namespace: str) -> dict[str, Any]:
    """The ConfigMap holding NVIDIA's dashboard, labelled for Grafana's sidecar."""
    key, value = GRAFANA_DASHBOARD_LABEL
    text = DASHBOARD_FILE.read_text()
    json.loads(text)  # a corrupted copy fails here, not in Grafana
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP_NAME,
            "namespace": namespace,
            "labels": {key: value, "app.kubernetes.io/part-of": "eks-gpu-training", "app.kubernetes.io/managed-by": "pulumi"},
            "annotations": {"eks-gpu-training/source": DASHBOARD_SOURCE.format(commit=DASHBOARD_COMMIT)},
        },
        "data": {"dcgm-exporter-dashboard.json": text},
    }
