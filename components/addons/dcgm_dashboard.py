"""NVIDIA's DCGM exporter Grafana dashboard, as a ConfigMap Grafana's dashboard sidecar loads.

The dashboard is NVIDIA's own, unmodified: ``grafana/dcgm-exporter-dashboard.json`` of
github.com/NVIDIA/dcgm-exporter (Apache-2.0), pinned to commit ``DASHBOARD_COMMIT``. The library does
not carry a copy: the ConfigMap names the file's address under a key ending in ``.url``, and Grafana's
dashboard sidecar (kiwigrid/k8s-sidecar, which kube-prometheus-stack runs as
``grafana.sidecar.dashboards``) downloads it: "If the filename ends with `.url` suffix, the content
will be processed as a URL which the target file contents will be downloaded from" (k8s-sidecar
README). Grafana's pod therefore needs egress to raw.githubusercontent.com once; in a cluster without
it, load the same file through Grafana's own provisioning instead.

It charts the metrics the GPU Operator's DCGM exporter serves (temperature, power, SM clocks,
utilisation, framebuffer, tensor cores), so it is shipped only where the stack also makes the
exporter's ServiceMonitor (``gpuOperator.prometheusOperator``). The sidecar loads every ConfigMap
labelled ``grafana_dashboard: "1"`` in the namespaces it searches (kube-prometheus-stack:
``searchNamespace: ALL``).
"""

from __future__ import annotations

from typing import Any

DASHBOARD_COMMIT = "d5e5f510a1b6b393f39a43293ccd9dc985defc79"
"""The dcgm-exporter commit the dashboard is pinned to (the file itself last changed in cffaeb8)."""
DASHBOARD_URL = (
    f"https://raw.githubusercontent.com/NVIDIA/dcgm-exporter/{DASHBOARD_COMMIT}/grafana/dcgm-exporter-dashboard.json"
)
"""Where the sidecar downloads the dashboard from: a commit, never a branch, so it cannot change under the stack."""
DASHBOARD_FILE_NAME = "dcgm-exporter-dashboard.json"
"""The file the sidecar writes into Grafana's dashboard folder."""

GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")
"""The label Grafana's dashboard sidecar selects (kube-prometheus-stack's default ``label``/``labelValue``)."""
CONFIG_MAP_NAME = "dcgm-exporter-dashboard"


def dcgm_dashboard_config_map(namespace: str) -> dict[str, Any]:
    """The ConfigMap that points Grafana's sidecar at NVIDIA's dashboard, labelled for the sidecar."""
    key, value = GRAFANA_DASHBOARD_LABEL
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP_NAME,
            "namespace": namespace,
            "labels": {key: value, "app.kubernetes.io/part-of": "eks-gpu-training", "app.kubernetes.io/managed-by": "pulumi"},
        },
        "data": {f"{DASHBOARD_FILE_NAME}.url": DASHBOARD_URL},
    }
