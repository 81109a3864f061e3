"""The health gate beside a local cluster.

In a deployment the gate runs as its Deployment's pod with its ServiceAccount's token. KWOK runs no
container, so on a local cluster that pod is placed and Running but does nothing; the gate's own
program (``eks_gpu_training.healthgate``) runs here instead, with the cluster's kubeconfig,
impersonating the gate's ServiceAccount: the same RBAC and the same admission policy judge every
write it makes, and what it decides is the program's own. Only its check containers' verdict is
simulated (``node_health.run_checks``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..healthgate.gate_settings import CONFIG_KEY
from ..workloads.health_gate import NAME, NAMESPACE, SERVICE_ACCOUNT
from .layout import Layout
from .processes import Process

GATE_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
"""Who the gate beside the cluster acts as: its ServiceAccount, as in the cluster."""


def gate_deployed(stack_objects: list[dict[str, Any]]) -> bool:
    """Whether the stack deploys the gate (its settings' ConfigMap is in the render)."""
    return any(o.get("kind") == "ConfigMap" and o["metadata"].get("namespace") == NAMESPACE
               and CONFIG_KEY in (o.get("data") or {}) for o in stack_objects)


def health_gate_process(layout: Layout) -> Process:
    """The gate's program, run by this interpreter (it has the package), as the gate's ServiceAccount.
    It starts before the gate's ConfigMap and RBAC are applied and retries until they are."""
    return Process("health-gate", Path(sys.executable), (
        "-m", "eks_gpu_training.healthgate", f"--namespace={NAMESPACE}", f"--config-map={NAME}",
        f"--kubeconfig={layout.kubeconfig}", f"--as={GATE_USER}",
    ), after=("kube-apiserver",))
