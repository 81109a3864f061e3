"""The JobSet and Kubeflow Trainer controllers, run beside the local cluster with their charts' own
configuration, as Kueue is (``controllers.py``).

Each runs out of cluster on loopback with the configuration its chart renders into its ConfigMap;
only what ties it to a pod changes: the webhook server listens on ``127.0.0.1`` with a serving
certificate made here, the health probes on loopback, no metrics server, no leader election, and
the controllers' own certificate management is off (it would write to a fixed folder under /tmp,
shared by every local cluster on the machine, and issue certificates for the Service name only).
Their webhook configurations point at them by URL with the certificate's CA (``platform.localize``).
Each acts as its chart's ServiceAccount (a kubeconfig of its own impersonating it), as its pod's
token would: the charts' RBAC and the stack's admission policy for it (``addons.job_api_admission``)
judge every write, so that RBAC and policy come with the webhook configurations, before the
controller starts (``identity_objects``), as on EKS the policy comes before the release. The charts' Deployments are applied as rendered, so the scheduler still
proves they fit on the system nodes; the webhook Secrets they render stay empty, as nothing reads
them here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from ..addons.job_apis import (
    JOBSET_FENCE,
    JOBSET_NAMESPACE,
    JOBSET_SERVICE_ACCOUNT,
    TRAINER_FENCE,
    TRAINER_NAMESPACE,
    TRAINER_SERVICE_ACCOUNT,
)
from ..addons.labeler_admission import service_account_user
from ..facts import yaml_io
from .build import JOBSET, KUBEFLOW_TRAINER, GoComponent
from .control_plane import kubeconfig_document
from .controllers import CHART_FIX
from .errors import LocalError
from .layout import File, Layout
from .pki import webhook_certificates
from .processes import Process, Ready

CONFIG_KEY = "controller_manager_config.yaml"
"""The key of both charts' ConfigMaps holding the controller's ``Configuration``."""
WEBHOOK_CERT_FOLDER = Path("k8s-webhook-server") / "serving-certs"
"""Where controller-runtime's webhook server reads ``tls.crt`` and ``tls.key`` by default, under
the temporary folder (``os.TempDir``): Trainer's configuration names no folder of its own."""


@dataclass(frozen=True)
class JobController:
    """One of the two controllers: where its chart puts things and how it runs here."""

    name: str
    """The process name, and the prefix of its ports (``<name>-webhook``, ``<name>-health``)."""
    component: GoComponent
    binary: str
    config_map: tuple[str, str]
    """The chart's ConfigMap (namespace, name) holding the controller's configuration."""
    webhook_service: tuple[str, str]
    """The chart's webhook Service (namespace, name), which its webhook configurations name."""
    service_account: tuple[str, str]
    """The chart's ServiceAccount (namespace, name) the controller's pod runs as, and it acts as here."""
    fence: str
    """The stack's ValidatingAdmissionPolicy (and binding) for that ServiceAccount."""

    def folder(self, layout: Layout) -> Path:
        return layout.state / self.name

    def config_path(self, layout: Layout) -> Path:
        return self.folder(layout) / "config.yaml"

    def kubeconfig(self, layout: Layout) -> Path:
        return self.folder(layout) / "kubeconfig"

    @property
    def user(self) -> str:
        return service_account_user(*self.service_account)

    def cert_folder(self, layout: Layout) -> Path:
        return self.folder(layout) / "tmp" / WEBHOOK_CERT_FOLDER


JOBSET_CONTROLLER = JobController(
    "jobset", JOBSET, "jobset", ("jobset-system", "jobset-controller-config"), ("jobset-system", "jobset-webhook-service"),
    (JOBSET_NAMESPACE, JOBSET_SERVICE_ACCOUNT), JOBSET_FENCE,
)
"""The names of the ``jobset`` release (``addons.job_apis``: release ``jobset`` in ``jobset-system``)."""
TRAINER_CONTROLLER = JobController(
    "trainer", KUBEFLOW_TRAINER, "trainer-controller-manager", ("kubeflow-system", "kubeflow-trainer-config"),
    ("kubeflow-system", "kubeflow-trainer-controller-manager"), (TRAINER_NAMESPACE, TRAINER_SERVICE_ACCOUNT), TRAINER_FENCE,
)
"""The names of the ``kubeflow-trainer`` release in ``kubeflow-system``."""
JOB_CONTROLLERS = (JOBSET_CONTROLLER, TRAINER_CONTROLLER)


def _config_map(chart_objects: list[dict[str, Any]], namespace: str, name: str) -> Optional[dict[str, Any]]:
    for obj in chart_objects:
        metadata = obj.get("metadata") or {}
        if obj.get("kind") == "ConfigMap" and metadata.get("namespace") == namespace and metadata.get("name") == name:
            return obj
    return None


