"""The node condition the EKS node monitoring agent reports on GPU nodes, reported here in its place.

On EKS the agent's DaemonSet pod reads the NVIDIA driver through the ``dcgm-server`` host engine on
its node and sets ``AcceleratedHardwareReady`` on the node: True while the GPUs are healthy, False
with reason ``DCGMError`` when it cannot reach the host engine (``aws.node_monitoring``). On the
local cluster both DaemonSets' pods are placed by the real scheduler and DaemonSet controller, but
KWOK runs no container, so nothing would ever set the condition. ``report_accelerated_hardware``
sets it the way the agent would on healthy hardware, and only where the agent's own pods stand: a
GPU node without an agent pod gets no condition, one without a host engine pod gets
``DCGMError``. The simulated GPUs have no faults, so that is the only way it turns False here.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..aws.node_monitoring import AGENT_DAEMONSETS, AGENT_NAMESPACE
from ..facts.gpu_nodes import GPU_RESOURCE

CONDITION = "AcceleratedHardwareReady"
AGENT, HOST_ENGINE = AGENT_DAEMONSETS
SIMULATED = "reported by the local cluster in place of the node monitoring agent, whose pod on this node runs no container"


def _running_daemon_pods(core: Any, daemonset: str) -> set[str]:
    nodes = set()
    for pod in core.list_namespaced_pod(AGENT_NAMESPACE).items:
        owners = pod.metadata.owner_references or []
        if pod.status.phase == "Running" and any(o.kind == "DaemonSet" and o.name == daemonset for o in owners):
            nodes.add(pod.spec.node_name)
    return nodes


def accelerated_hardware_condition(*, host_engine: bool, now: str) -> dict[str, str]:
    if host_engine:
        return {"type": CONDITION, "status": "True", "reason": "LocalCluster",
                "message": f"GPUs healthy ({SIMULATED})", "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"type": CONDITION, "status": "False", "reason": "DCGMError",
            "message": f"no DCGM host engine pod on this node ({SIMULATED})", "lastHeartbeatTime": now,
            "lastTransitionTime": now}


def report_accelerated_hardware(core: Any) -> list[str]:
    """Set the condition on every node with GPUs where the agent's pod runs; the nodes it set."""
    agents, engines = _running_daemon_pods(core, AGENT), _running_daemon_pods(core, HOST_ENGINE)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    reported = []
    for node in core.list_node().items:
        gpus = (node.status.capacity or {}).get(GPU_RESOURCE)
        if not gpus or gpus == "0" or node.metadata.name not in agents:
            continue
        condition = accelerated_hardware_condition(host_engine=node.metadata.name in engines, now=now)
        core.patch_node_status(node.metadata.name, {"status": {"conditions": [condition]}})
        reported.append(node.metadata.name)
    return reported
