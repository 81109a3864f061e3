"""Kueue and Karpenter's KWOK provider, run beside the local cluster with the stack's own settings.

Both run out of cluster on loopback, the way their own integration tests run them (envtest):
Kueue with the configuration its chart renders for the stack (only listen addresses, certificates
and leader election changed), serving its webhooks at ``https://127.0.0.1:PORT`` with a certificate
from the local CA; Karpenter's core with the KWOK cloud provider, the chart's own controller
settings (``FEATURE_GATES``, batching, policies) and the stack's instance types.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Optional

import yaml

from ..facts import yaml_io
from .build import KARPENTER_KWOK, KUEUE
from .errors import LocalError
from .layout import File, Layout
from .pki import kueue_webhook_secret_data
from .processes import Process, Ready

KUEUE_CONFIG_MAP = ("kueue-system", "kueue-manager-config")
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_WEBHOOK_SERVICE = ("kueue-system", "kueue-webhook-service")
KARPENTER_DEPLOYMENT = ("kube-system", "karpenter")
KARPENTER_NAMESPACE = "kube-system"
KUEUE_FEATURE_GATES = "VisibilityOnDemand=false"
"""Kueue's visibility API server listens on a fixed port and is reached through an APIService,
which the local cluster leaves out (``platform.localize``)."""
CHART_FIX = "the local cluster runs the chart versions the library pins; render the stack and compare its chart with them"


def _find(objects: list[dict[str, Any]], kind: str, namespace: str, name: str) -> Optional[dict[str, Any]]:
    for obj in objects:
        metadata = obj.get("metadata") or {}
        if obj.get("kind") == kind and metadata.get("name") == name and metadata.get("namespace") == namespace:
            return obj
    return None


def _chart_kueue_configuration(chart_objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The Kueue configuration the chart renders into its ConfigMap."""
    config_map = _find(chart_objects, "ConfigMap", *KUEUE_CONFIG_MAP)
    if config_map is None:
        raise LocalError(f"the Kueue chart rendered no ConfigMap {'/'.join(KUEUE_CONFIG_MAP)}", CHART_FIX)
    return yaml_io.load(config_map["data"][KUEUE_CONFIG_KEY])


def kueue_configuration(chart_objects: list[dict[str, Any]], *, webhook_port: int, health_port: int,
                        cert_dir: Path) -> dict[str, Any]:
    """The chart's Kueue configuration, listening on loopback. Its own certificate management stays
    on (with it off, Kueue reads metrics certificates from a fixed path under /etc); it keeps the
    certificates ``kueue_webhook_secret`` puts in its Secret."""
    configuration = _chart_kueue_configuration(chart_objects)
    configuration["webhook"] = {**(configuration.get("webhook") or {}), "port": webhook_port, "host": "127.0.0.1",
                                "certDir": str(cert_dir)}
    configuration["leaderElection"] = {"leaderElect": False}
    configuration["health"] = {"healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    configuration["metrics"] = {"bindAddress": "0"}
    return configuration


def kueue_webhook_secret(chart_objects: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The Secret Kueue's certificate controller reads (named by the chart's configuration), with
    certificates valid for loopback; and the CA bundle that verifies them."""
    configuration = _chart_kueue_configuration(chart_objects)
    certs = configuration.get("internalCertManagement") or {}
    namespace = configuration.get("namespace") or KUEUE_CONFIG_MAP[0]
    data = kueue_webhook_secret_data(f"{certs['webhookServiceName']}.{namespace}.svc")
    secret = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": certs["webhookSecretName"], "namespace": namespace},
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }
    return secret, base64.b64encode(data["ca.crt"]).decode()


def kueue_files(layout: Layout, chart_objects: list[dict[str, Any]], secret: dict[str, Any]) -> tuple[File, ...]:
    """Kueue's configuration, listening where the layout says, and its webhook Secret's files in
    its certificate folder, as the chart's Deployment mounts the Secret there."""
    configuration = kueue_configuration(chart_objects, webhook_port=layout.ports["kueue-webhook"],
                                        health_port=layout.ports["kueue-health"], cert_dir=layout.kueue_certs)
    certificates = tuple(File(layout.kueue_certs / key, base64.b64decode(value), 0o600)
                         for key, value in secret["data"].items())
    return (File(layout.kueue_config, yaml.safe_dump(configuration, sort_keys=False).encode()), *certificates)


def kueue_feature_gates(chart_objects: list[dict[str, Any]]) -> str:
    """The ``--feature-gates`` of the chart's Kueue Deployment (the stack's ``featureGates``), and
    the local cluster's own (``KUEUE_FEATURE_GATES``)."""
    gates = []
    for deployment in chart_objects:
        if deployment.get("kind") != "Deployment" or deployment["metadata"].get("namespace") != KUEUE_CONFIG_MAP[0]:
            continue
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            gates += [arg.split("=", 1)[1] for arg in container.get("args") or [] if arg.startswith("--feature-gates=")]
    return ",".join([*gates, KUEUE_FEATURE_GATES])


def kueue_process(layout: Layout, chart_objects: Optional[list[dict[str, Any]]] = None) -> Process:
    """Kueue, ready once its certificate controller has written the serving certificate and the
    webhook server answers with it; its webhook Secret and webhook configurations must be in place."""
    return Process("kueue", layout.binary(KUEUE, "kueue"), (
        f"--config={layout.kueue_config}", f"--kubeconfig={layout.kubeconfig}",
        f"--feature-gates={kueue_feature_gates(chart_objects or [])}", "--zap-log-level=2",
    ), env={"KUBECONFIG": str(layout.kubeconfig)}, after=("kube-apiserver",),
        ready=Ready(f"{layout.url('kueue-health')}/readyz"))


def karpenter_environment(chart_objects: list[dict[str, Any]]) -> dict[str, str]:
    """The controller settings of the chart's Karpenter Deployment (plain values only)."""
    deployment = _find(chart_objects, "Deployment", *KARPENTER_DEPLOYMENT)
    if deployment is None:
        raise LocalError(f"the Karpenter chart rendered no Deployment {'/'.join(KARPENTER_DEPLOYMENT)}", CHART_FIX)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}


def karpenter_files(layout: Layout, instance_types: list[dict[str, Any]]) -> tuple[File, ...]:
    """The instance types Karpenter's KWOK provider offers (``fleet.karpenter_instance_types``)."""
    return (File(layout.karpenter_instance_types, (json.dumps(instance_types, indent=2) + "\n").encode()),)


def karpenter_process(layout: Layout, chart_objects: list[dict[str, Any]]) -> Process:
    env = {
        **karpenter_environment(chart_objects),
        "KUBECONFIG": str(layout.kubeconfig),
        "SYSTEM_NAMESPACE": KARPENTER_NAMESPACE,
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(layout.ports["karpenter-metrics"]),
        "HEALTH_PROBE_PORT": str(layout.ports["karpenter-health"]),
        "INSTANCE_TYPES_FILE_PATH": str(layout.karpenter_instance_types),
    }
    return Process("karpenter", layout.binary(KARPENTER_KWOK, "karpenter-kwok"), env=env, after=("kube-apiserver",),
                   ready=Ready(f"{layout.url('karpenter-health')}/readyz"))


KWOK_NODE_CLASS_CRD = ("kwoknodeclasses.karpenter.kwok.sh", "karpenter.kwok.sh_kwoknodeclasses.yaml")
"""The KWOK provider's KWOKNodeClass CRD: its name, and its file in the module Karpenter was built from."""
