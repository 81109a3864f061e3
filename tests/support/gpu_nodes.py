"""A GPU node as the cluster tier's fault and repair tests read it: found by name, its taints and
conditions, whether the health gate has admitted it, and a GPU fault reported on it."""

from __future__ import annotations

from typing import Any, Optional

from kubernetes.client.exceptions import ApiException

from tests.support.clusters import RunningCluster
from eks_gpu_training.healthgate.gate_settings import CONDITION_TYPE, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY
from eks_gpu_training.local.faults import condition_fault
from eks_gpu_training.local.node_repair import SECONDS_PER_REPAIR_MINUTE

REPAIR_WAIT_SECONDS = 10 * SECONDS_PER_REPAIR_MINUTE
"""EKS node auto repair's 10 minutes for AcceleratedHardwareReady, as the local cluster scales them."""


def node(running: RunningCluster, name: str) -> Optional[Any]:
    """The node, or None once it is gone (read alone: the fault tests ask often)."""
    try:
        return running.env.core.read_node(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def taint_keys(found: Any) -> set[str]:
    return {t.key for t in found.spec.taints or []}


def condition(found: Any, kind: str) -> Optional[Any]:
    return next((c for c in found.status.conditions or [] if c.type == kind), None)


def _admitted(found: Optional[Any]) -> bool:
    if found is None or STARTUP_TAINT_KEY in taint_keys(found):
        return False
    passed = condition(found, CONDITION_TYPE)
    return passed is not None and passed.status == "True"


def admitted(running: RunningCluster, name: str) -> bool:
    """The node is there, the gate lifted its startup taint and its checks passed."""
    return _admitted(node(running, name))


def ready_for_work(running: RunningCluster, name: str) -> bool:
    """Admitted and out of quarantine. A node whose GPU fault was cleared keeps its startup taint
    lifted while the gate takes it out of quarantine and then checks it again (``healthgate.decide``):
    admitted, but no place for work until that check has passed."""
    found = node(running, name)
    return _admitted(found) and QUARANTINE_TAINT_KEY not in taint_keys(found)


def gpu_fault(running: RunningCluster, name: str) -> None:
    """The node monitoring agent's condition for failed GPUs (XID 79), as ``local fault`` sets it."""
    running.cluster.faults().set_condition(name, condition_fault("AcceleratedHardwareReady=False", "NvidiaXID79Error", None))
