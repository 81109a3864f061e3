"""The node condition the EKS node monitoring agent reports on GPU nodes, and the verdict of the
health gate's checks, reported here in their place.

On EKS the agent's pod reads the NVIDIA driver through the ``dcgm-server`` host engine on its node
and sets ``AcceleratedHardwareReady``: True while the GPUs are healthy, False with ``DCGMError``
when it cannot reach the host engine (``aws.node_monitoring_agent``). Locally the real scheduler places
both DaemonSets' pods, but KWOK runs no container, so ``report_accelerated_hardware`` sets the
condition as the agent would, only where the agent's pods stand (no host engine pod:
``DCGMError``), or the fault ``eks-gpu-training-local fault NODE --condition`` injects (``faults``).

The gate's check pods are likewise placed for real but run nothing, so ``run_checks`` writes their
end as the kubelet would: every container exited 0 after ``SIMULATED_CHECK_SECONDS``, unless
``fault --fail-checks`` made the node (or its pool) fail one. The gate acts on it for real.

``up`` runs ``python -m eks_gpu_training.local.node_health`` beside the cluster, which keeps
reporting for nodes that join later and agent pods that come and go; it reads again when a watch
says something changed (``healthgate.changes``), and every 2 s while a check runs.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Optional

from ..facts.node_monitoring import AGENT_DAEMONSETS, AGENT_NAMESPACE
from ..facts.gpu_nodes import GPU_RESOURCE
from ..healthgate.gate_api import list_items
from ..healthgate.gate_settings import CHECK_LABELS, pool_of
from ..healthgate.changes import WATCH, Changes, run_rounds
from .faults import FAULTS_CONFIG_MAP, SIMULATED_CHECK_MESSAGES, Faults, recorded_condition, simulated_check_failure
from .layout import Layout
from .processes import Process

CONDITION = "AcceleratedHardwareReady"
AGENT, HOST_ENGINE = AGENT_DAEMONSETS
INTERVAL_SECONDS = 2
"""The reporter's rounds come at most this often: when what it reads changed
(``healthgate.changes``), and every round while a check pod runs its simulated seconds."""
IDLE_SECONDS = 60
"""A round at least this often, whatever the watches say."""
SIMULATED_CHECK_SECONDS = 3
"""How long a simulated check runs once its pod is Running (DCGM level 2 takes about two minutes on
a real node, docs/health.md)."""
PATCH_WORKERS = 8
"""Writes in flight at once: the client's connection pool holds more, and the API server answers
them side by side."""
CHECK_SELECTOR = ",".join(f"{key}={value}" for key, value in CHECK_LABELS.items())
SIMULATED_PULL = "reported by the local cluster for `fault --unpullable`, in place of a kubelet"
SIMULATED = "reported by the local cluster in place of the node monitoring agent, whose pod on this node runs no container"


def _items(call: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as the API server's JSON, served from its watch cache (``resourceVersion``
    0): the client's models took most of the reporter's time at a thousand nodes, and each round
    would otherwise be a read from etcd."""
    return list_items(call, *args, resource_version="0", **kwargs)


def _running_daemon_pods(core: Any, apps: Any) -> dict[str, set[str]]:
    """The nodes each of the agent's two DaemonSets has a Running pod on, listed by each one's own
    selector: the namespace holds every node's kube-proxy, VPC CNI and EFA plugin pods too, three
    times as many at a thousand nodes."""
    nodes: dict[str, set[str]] = {name: set() for name in AGENT_DAEMONSETS}
    for daemonset in _items(apps.list_namespaced_daemon_set, AGENT_NAMESPACE):
        name = daemonset["metadata"]["name"]
        labels = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels")
        if name not in nodes or not labels:
            continue
        selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        for pod in _items(core.list_namespaced_pod, AGENT_NAMESPACE, label_selector=selector, field_selector="status.phase=Running"):
            if any(o.get("kind") == "DaemonSet" and o.get("name") == name for o in pod["metadata"].get("ownerReferences") or []):
                nodes[name].add(pod["spec"].get("nodeName"))
    return nodes


def _patch_all(patches: list[Callable[[], Any]]) -> None:
    """Send the writes a few at a time, each answer left unread (``_preload_content=False``): at a
    thousand nodes, one by one and each answer built into the client's models, a round took
    minutes, while the gate waited on the check pods it ended."""
    if len(patches) <= 1:
        for patch in patches:
            patch()
        return
    with ThreadPoolExecutor(max_workers=PATCH_WORKERS) as pool:
        for future in [pool.submit(patch) for patch in patches]:
            future.result()


