"""The node condition the EKS node monitoring agent reports on GPU nodes, and the verdict of the
health gate's checks, reported here in their place.

On EKS the agent's DaemonSet pod reads the NVIDIA driver through the ``dcgm-server`` host engine on
its node and sets ``AcceleratedHardwareReady`` on the node: True while the GPUs are healthy, False
with reason ``DCGMError`` when it cannot reach the host engine (``aws.node_monitoring``). On the
local cluster both DaemonSets' pods are placed by the real scheduler and DaemonSet controller, but
KWOK runs no container, so nothing would ever set the condition. ``report_accelerated_hardware``
sets it the way the agent would on healthy hardware, and only where the agent's own pods stand: a
GPU node without an agent pod gets no condition, one without a host engine pod gets
``DCGMError``. A fault injected with ``eks-gpu-training-local fault NODE --condition`` is reported
instead, as the agent keeps reporting a fault while it lasts (``faults``).

The health gate's check pods are placed by the real scheduler and made Running by KWOK, but no
container runs, so ``run_checks`` writes their end the way the kubelet reports it: after
``SIMULATED_CHECK_SECONDS`` every check container exited 0, unless ``fault --fail-checks`` made the
node (or its pool) fail one, which then exits 1 with a message saying it was simulated. The gate
reads that verdict and acts on it for real.

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
from ..healthgate.settings import CHECK_LABELS, pool_of
from .faults import SIMULATED_CHECK_MESSAGES, Faults, recorded_condition, simulated_check_failure
from .layout import Layout
from .processes import Process

CONDITION = "AcceleratedHardwareReady"
AGENT, HOST_ENGINE = AGENT_DAEMONSETS
INTERVAL_SECONDS = 2
"""How often the reporter beside the cluster looks at the nodes and the agent's pods."""
SIMULATED_CHECK_SECONDS = 3
"""How long a simulated check runs once its pod is Running (DCGM level 2 takes about two minutes on
a real node, docs/health.md)."""
CHECK_SELECTOR = ",".join(f"{key}={value}" for key, value in CHECK_LABELS.items())
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


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_accelerated_hardware(core: Any, recorded: Optional[dict[str, dict[str, Any]]] = None) -> list[str]:
    """Set the condition on every node with GPUs where the agent's pod runs, where it is missing or says
    otherwise (a fault ``recorded`` for the node is reported as injected); the nodes it set."""
    agents, engines = _running_daemon_pods(core, AGENT), _running_daemon_pods(core, HOST_ENGINE)
    now = _now()
    reported = []
    for node in core.list_node().items:
        gpus = (node.status.capacity or {}).get(GPU_RESOURCE)
        if not gpus or gpus == "0" or node.metadata.name not in agents:
            continue
        conditions = [accelerated_hardware_condition(host_engine=node.metadata.name in engines, now=now)]
        fault = recorded_condition(recorded or {}, node.metadata.name)
        if fault is not None:
            conditions = [fault.condition(now)] + [c for c in conditions if c["type"] != fault.type]
        current = {c.type: (c.status, c.reason) for c in node.status.conditions or []}
        changed = [c for c in conditions if current.get(c["type"]) != (c["status"], c["reason"])]
        if not changed:
            continue
        core.patch_node_status(node.metadata.name, {"status": {"conditions": changed}})
        reported.append(node.metadata.name)
    return reported


def _terminated(container: Any, exit_code: int, message: str, now: str) -> dict[str, Any]:
    state = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "startedAt": now, "finishedAt": now}
    if message:
        state["message"] = message
    return {"name": container.name, "image": container.image, "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"terminated": state}}


def _waiting(container: Any) -> dict[str, Any]:
    return {"name": container.name, "image": container.image, "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"waiting": {"reason": "PodInitializing"}}}


def check_pod_status(pod: Any, failing: Optional[str], now: str) -> dict[str, Any]:
    """The status the kubelet reports for a check pod that ended: every container exited 0, or the
    ``failing`` check's container exited 1 (the containers after a failed init container never ran)."""
    init_statuses, statuses, failed = [], [], False
    for container in pod.spec.init_containers or []:
        if failed:
            init_statuses.append(_waiting(container))
            continue
        failed = container.name == failing
        init_statuses.append(_terminated(container, 1 if failed else 0, SIMULATED_CHECK_MESSAGES.get(container.name, "") if failed else "", now))
    for container in pod.spec.containers:
        if failed:
            statuses.append(_waiting(container))
            continue
        fails = container.name == failing
        failed = failed or fails
        statuses.append(_terminated(container, 1 if fails else 0, SIMULATED_CHECK_MESSAGES.get(container.name, "") if fails else "", now))
    status: dict[str, Any] = {"phase": "Failed" if failed else "Succeeded", "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}]
    return status


def run_checks(core: Any, recorded: dict[str, dict[str, Any]], *, elapsed: Any) -> list[str]:
    """End every check pod that has been Running ``SIMULATED_CHECK_SECONDS`` (``elapsed(pod)`` says
    how long), passing or failing as the recorded faults say; the pods ended, with their verdict."""
    ended = []
    pods = core.list_pod_for_all_namespaces(label_selector=CHECK_SELECTOR).items
    nodes = {n.metadata.name: n for n in core.list_node().items} if pods else {}
    for pod in pods:
        if pod.status.phase != "Running" or pod.metadata.deletion_timestamp or elapsed(pod) < SIMULATED_CHECK_SECONDS:
            continue
        node = nodes.get(pod.spec.node_name)
        failing = simulated_check_failure(recorded, pod.spec.node_name, pool_of(node.metadata.labels) if node else None)
        core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": check_pod_status(pod, failing, _now())})
        ended.append(f"{pod.metadata.namespace}/{pod.metadata.name} on {pod.spec.node_name}: {'failed ' + failing if failing else 'passed'}")
    return ended


def _running_for(pod: Any) -> float:
    started = pod.status.start_time
    return (datetime.now(timezone.utc) - started).total_seconds() if started else 0.0


def node_health_process(layout: Layout) -> Process:
    """The reporter beside the cluster, run by this interpreter (it has the package)."""
    return Process("node-health", Path(sys.executable), ("-m", "eks_gpu_training.local.node_health",
                                                         f"--kubeconfig={layout.kubeconfig}"), after=("kube-apiserver",))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Report AcceleratedHardwareReady for the node monitoring agent on a local cluster.")
    parser.add_argument("--kubeconfig", required=True)
    options = parser.parse_args(argv)
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=options.kubeconfig)
    core = client.CoreV1Api(api)
    faults = Faults(core, client.CoordinationV1Api(api))
    while True:
        try:
            recorded = faults.recorded()
            for node in report_accelerated_hardware(core, recorded):
                print(f"reported {CONDITION} on {node}", flush=True)
            for line in run_checks(core, recorded, elapsed=_running_for):
                print(f"check {line}", flush=True)
        except Exception as error:  # noqa: BLE001 - the API server restarting; try again next round
            print(f"could not report: {error}", flush=True)
        time.sleep(INTERVAL_SECONDS)


if __name__ == "__main__":
    raise SystemExit(main())