def installed(controller: JobController, chart_objects: list[dict[str, Any]]) -> bool:
    """Whether the stack installs the controller (its chart rendered its ConfigMap)."""
    return _config_map(chart_objects, *controller.config_map) is not None


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def identity_objects(controller: JobController, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The controller's ServiceAccount, the roles granted to it and their bindings, then its admission
    policy and the policy's binding."""
    namespace, name = controller.service_account
    rbac = [o for o in objects if o.get("kind") in RBAC_KINDS]
    account = [o for o in rbac if o["kind"] == "ServiceAccount" and o["metadata"].get("name") == name
               and o["metadata"].get("namespace") == namespace]
    bindings = [o for o in rbac if o["kind"].endswith("Binding") and any(
        s.get("kind") == "ServiceAccount" and s.get("name") == name and s.get("namespace") == namespace
        for s in o.get("subjects") or [])]
    granted = {(b["roleRef"]["kind"], b["metadata"].get("namespace") if b["roleRef"]["kind"] == "Role" else None,
                b["roleRef"]["name"]) for b in bindings}
    roles = [o for o in rbac if o["kind"] in ("ClusterRole", "Role")
             and (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) in granted]
    fence = [o for o in objects if o.get("kind") in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
             and o["metadata"].get("name") == controller.fence]
    return account + roles + bindings + sorted(fence, key=lambda o: o["kind"])


def chart_configuration(controller: JobController, chart_objects: list[dict[str, Any]]) -> dict[str, Any]:
    config_map = _config_map(chart_objects, *controller.config_map)
    if config_map is None or CONFIG_KEY not in (config_map.get("data") or {}):
        raise LocalError(f"the {controller.name} chart rendered no ConfigMap {'/'.join(controller.config_map)} "
                         f"with {CONFIG_KEY}", CHART_FIX)
    return yaml_io.load(config_map["data"][CONFIG_KEY])


def local_configuration(controller: JobController, chart_objects: list[dict[str, Any]], layout: Layout) -> dict[str, Any]:
    """The chart's configuration listening on loopback (see the module docstring)."""
    configuration = chart_configuration(controller, chart_objects)
    webhook_port = layout.ports[f"{controller.name}-webhook"]
    health = f"127.0.0.1:{layout.ports[f'{controller.name}-health']}"
    configuration["webhook"] = {**(configuration.get("webhook") or {}), "port": webhook_port, "host": "127.0.0.1"}
    configuration["health"] = {**(configuration.get("health") or {}), "healthProbeBindAddress": health}
    configuration["metrics"] = {"bindAddress": "0"}
    configuration["leaderElection"] = {**(configuration.get("leaderElection") or {}), "leaderElect": False}
    if controller is JOBSET_CONTROLLER:
        configuration["webhook"]["certDir"] = str(controller.cert_folder(layout))
        configuration["internalCertManagement"] = {**(configuration.get("internalCertManagement") or {}), "enable": False}
    else:
        configuration["certManagement"] = {**(configuration.get("certManagement") or {}), "enable": False}
    return configuration


def webhook_files(controller: JobController, chart_objects: list[dict[str, Any]], layout: Layout) -> tuple[tuple[File, ...], str]:
    """The controller's configuration and serving certificate; and the CA bundle that verifies it."""
    namespace, service = controller.webhook_service
    certificates = webhook_certificates(f"{service}.{namespace}.svc", f"{controller.name}-local-ca", controller.name)
    folder = controller.cert_folder(layout)
    kubeconfig = kubeconfig_document(layout.server, layout.pki, impersonate=controller.user)
    files = (
        File(controller.config_path(layout), yaml.safe_dump(local_configuration(controller, chart_objects, layout), sort_keys=False).encode()),
        File(controller.kubeconfig(layout), yaml.safe_dump(kubeconfig, sort_keys=False).encode()),
        File(folder / "tls.crt", certificates["tls.crt"]),
        File(folder / "tls.key", certificates["tls.key"], 0o600),
    )
    return files, base64.b64encode(certificates["ca.crt"]).decode()


def job_controller_process(controller: JobController, layout: Layout) -> Process:
    """The controller as its ServiceAccount, ready once its webhook server answers (its readiness
    check waits for it)."""
    return Process(
        controller.name, layout.binary(controller.component, controller.binary),
        (f"--config={controller.config_path(layout)}", "--zap-log-level=2"),
        # TMPDIR: where Trainer's webhook server finds its certificate (``WEBHOOK_CERT_FOLDER``).
        env={"KUBECONFIG": str(controller.kubeconfig(layout)), "TMPDIR": str(controller.folder(layout) / "tmp")},
        after=("kube-apiserver",), ready=Ready(f"{layout.url(f'{controller.name}-health')}/readyz"),
    )