def accelerated_hardware_condition(*, host_engine: bool, now: str) -> dict[str, str]:
    if host_engine:
        return {"type": CONDITION, "status": "True", "reason": "LocalCluster",
                "message": f"GPUs healthy ({SIMULATED})", "lastHeartbeatTime": now, "lastTransitionTime": now}
    return {"type": CONDITION, "status": "False", "reason": "DCGMError",
            "message": f"no DCGM host engine pod on this node ({SIMULATED})", "lastHeartbeatTime": now,
            "lastTransitionTime": now}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_accelerated_hardware(core: Any, recorded: Optional[dict[str, dict[str, Any]]] = None, *,
                                apps: Any = None) -> list[str]:
    """Set the condition on every node with GPUs where the agent's pod runs, where it is missing or says
    otherwise (a fault ``recorded`` for the node is reported as injected); the nodes it set.
    ``apps`` reads the DaemonSets (default: an ``AppsV1Api`` of ``core``'s client)."""
    if apps is None:
        from kubernetes import client

        apps = client.AppsV1Api(core.api_client)
    running = _running_daemon_pods(core, apps)
    agents, engines = running.get(AGENT, set()), running.get(HOST_ENGINE, set())
    now = _now()
    reported: list[str] = []
    patches: list[Callable[[], Any]] = []
    for node in _items(core.list_node):
        name = node["metadata"]["name"]
        gpus = ((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE)
        if not gpus or gpus == "0" or name not in agents:
            continue
        conditions = [accelerated_hardware_condition(host_engine=name in engines, now=now)]
        fault = recorded_condition(recorded or {}, name)
        if fault is not None:
            conditions = [fault.condition(now)] + [c for c in conditions if c["type"] != fault.type]
        current = {c["type"]: (c.get("status"), c.get("reason")) for c in (node.get("status") or {}).get("conditions") or []}
        changed = [c for c in conditions if current.get(c["type"]) != (c["status"], c["reason"])]
        if not changed:
            continue
        patches.append(partial(core.patch_node_status, name, {"status": {"conditions": changed}}, _preload_content=False))
        reported.append(name)
    _patch_all(patches)
    return reported


def _terminated(container: dict[str, Any], exit_code: int, message: str, now: str) -> dict[str, Any]:
    state = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "startedAt": now, "finishedAt": now}
    if message:
        state["message"] = message
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"terminated": state}}


def _waiting(container: dict[str, Any]) -> dict[str, Any]:
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
            "started": False, "state": {"waiting": {"reason": "PodInitializing"}}}


def check_pod_status(pod: dict[str, Any], failing: Optional[str], now: str) -> dict[str, Any]:
    """The status the kubelet reports for a check pod that ended: every container exited 0, or the
    ``failing`` check's container exited 1 (the containers after a failed init container never ran)."""
    init_statuses, statuses, failed = [], [], False
    for container in pod["spec"].get("initContainers") or []:
        if failed:
            init_statuses.append(_waiting(container))
            continue
        failed = container["name"] == failing
        init_statuses.append(_terminated(container, 1 if failed else 0, SIMULATED_CHECK_MESSAGES.get(container["name"], "") if failed else "", now))
    for container in pod["spec"]["containers"]:
        if failed:
            statuses.append(_waiting(container))
            continue
        fails = container["name"] == failing
        failed = failed or fails
        statuses.append(_terminated(container, 1 if fails else 0, SIMULATED_CHECK_MESSAGES.get(container["name"], "") if fails else "", now))
    status: dict[str, Any] = {"phase": "Failed" if failed else "Succeeded", "containerStatuses": statuses}
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}]
    return status


def pull_failure_status(pod: dict[str, Any], unpullable: str) -> dict[str, Any]:
    """The status the kubelet reports while it cannot pull the image of the ``unpullable`` check
    container: the pod Pending, that container waiting in ``ErrImagePull`` (kubernetes
    pkg/kubelet/images/types.go), the others as they were (the API server refuses to take a
    terminated container back)."""
    statuses = [dict(c) for c in (pod.get("status") or {}).get("containerStatuses") or []]
    image = next((c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == unpullable), "")
    waiting = {"waiting": {"reason": "ErrImagePull", "message": f"failed to pull image {image!r}: not found ({SIMULATED_PULL})"}}
    found = [c for c in statuses if c.get("name") == unpullable]
    for status in found:
        status.update({"image": status.get("image") or image, "state": waiting, "ready": False, "started": False})
    if not found:
        statuses.append({"name": unpullable, "image": image, "imageID": "", "ready": False, "restartCount": 0,
                         "started": False, "state": waiting})
    return {"phase": "Pending", "containerStatuses": statuses}


