"""The health gate's check pod: the template the gate fills in for every joining GPU node.

Per node: ``efa`` (pools with EFA) counts the EFA devices the device plugin gave the pod, which asks
for every device the pool's instance type has; ``efa-loopback`` (with
``healthGate.efaLoopbackImage``) runs a libfabric ping-pong over the node's first EFA device;
``dcgm`` runs ``dcgmi diag -r <healthGate.dcgmLevel>`` on every GPU against a host engine started in
the pod (``preflight.dcgm_diag_script``). The pod asks for every GPU and EFA device of its node, so
it starts only once the device plugins advertise them all. Its containers drop every capability;
the EFA checks run as a non-root user on a read-only root filesystem, the DCGM check as root
(``DCGM_SECURITY`` says why). Its images come from ``images.registryMirrors`` here: they travel in
the gate's ConfigMap, where no transform sees them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi

from ..config import HealthGateConfig
from ..facts.gpu_nodes import gpu_toleration
from ..facts.images import mirrored
from ..healthgate.gate_settings import CHECK_LABELS, STARTUP_TAINT_EFFECT, STARTUP_TAINT_KEY
from .preflight_jobs import DCGM_POD_CPU, DCGM_POD_MEMORY, dcgm_diag_script

RUN_AS_USER = 65532
"""The image's numeric non-root user (``USER 65532:65532`` in its Dockerfile)."""
CHECK_PRIORITY_CLASS = "health-gate-check"
"""The check pods' PriorityClass: value 0, ``preemptionPolicy: Never``, so a check never preempts
the pods holding its node's devices. The API server refuses a pod whose policy differs from its
class's (kubernetes plugin/pkg/admission/priority)."""
FI_PINGPONG = "/opt/amazon/efa/bin/fi_pingpong"
"""libfabric's ping-pong test where AWS's EFA installer (and so AWS's nccl-tests image) puts it."""
LOOPBACK_SECONDS = 60
CHECK_CPU, CHECK_MEMORY = "100m", "128Mi"
"""Requests of the EFA checks beside their devices (a device listing, a ping-pong)."""

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

EFA_CHECK_SECURITY = {**RESTRICTED, "runAsGroup": RUN_AS_USER}
"""The EFA checks: no capability, a non-root user and group, a read-only root filesystem.
``fi_pingpong`` needs only the node's uverbs device (Linux Documentation/infiniband/user_verbs.rst);
no ``IPC_LOCK``, which training pods lack too, so a loopback proves what they can do."""

DCGM_SECURITY = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "runAsUser": 0,
    "runAsNonRoot": False,
    "readOnlyRootFilesystem": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The DCGM check: root without capabilities, on a writable root filesystem. Root: parts of the
diagnostics need it (nv-hostengine reference; DCGM ``IsRunningAsRoot``); no capability: the driver's
device files are mode 0666; writable: the host engine writes its log and pid file under /var."""


def efa_loopback_script() -> str:
    """A ping-pong over EFA between two processes of the pod (the server, then a client of it on
    the loopback address), with the EFA provider's shared-memory shortcut off so the bytes cross
    the device; fails when either side fails or takes longer than ``LOOPBACK_SECONDS``."""
    command = f"timeout {LOOPBACK_SECONDS} {FI_PINGPONG} -p efa -e rdm -I 100"
    return "\n".join([
        "set -eu",
        "export FI_EFA_ENABLE_SHM_TRANSFER=0 FI_EFA_USE_HUGE_PAGE=0",
        f"{command} & server=$!",
        "sleep 2",
        f"{command} 127.0.0.1",
        'wait "$server"',
    ])


def _pulled(image: Any, mirrors: Mapping[str, str]) -> Any:
    """``image`` from its registry's mirror; an Output (the gate's image built in the same program,
    at the stack's own ECR) mirrored once known."""
    if isinstance(image, str):
        return mirrored(image, mirrors)
    if isinstance(image, pulumi.Output):
        return image.apply(lambda value: mirrored(value, mirrors))
    return image


def check_pod(gate_image: Any, config: HealthGateConfig, mirrors: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """The check pod's template, without the node and device counts the gate fills in
    (``healthgate.node_check.check_job``); each image under its registry's mirror in ``mirrors``
    (``images.registryMirrors``; default: none)."""
    mirrors = mirrors or {}
    init: list[dict[str, Any]] = [{
        "name": "efa",
        "image": _pulled(gate_image, mirrors),
        "command": ["python", "-m", "healthgate.efa"],
        "resources": {"requests": {"cpu": CHECK_CPU, "memory": CHECK_MEMORY}},
        "securityContext": EFA_CHECK_SECURITY,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }]
    if config.efa_loopback_image is not None:
        init.append({
            "name": "efa-loopback",
            "image": _pulled(config.efa_loopback_image, mirrors),
            "command": ["/bin/bash", "-c", efa_loopback_script()],
            "resources": {"requests": {"cpu": CHECK_CPU, "memory": CHECK_MEMORY}},
            "securityContext": EFA_CHECK_SECURITY,
            "terminationMessagePolicy": "FallbackToLogsOnError",
        })
    dcgm = {
        "name": "dcgm",
        "image": _pulled(config.dcgm_image, mirrors),
        "command": ["/bin/bash", "-c", dcgm_diag_script(config.dcgm_level)],
        "resources": {"requests": {"cpu": DCGM_POD_CPU, "memory": DCGM_POD_MEMORY}},
        "securityContext": DCGM_SECURITY,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    return {
        "metadata": {"labels": dict(CHECK_LABELS)},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "priorityClassName": CHECK_PRIORITY_CLASS,
            "tolerations": [gpu_toleration(), {"key": STARTUP_TAINT_KEY, "operator": "Exists", "effect": STARTUP_TAINT_EFFECT}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": init,
            "containers": [dcgm],
        },
    }
