"""The node condition the EKS node monitoring agent reports on GPU nodes, reported here in its place.

On EKS the agent's DaemonSet pod reads the NVIDIA driver through the ``dcgm-server`` host engine on
its node and sets ``AcceleratedHardwareReady`` on the node: True while the GPUs are healthy, False
with reason ``DCGMError`` when it cannot reach the host engine (``aws.node_monitoring``). On the
local cluster both DaemonSets' pods are placed by the real scheduler and DaemonSet controller, but
KWOK runs no container, so nothing would ever set the condition. ``report_accelerated_hardware``
sets it the way the agent would on healthy hardware, and only where the agent's own pods stand: a
GPU node without an agent pod gets no condition, one without a host engine pod gets
``DCGMError``. The simulated GPUs have no faults, so that is the only way it turns False here.

``up`` reports once the platform is placed, then runs ``python -m
eks_gpu_training.local.node_health`` beside the cluster, which keeps reporting for nodes that join
later (Karpenter's) and for agent pods that come and go, as the agent on each node would.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from ..aws.node_monitoring import AGENT_DAEMONSETS, AGENT_NAMESPACE
from ..facts.gpu_nodes import GPU_RESOURCE
from .layout import Layout
from .processes import Process

CONDITION = "AcceleratedHardwareReady"
AGENT, HOST_ENGINE = AGENT_DAEMONSETS
INTERVAL_SECONDS = 2
"""How often the reporter beside the cluster looks at the nodes and the agent's pods."""
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
    """Set the condition on every node with GPUs where the agent's pod runs, where it is missing or says
    otherwise; the nodes it set."""
    agents, engines = _running_daemon_pods(core, AGENT), _running_daemon_pods(core, HOST_ENGINE)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    reported = []
    for node in core.list_node().items:
        gpus = (node.status.capacity or {}).get(GPU_RESOURCE)
        if not gpus or gpus == "0" or node.metadata.name not in agents:
            continue
        condition = accelerated_hardware_condition(host_engine=node.metadata.name in engines, now=now)
        current = next((c for c in node.status.conditions or [] if c.type == CONDITION), None)
        if current is not None and (current.status, current.reason) == (condition["status"], condition["reason"]):
            continue
        core.patch_node_status(node.metadata.name, {"status": {"conditions": [condition]}})
        reported.append(node.metadata.name)
    return reported


def node_health_process(layout: Layout) -> Process:
    """The reporter beside the cluster, run by this interpreter (it has the package)."""
    return Process("node-health", Path(sys.executable), ("-m", "eks_gpu_training.local.node_health",
                                                         f"--kubeconfig={layout.kubeconfig}"), after=("kube-apiserver",))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Report AcceleratedHardwareReady for the node monitoring agent on a local cluster.")
    parser.add_argument("--kubeconfig", required=True)
    options = parser.parse_args(argv)
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(config_file=options.kubeconfig))
    while True:
        try:
            for node in report_accelerated_hardware(core):
                print(f"reported {CONDITION} on {node}", flush=True)
        except Exception as error:  # noqa: BLE001 - the API server restarting; try again next round
            print(f"could not report: {error}", flush=True)
        time.sleep(INTERVAL_SECONDS)


if __name__ == "__main__":
    raise SystemExit(main())