class CheckRound(NamedTuple):
    """What a round of the simulated checks did."""

    ended: list[str]
    """The check pods ended, each with its verdict."""
    running: int
    """Check pods still running their simulated seconds: a later round ends them."""


def run_checks(core: Any, recorded: dict[str, dict[str, Any]], *, elapsed: Any) -> CheckRound:
    """End every check pod that has been Running ``SIMULATED_CHECK_SECONDS`` (``elapsed(pod)`` says
    how long), passing or failing as the recorded faults say."""
    ended = []
    running = [pod for pod in _items(core.list_pod_for_all_namespaces, label_selector=CHECK_SELECTOR,
                                     field_selector="status.phase=Running")
               if not pod["metadata"].get("deletionTimestamp")]
    nodes = {n["metadata"]["name"]: n for n in _items(core.list_node)} if running else {}
    patches: list[Callable[[], Any]] = []
    pods = []
    for pod in running:
        meta, where = pod["metadata"], pod["spec"].get("nodeName")
        node = nodes.get(where)
        pool = pool_of(node["metadata"].get("labels")) if node else None
        unpullable = simulated_check_failure(recorded, where, pool, kind="pulls")
        if unpullable is not None:
            patches.append(partial(core.patch_namespaced_pod_status, meta["name"], meta["namespace"],
                                   {"status": pull_failure_status(pod, unpullable)}, _preload_content=False))
            ended.append(f"{meta['namespace']}/{meta['name']} on {where}: image of {unpullable} not pulled")
        elif elapsed(pod) >= SIMULATED_CHECK_SECONDS:
            pods.append(pod)
    for pod in pods:
        meta, where = pod["metadata"], pod["spec"].get("nodeName")
        node = nodes.get(where)
        failing = simulated_check_failure(recorded, where, pool_of(node["metadata"].get("labels")) if node else None)
        patches.append(partial(core.patch_namespaced_pod_status, meta["name"], meta["namespace"],
                               {"status": check_pod_status(pod, failing, _now())}, _preload_content=False))
        ended.append(f"{meta['namespace']}/{meta['name']} on {where}: {'failed ' + failing if failing else 'passed'}")
    _patch_all(patches)
    return CheckRound(ended, len(running) - len(pods))


def _running_for(pod: dict[str, Any]) -> float:
    started = (pod.get("status") or {}).get("startTime")
    if not started:
        return 0.0
    return (datetime.now(timezone.utc) - datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)).total_seconds()


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
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    faults = Faults(core, client.CoordinationV1Api(api))
    faults_namespace, faults_name = FAULTS_CONFIG_MAP
    # What a round reads: the nodes, the agent's DaemonSets and their pods, the check pods, the faults.
    changes = Changes(
        partial(core.list_node, **WATCH),
        partial(apps.list_namespaced_daemon_set, AGENT_NAMESPACE, **WATCH),
        partial(core.list_namespaced_pod, AGENT_NAMESPACE, **WATCH),
        partial(core.list_pod_for_all_namespaces, label_selector=CHECK_SELECTOR, **WATCH),
        partial(core.list_namespaced_config_map, faults_namespace, field_selector=f"metadata.name={faults_name}", **WATCH),
    )

    def round_() -> bool:
        try:
            recorded = faults.recorded()
            # The checks first: the gate waits on them, and a fleet's first reports are many.
            checks = run_checks(core, recorded, elapsed=_running_for)
            for line in checks.ended:
                print(f"check {line}", flush=True)
            for node in report_accelerated_hardware(core, recorded, apps=apps):
                print(f"reported {CONDITION} on {node}", flush=True)
        except Exception as error:  # noqa: BLE001 - the API server restarting; try again next round
            print(f"could not report: {error}", flush=True)
            return True
        return checks.running > 0

    run_rounds(round_, changes, interval=INTERVAL_SECONDS, idle=IDLE_SECONDS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
