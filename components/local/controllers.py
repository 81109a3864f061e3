"""Kueue and Karpenter's KWOK provider, run beside the local cluster with the stack's own settings.

Both run out of cluster on loopback, the way their own integration tests run them (envtest):
Kueue with the configuration its chart renders for the stack (only listen addresses, certificates
and leader election changed), serving its webhooks at ``https://127.0.0.1:PORT`` with a certificate
from the local CA; Karpenter's core with the KWOK cloud provider, the chart's own controller
settings (``FEATURE_GATES``, batching, policies) and the stack's instance types.
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from pathlib import Path
from typing import Any, Optional

import yaml

from .build import KARPENTER_KWOK, KUEUE, bin_dir
from .pki import kueue_webhook_secret_data
from .processes import Started, Supervisor, free_port

KUEUE_CONFIG_MAP = ("kueue-system", "kueue-manager-config")
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_WEBHOOK_SERVICE = ("kueue-system", "kueue-webhook-service")
KARPENTER_DEPLOYMENT = ("kube-system", "karpenter")
KARPENTER_NAMESPACE = "kube-system"
READY_TIMEOUT_SECONDS = 120
KUEUE_FEATURE_GATES = "VisibilityOnDemand=false"
"""Kueue's visibility API server listens on a fixed port and is reached through an APIService,
which the local cluster leaves out (``platform.localize``)."""


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
        raise ValueError(f"the Kueue chart rendered no ConfigMap {'/'.join(KUEUE_CONFIG_MAP)}")
    return yaml.safe_load(config_map["data"][KUEUE_CONFIG_KEY])


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


def _ready(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=2, context=context if url.startswith("https") else None) as response:  # noqa: S310 - loopback
        return response.status == 200


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


def start_kueue(supervisor: Supervisor, state: Path, kubeconfig: Path, chart_objects: list[dict[str, Any]], *,
                webhook_port: int, secret: dict[str, Any]) -> Started:
    """Start Kueue, its webhook Secret and webhook configurations already in place. The Secret's
    files go to its certificate folder, as the chart's Deployment mounts the Secret there."""
    health_port = free_port()
    cert_dir = state / "kueue-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    for key, value in secret["data"].items():
        (cert_dir / key).write_bytes(base64.b64decode(value))
        (cert_dir / key).chmod(0o600)
    configuration = kueue_configuration(chart_objects, webhook_port=webhook_port, health_port=health_port,
                                        cert_dir=cert_dir)
    config_file = state / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(configuration, sort_keys=False))
    process = supervisor.start("kueue", [
        str(bin_dir(KUEUE) / "kueue"), f"--config={config_file}", f"--kubeconfig={kubeconfig}",
        f"--feature-gates={KUEUE_FEATURE_GATES}", "--zap-log-level=2",
    ], env={"KUBECONFIG": str(kubeconfig)})
    # Ready once its certificate controller has written the serving certificate and the webhook
    # server answers with it.
    supervisor.wait_for(process, lambda: _ready(f"http://127.0.0.1:{health_port}/readyz"),
                        timeout=READY_TIMEOUT_SECONDS, what="ready")
    return process


def karpenter_environment(chart_objects: list[dict[str, Any]]) -> dict[str, str]:
    """The controller settings of the chart's Karpenter Deployment (plain values only)."""
    deployment = _find(chart_objects, "Deployment", *KARPENTER_DEPLOYMENT)
    if deployment is None:
        raise ValueError(f"the Karpenter chart rendered no Deployment {'/'.join(KARPENTER_DEPLOYMENT)}")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}


def start_karpenter(supervisor: Supervisor, state: Path, kubeconfig: Path, chart_objects: list[dict[str, Any]],
                    instance_types_file: Path) -> Started:
    metrics_port, health_port = free_port(), free_port()
    env = {
        **karpenter_environment(chart_objects),
        "KUBECONFIG": str(kubeconfig),
        "SYSTEM_NAMESPACE": KARPENTER_NAMESPACE,
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(metrics_port),
        "HEALTH_PROBE_PORT": str(health_port),
        "INSTANCE_TYPES_FILE_PATH": str(instance_types_file),
    }
    process = supervisor.start("karpenter", [str(bin_dir(KARPENTER_KWOK) / "karpenter-kwok")], env=env)
    supervisor.wait_for(process, lambda: _ready(f"http://127.0.0.1:{health_port}/readyz"),
                        timeout=READY_TIMEOUT_SECONDS, what="ready")
    return process


def kwok_crds() -> list[dict[str, Any]]:
    """The KWOK provider's KWOKNodeClass CRD, from the module Karpenter was built from."""
    folder = bin_dir(KARPENTER_KWOK)
    return [yaml.safe_load((folder / "karpenter.kwok.sh_kwoknodeclasses.yaml").read_text())]
