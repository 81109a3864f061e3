"""One node's check: the Job the gate creates for it, and the verdict read from it once it ends.

The Job's pod is the template of the gate's settings (the stack builds it: DCGM diagnostics, the
EFA device count and, with an image that has it, an EFA loopback test) placed on the one node
(a required node affinity on its name, as the DaemonSet controller places its pods), requesting
every GPU and EFA device the node's pool has: a node whose device plugins advertise fewer never
gets the pod, and the Job runs out of time. No retries (``backoffLimit: 0``): a failed check is an
answer. Each check container says what failed in its termination message (the last lines of its
log when it wrote none: ``FallbackToLogsOnError``), which becomes the node condition's message.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Iterable, Mapping, Optional

from .gate_settings import CHECK_LABELS, REASONS, PoolDevices

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
NODE_ANNOTATION = "eks-gpu-training/checked-node"
NODE_UID_ANNOTATION = "eks-gpu-training/checked-node-uid"
"""The node a check Job is for, by name and uid (a node replaced under the same name is another node)."""
TEMPLATE_ANNOTATION = "eks-gpu-training/check-template"
"""A hash of the settings' check pod a Job was made from: a check that failed for a configuration
cause is made again once the settings change (``decide``)."""
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
"""A container's ``waiting`` reasons for an image the kubelet cannot pull (kubernetes
pkg/kubelet/images/types.go)."""
GPU_CONTAINERS = ("dcgm",)
EFA_CONTAINERS = ("efa", "efa-loopback")
"""The check containers that get the node's GPUs, and its EFA devices."""
EXPECTED_EFA_ENV = "EXPECTED_EFA_DEVICES"
"""How many EFA devices the ``efa`` container must see (its pool's)."""
FINISHED_TTL_SECONDS = 3600
"""A failed check's Job and pod stay an hour for their logs; a passed one is deleted at once."""


def check_job_name(node: str, uid: str) -> str:
    return "check-" + hashlib.sha256(f"{node}/{uid}".encode()).hexdigest()[:12]


def template_hash(check_pod: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(check_pod, sort_keys=True).encode()).hexdigest()[:16]


def _with_devices(container: dict[str, Any], resource: str, count: int) -> None:
    resources = container.setdefault("resources", {})
    resources.setdefault("requests", {})[resource] = str(count)
    resources.setdefault("limits", {})[resource] = str(count)


def check_job(check_pod: Mapping[str, Any], namespace: str, node: str, uid: str, devices: PoolDevices,
              deadline_seconds: int) -> dict[str, Any]:
    """The Job that checks ``node`` (uid ``uid``), from the settings' pod template."""
    pod = copy.deepcopy(dict(check_pod))
    spec = pod.setdefault("spec", {})
    # A check waits for the node's devices; it never preempts a pod that holds them.
    spec["preemptionPolicy"] = "Never"
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    kept_init = []
    for container in spec.get("initContainers") or []:
        if container["name"] in EFA_CONTAINERS:
            if devices.efa == 0:
                continue  # a pool without EFA has nothing to count or loop back
            _with_devices(container, EFA_RESOURCE, devices.efa)
            container.setdefault("env", []).append({"name": EXPECTED_EFA_ENV, "value": str(devices.efa)})
        kept_init.append(container)
    if kept_init:
        spec["initContainers"] = kept_init
    else:
        spec.pop("initContainers", None)
    for container in spec.get("containers") or []:
        if container["name"] in GPU_CONTAINERS:
            _with_devices(container, GPU_RESOURCE, devices.gpus)
    metadata = pod.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **CHECK_LABELS}
    annotations = {NODE_ANNOTATION: node, NODE_UID_ANNOTATION: uid, TEMPLATE_ANNOTATION: template_hash(check_pod)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": check_job_name(node, uid), "namespace": namespace, "labels": dict(CHECK_LABELS),
                     "annotations": annotations},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_seconds,
            "ttlSecondsAfterFinished": FINISHED_TTL_SECONDS,
            "template": pod,
        },
    }


def job_finished(job: Mapping[str, Any]) -> Optional[bool]:
    """True when the Job completed, False when it failed, None while it runs."""
    for found in (job.get("status") or {}).get("conditions") or []:
        if found.get("status") != "True":
            continue
        if found.get("type") == "Complete":
            return True
        if found.get("type") == "Failed":
            return False
    return None


def _job_condition(job: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    for found in (job.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind and found.get("status") == "True":
            return found
    return None


def _allocatable(node: Mapping[str, Any], resource: str) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def check_verdict(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], node: Mapping[str, Any],
                  devices: PoolDevices) -> tuple[str, str]:
    """The reason and message of a failed check: the first check container that exited non-zero,
    else (the Job ran out of time) the devices the node does not advertise, else the deadline."""
    uid = job["metadata"].get("uid")
    for pod in pods:
        if uid and not any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or []):
            continue
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            terminated = (container.get("state") or {}).get("terminated") or {}
            if terminated and terminated.get("exitCode", 0) != 0:
                name = container.get("name", "")
                message = (terminated.get("message") or terminated.get("reason") or "").strip()
                return REASONS.get(name, REASONS["unknown"]), f"check {name} failed: {message or 'no message'}"
    gpus, efa = _allocatable(node, GPU_RESOURCE), _allocatable(node, EFA_RESOURCE)
    if gpus < devices.gpus:
        return REASONS["gpus"], f"the node advertises {gpus} of its {devices.gpus} {GPU_RESOURCE}: the check could not start"
    if efa < devices.efa:
        return REASONS["efa"], f"the node advertises {efa} of its {devices.efa} {EFA_RESOURCE}: the check could not start"
    failed = _job_condition(job, "Failed") or {}
    if failed.get("reason") == "DeadlineExceeded":
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return REASONS["deadline"], f"the checks did not finish within {deadline} s ({failed.get('message', '')})"
    return REASONS["unknown"], f"the check Job failed: {failed.get('reason', '')} {failed.get('message', '')}".strip()


def pods_of(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    uid = job["metadata"].get("uid")
    return [pod for pod in pods if not uid or any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or [])]


def image_pull_failure(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Optional[str]:
    """What the kubelet said of a check image it cannot pull, or None."""
    for pod in pods_of(job, pods):
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in IMAGE_PULL_REASONS:
                detail = (waiting.get("message") or "").strip()
                return (f"check {container.get('name', '')} cannot pull {container.get('image', '')} "
                        f"({waiting['reason']}{': ' + detail if detail else ''})")
    return None


def missing_device(node: Mapping[str, Any], devices: PoolDevices) -> Optional[str]:
    """A device of the pool the node advertises none of (no device plugin runs there), or None."""
    for resource, wanted in ((GPU_RESOURCE, devices.gpus), (EFA_RESOURCE, devices.efa)):
        if wanted and _allocatable(node, resource) == 0:
            return resource
    return None


def devices_taken(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], node: Mapping[str, Any],
                  devices: PoolDevices) -> bool:
    """Whether the scheduler left the check pending because pods already on the node hold devices
    the node advertises in full: the check can never start there while they run."""
    if _allocatable(node, GPU_RESOURCE) < devices.gpus or _allocatable(node, EFA_RESOURCE) < devices.efa:
        return False
    for pod in pods_of(job, pods):
        for found in (pod.get("status") or {}).get("conditions") or []:
            if (found.get("type") == "PodScheduled" and found.get("status") == "False"
                    and found.get("reason") == "Unschedulable"
                    and any(f"Insufficient {resource}" in str(found.get("message") or "") for resource in (GPU_RESOURCE, EFA_RESOURCE))):
                return True
    return False
