"""Faults injected into a local cluster's simulated nodes, as real API writes the controllers react to.

- ``condition``: a node condition set the way the EKS node monitoring agent sets it (type, status,
  one of the agent's own reasons from its ``reasons.yaml``, which the package ships); the simulated
  agent (``node_health``) keeps reporting it, as the agent does while the fault lasts;
- ``not-ready``: the node's kubelet stops: its Lease is taken over and never renewed, so KWOK, which
  renews only the leases it holds, stops too, and the node lifecycle controller marks the node
  ``Ready=Unknown`` and taints it ``node.kubernetes.io/unreachable`` after its grace period, as for
  a node that stopped answering;
- ``delete``: the Node object goes, as when its instance is terminated;
- ``fail-checks``: the health gate's checks on the node (or on every node of a pool, also nodes that
  join later) fail: the check's verdict is the simulated part, the gate's reaction is real;
- ``clear``: the node's condition fault, stopped kubelet and failing checks are undone (the agent
  reports the condition healthy, the Lease is deleted and KWOK takes it back).

What is recorded (condition and check faults) lives in one ConfigMap in ``kube-system``, which the
simulated agent and the simulated check runner read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from ..healthgate.gate_settings import REASONS
from ..offline.agent_data import AGENT_VERSION, reasons
from .errors import LocalError

FAULTS_CONFIG_MAP = ("kube-system", "eks-gpu-training-local-faults")
"""Where the recorded faults live: key ``node.<name>`` or ``pool.<pool>``, a JSON object."""
STOPPED_KUBELET = "stopped-kubelet"
"""The holder a stopped kubelet's Lease is given: neither KWOK's nor renewed by anyone."""
LEASE_YEAR_SECONDS = 365 * 24 * 3600
"""The taken Lease's duration: KWOK never sees it expire, so it never takes it back; the node
lifecycle controller ignores the duration and only sees that ``renewTime`` no longer moves."""
CHECKS = tuple(name for name in REASONS if name in ("efa", "efa-loopback", "dcgm"))
"""The check containers whose failure ``fail-checks`` can simulate."""
PULLABLE_CHECKS = ("dcgm",)
"""The checks whose image pull ``fail_pulls`` can fail: the check pod's main container. KWOK reports
every init container terminated as soon as the pod runs, and the API server never takes a
terminated container back to waiting."""
SIMULATED_CHECK_MESSAGES = {
    "dcgm": "simulated by the local cluster: dcgmi diag reported a failed test (Memory) on GPU 3",
    "efa": "simulated by the local cluster: fewer EFA devices in the pod than the pool has",
    "efa-loopback": "simulated by the local cluster: fi_pingpong over the EFA device timed out",
}


class FaultError(LocalError):
    """A fault the local cluster cannot inject as asked."""

    fix = "see `eks-gpu-training-local fault --help`, and the agent's reasons in docs/health.md"


@dataclass(frozen=True)
class ConditionFault:
    type: str
    status: str
    reason: str
    message: str

    def condition(self, now: str) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}


def _matches(template: str, reason: str) -> bool:
    return re.fullmatch(re.escape(template).replace("%d", r"\d+").replace("%s", r"\S+"), reason) is not None


def condition_fault(text: str, reason: Optional[str], message: Optional[str]) -> ConditionFault:
    """A condition fault from ``TYPE=STATUS`` and the agent's reason, refused (``FaultError``) where
    the agent would never report it so: a condition it does not set, a reason it does not have for
    it, a Warning reason with status False (the agent reports those as node events, the condition
    stays True), or a Fatal reason with status True."""
    kind, _, status = text.partition("=")
    known = reasons()
    if kind not in known:
        raise FaultError(f"{kind!r} is not a condition the node monitoring agent {AGENT_VERSION} sets; "
                         f"allowed: {', '.join(sorted(known))}")
    if status not in ("True", "False"):
        raise FaultError(f"a condition's status is True or False, not {status!r}")
    if status == "True":
        return ConditionFault(kind, "True", reason or f"{kind}IsReady",
                              message or "reported healthy by the local cluster's simulated agent")
    if not reason:
        fatal = sorted(entry["Template"] for entry in known[kind].values() if entry["DefaultSeverity"] == "Fatal")
        raise FaultError(f"--reason is required with {kind}=False: one of the agent's Fatal reasons for it ({', '.join(fatal)}; "
                         "%d is a number, e.g. NvidiaXID79Error)")
    entries = [entry for entry in known[kind].values() if _matches(entry["Template"], reason)]
    if not entries:
        raise FaultError(f"{reason!r} is not a reason the node monitoring agent {AGENT_VERSION} reports for {kind}")
    if not any(entry["DefaultSeverity"] == "Fatal" for entry in entries):
        raise FaultError(f"the agent reports {reason} as a Warning (a node event); {kind} stays True for it. "
                         "Give a Fatal reason to turn the condition False")
    description = next(entry["Description"] for entry in entries if entry["DefaultSeverity"] == "Fatal")
    return ConditionFault(kind, "False", reason, message or f"{description} (injected by eks-gpu-training-local fault)")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_key(node: str) -> str:
    return f"node.{node}"


def pool_key(pool: str) -> str:
    return f"pool.{pool}"


class Faults:
    """The faults of one local cluster, read and written through its API server."""

    def __init__(self, core: Any, coordination: Any):
        self.core = core
        self.coordination = coordination

    # --- the record ------------------------------------------------------------------------------

    def recorded(self) -> dict[str, dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        namespace, name = FAULTS_CONFIG_MAP
        try:
            data = self.core.read_namespaced_config_map(name, namespace).data or {}
        except ApiException as error:
            if error.status == 404:
                return {}
            raise
        return {key: json.loads(value) for key, value in data.items()}

    def _record(self, key: str, entry: Optional[dict[str, Any]]) -> None:
        from kubernetes.client.exceptions import ApiException

        namespace, name = FAULTS_CONFIG_MAP
        # A merge patch: null removes the key, anything else sets it; one key's change never undoes another's.
        patch = {"data": {key: json.dumps(entry, sort_keys=True) if entry else None}}
        try:
            self.core.patch_namespaced_config_map(name, namespace, patch)
        except ApiException as error:
            if error.status != 404:
                raise
            if entry:
                self.core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "namespace": namespace},
                                                                   "data": {key: patch["data"][key]}})

    def _update(self, key: str, **changes: Any) -> None:
        entry = {**self.recorded().get(key, {}), **changes}
        self._record(key, {k: v for k, v in entry.items() if v is not None})

    # --- the faults ------------------------------------------------------------------------------

    def _node(self, node: str) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.core.read_node(node)
        except ApiException as error:
            if error.status == 404:
                raise FaultError(f"the local cluster has no node {node!r}") from None
            raise

    def set_condition(self, node: str, fault: ConditionFault) -> None:
        """Record the fault (the simulated agent keeps reporting it) and report it now."""
        self._node(node)
        self._update(node_key(node), condition=fault.__dict__)
        self.core.patch_node_status(node, {"status": {"conditions": [fault.condition(_now())]}})

    def stop_kubelet(self, node: str) -> None:
        """Take the node's Lease over and never renew it: the kubelet's heartbeat stops."""
        self._node(node)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.coordination.patch_namespaced_lease(node, "kube-node-lease", {"spec": {
            "holderIdentity": STOPPED_KUBELET, "leaseDurationSeconds": LEASE_YEAR_SECONDS, "renewTime": now}})

    def restart_kubelet(self, node: str) -> bool:
        """Delete a stopped kubelet's Lease, so KWOK makes and renews it again; False when it was not stopped."""
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.coordination.read_namespaced_lease(node, "kube-node-lease")
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        if lease.spec.holder_identity != STOPPED_KUBELET:
            return False
        self.coordination.delete_namespaced_lease(node, "kube-node-lease")
        return True

    def delete(self, node: str) -> None:
        """Delete the Node object, as the cloud provider does when its instance is terminated."""
        self._node(node)
        self.core.delete_node(node)
        self._record(node_key(node), None)

    def fail_checks(self, check: str, *, node: Optional[str] = None, pool: Optional[str] = None) -> None:
        if check not in CHECKS:
            raise FaultError(f"{check!r} is not a check of the health gate; allowed: {', '.join(CHECKS)}")
        if node is not None:
            self._node(node)
        self._update(node_key(node) if node is not None else pool_key(str(pool)), checks=check)

    def fail_pulls(self, check: str, *, node: Optional[str] = None, pool: Optional[str] = None) -> None:
        """The image of the gate's check ``check`` cannot be pulled on the node (or pool), as the
        kubelet would report for a wrong tag or an unreachable registry."""
        if check not in PULLABLE_CHECKS:
            raise FaultError(f"{check!r} is not a check whose pull the local cluster can fail; allowed: {', '.join(PULLABLE_CHECKS)}")
        if node is not None:
            self._node(node)
        self._update(node_key(node) if node is not None else pool_key(str(pool)), pulls=check)

    def clear(self, *, node: Optional[str] = None, pool: Optional[str] = None) -> list[str]:
        """Undo what was injected on the node (or the pool); what was undone, in words. A node that
        is gone (Karpenter or a repair replaced it) has only its record dropped."""
        undone = []
        key = node_key(node) if node is not None else pool_key(str(pool))
        entry = self.recorded().get(key, {})
        if node is not None:
            try:
                self._node(node)
            except FaultError:
                if not entry:
                    raise
                self._record(key, None)
                return [f"node {node} is gone: what was injected on it is forgotten"]
            fault = entry.get("condition")
            if fault:
                healthy = condition_fault(f"{fault['type']}=True", None, None)
                self.core.patch_node_status(node, {"status": {"conditions": [healthy.condition(_now())]}})
                undone.append(f"{fault['type']} reported True again")
            if self.restart_kubelet(node):
                undone.append("the kubelet reports again (its Lease is KWOK's)")
        if entry.get("checks"):
            undone.append(f"the {entry['checks']} check passes again")
        if entry.get("pulls"):
            undone.append(f"the {entry['pulls']} check's image is pulled again")
        self._record(key, None)
        return undone


def simulated_check_failure(recorded: dict[str, dict[str, Any]], node: str, pool: Optional[str], *,
                            kind: str = "checks") -> Optional[str]:
    """The check container the local cluster fails on ``node`` (a node's own fault, else its pool's),
    or None; ``kind`` ``pulls``: the check whose image the simulated kubelet cannot pull."""
    entry = recorded.get(node_key(node)) or {}
    if entry.get(kind):
        return str(entry[kind])
    pool_entry = recorded.get(pool_key(pool)) if pool else None
    return str(pool_entry[kind]) if pool_entry and pool_entry.get(kind) else None


def recorded_condition(recorded: dict[str, dict[str, Any]], node: str) -> Optional[ConditionFault]:
    entry = (recorded.get(node_key(node)) or {}).get("condition")
    return ConditionFault(**entry) if entry else None
