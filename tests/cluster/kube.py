"""A small client for the cluster tier's tests: the official Kubernetes client, and waiting."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException

DEFAULT_TIMEOUT = 60.0


class TimedOut(AssertionError):
    pass


def wait_for(predicate: Callable[[], Any], *, timeout: float = DEFAULT_TIMEOUT, what: str, interval: float = 0.25):
    """Poll until ``predicate`` returns something truthy; return it, or fail saying ``what`` did not happen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimedOut(f"{what} did not happen within {timeout:.0f} s (last: {last!r})")


def holds_for(predicate: Callable[[], Any], *, seconds: float, what: str, interval: float = 0.5) -> None:
    """Fail as soon as ``predicate`` turns falsy within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            raise AssertionError(f"{what} stopped holding")
        time.sleep(interval)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Accounting:
    """What one test can leave behind for the next: Kueue's books and the pods holding GPU nodes.

    ``queues`` is each ClusterQueue's ``status.admittedWorkloads``, ``reservingWorkloads`` and
    ``flavorsUsage`` (per flavor and resource, the total in use); ``workloads`` every Workload, by
    its owner;
    ``pods`` every pod not owned by a DaemonSet that stands on a GPU node or waits for one
    (a pending pod the scheduler has nominated a node for counts against that node too)."""

    queues: tuple[tuple[str, int, int, tuple[tuple[str, str, str], ...]], ...]
    workloads: frozenset[str]
    pods: dict[str, str]
    """``namespace/name`` -> where it stands (phase and node), for the message."""

    def differences(self, expected: "Accounting") -> list[str]:
        """What differs from ``expected``, one line each, in the words of the objects."""
        found: list[str] = []
        ours, theirs = {q[0]: q for q in self.queues}, {q[0]: q for q in expected.queues}
        for name in sorted(set(ours) | set(theirs)):
            now, then = ours.get(name), theirs.get(name)
            if now == then:
                continue
            if now is None or then is None:
                found.append(f"ClusterQueue {name} {'gone' if now is None else 'new'}")
                continue
            if now[1:3] != then[1:3]:
                found.append(f"ClusterQueue {name}: admittedWorkloads {now[1]} (was {then[1]}), "
                             f"reservingWorkloads {now[2]} (was {then[2]})")
            used = [f"{flavor} {resource} {total}" for flavor, resource, total in now[3] if (flavor, resource, total) not in then[3]]
            if used:
                found.append(f"ClusterQueue {name} flavorsUsage: {', '.join(used)} (was {_usage(then[3])})")
        for name in sorted(self.workloads - expected.workloads):
            found.append(f"Workload {name} left")
        for name in sorted(set(self.pods) - set(expected.pods)):
            found.append(f"pod {name} left ({self.pods[name]})")
        return found


def _workload_key(workload: dict[str, Any]) -> str:
    """A Workload by what owns it (a Job deleted and created again gets a Workload of another name,
    for the same Job), else by its own name."""
    meta = workload["metadata"]
    owners = [f"{o['kind']} {o['name']}" for o in meta.get("ownerReferences") or []]
    return f"{meta['namespace']}/{owners[0] if owners else meta['name']}"


def _usage(usage: tuple[tuple[str, str, str], ...]) -> str:
    return ", ".join(f"{flavor} {resource} {total}" for flavor, resource, total in usage) or "none"


def _zero(quantity: str) -> bool:
    return quantity.strip("0.m") == "" or quantity in ("0", "0m")


class Kube:
    def __init__(self, kubeconfig: Path, *, impersonate: Optional[dict[str, Any]] = None):
        self.kubeconfig = kubeconfig
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        if impersonate:
            self.api.set_default_header("Impersonate-User", impersonate["user"])
            for group in impersonate.get("groups", []):
                # The client keeps one value per header; RBAC needs only the first group here.
                self.api.set_default_header("Impersonate-Group", group)
            for key, value in (impersonate.get("extra") or {}).items():
                self.api.set_default_header(f"Impersonate-Extra-{key.replace('/', '%2F')}", value)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self._dynamic: Optional[dynamic.DynamicClient] = None

    def as_user(self, user: str, *, groups: tuple[str, ...] = (), extra: Optional[dict[str, str]] = None) -> "Kube":
        return Kube(self.kubeconfig, impersonate={"user": user, "groups": list(groups), "extra": extra or {}})

    @property
    def dynamic(self) -> dynamic.DynamicClient:
        if self._dynamic is None:
            self._dynamic = dynamic.DynamicClient(self.api)
        return self._dynamic

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        return resource.server_side_apply(
            body=obj, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"),
            field_manager="cluster-tier-test", force_conflicts=True,
        ).to_dict()

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> dict[str, Any]:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return resource.get(name=name, namespace=namespace).to_dict()

    def list(self, api_version: str, kind: str, namespace: Optional[str] = None, **kwargs) -> list[dict[str, Any]]:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return resource.get(namespace=namespace, **kwargs).to_dict()["items"]

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> None:
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        try:
            resource.delete(name=name, namespace=namespace, body={"propagationPolicy": "Background", "gracePeriodSeconds": 0})
        except ApiException as error:
            if error.status != 404:
                raise

    def nodes(self, selector: str = "") -> list[client.V1Node]:
        return self.core.list_node(label_selector=selector).items

    def pods(self, namespace: str, selector: str = "") -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=selector).items

    def pod(self, namespace: str, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, namespace)

    def node_of(self, namespace: str, name: str) -> Optional[str]:
        return self.pod(namespace, name).spec.node_name

    def scheduling_message(self, namespace: str, name: str) -> str:
        for condition in self.pod(namespace, name).status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                return condition.message or ""
        return ""

    def node_requests(self, node: str) -> str:
        """What the pods on ``node`` request, added up, beside what the node allocates: the figures
        the scheduler compared, for a failure's message."""
        from eks_gpu_training.facts.quantity import parse_quantity

        pods = [p for p in self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
                if p.status.phase in ("Pending", "Running")]
        requests = [c.resources.requests or {} for p in pods for c in p.spec.containers]
        cpu = sum(parse_quantity(str(r.get("cpu", "0"))) for r in requests)
        memory = sum(parse_quantity(str(r.get("memory", "0"))) for r in requests)
        allocatable = self.core.read_node(node).status.allocatable
        return (f"{node}: {len(pods)} pods requesting {float(cpu):.3f} CPU and {int(memory) >> 20}Mi of "
                f"{allocatable['cpu']} CPU and {allocatable['memory']} allocatable "
                f"({', '.join(f'{p.metadata.namespace}/{p.metadata.name}' for p in pods)})")

    def wait_bound(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        return wait_for(lambda: self.node_of(namespace, name), timeout=timeout, what=f"pod {namespace}/{name} bound")

    def wait_running(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> client.V1Pod:
        return wait_for(lambda: (p := self.pod(namespace, name)).status.phase == "Running" and p, timeout=timeout,
                        what=f"pod {namespace}/{name} Running")

    def wait_unschedulable(self, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The scheduler's own message once it has tried and failed to place the pod."""
        return wait_for(lambda: self.scheduling_message(namespace, name), timeout=timeout,
                        what=f"the scheduler to report pod {namespace}/{name} unschedulable")

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise

    def delete_job(self, namespace: str, name: str, timeout: float = 90) -> None:
        """Delete a Job and wait until its pods and its Kueue Workload are gone (a Job left running
        would hold its nodes, and its Workload the quota and topology Kueue admitted it to, for the
        next test; the garbage collector deletes the Workload only after the Job)."""
        try:
            uid = self.batch.read_namespaced_job(name, namespace).metadata.uid
            self.batch.delete_namespaced_job(name, namespace, propagation_policy="Foreground", grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise
            uid = None
        wait_for(lambda: not self.pods(namespace, f"batch.kubernetes.io/job-name={name}"),
                 what=f"job {name}'s pods gone", timeout=timeout)
        if uid is not None:
            wait_for(lambda: not self._workloads(namespace, f"kueue.x-k8s.io/job-uid={uid}"),
                     what=f"job {name}'s Kueue workload gone", timeout=timeout)

    def _workloads(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Kueue's Workloads matching ``selector``; none where Kueue is not installed."""
        try:
            found = client.CustomObjectsApi(self.api).list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", "workloads", namespace, label_selector=selector)
        except ApiException as error:
            if error.status == 404:
                return []
            raise
        return found["items"]

    def accounting(self) -> Accounting:
        """Kueue's books and the pods on (or waiting for) GPU nodes, as they are now."""
        queues = []
        try:
            cluster_queues = self.custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
            workloads = self.custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")["items"]
        except ApiException as error:
            if error.status != 404:
                raise
            cluster_queues, workloads = [], []
        for queue in cluster_queues:
            status = queue.get("status") or {}
            usage = tuple(sorted(
                (flavor["name"], resource["name"], str(resource.get("total", "0")))
                for flavor in status.get("flavorsUsage") or [] for resource in flavor.get("resources") or []
                if not _zero(str(resource.get("total", "0")))))
            queues.append((queue["metadata"]["name"], int(status.get("admittedWorkloads") or 0),
                           int(status.get("reservingWorkloads") or 0), usage))
        gpu_nodes = {n.metadata.name for n in self.nodes() if (n.status.allocatable or {}).get("nvidia.com/gpu", "0") != "0"}
        pods = {}
        for pod in self.core.list_pod_for_all_namespaces().items:
            if any(o.kind == "DaemonSet" for o in pod.metadata.owner_references or []):
                continue
            waiting = pod.spec.node_name is None and pod.status.phase == "Pending"
            if pod.spec.node_name in gpu_nodes or waiting:
                pods[f"{pod.metadata.namespace}/{pod.metadata.name}"] = f"{pod.status.phase} on {pod.spec.node_name or 'no node'}"
        return Accounting(
            queues=tuple(sorted(queues)),
            workloads=frozenset(_workload_key(w) for w in workloads),
            pods=pods,
        )

    def jobs_without_workload(self) -> list[str]:
        """Jobs queued to Kueue that Kueue has not yet made a Workload for."""
        keys = self.accounting().workloads
        return [f"{j.metadata.namespace}/Job {j.metadata.name}" for j in self.batch.list_job_for_all_namespaces(
            label_selector="kueue.x-k8s.io/queue-name").items if f"{j.metadata.namespace}/Job {j.metadata.name}" not in keys]

    def wait_accounting(self, expected: Accounting, *, timeout: float = 120, when: str) -> None:
        """Wait until Kueue's books and the GPU nodes' pods are back to ``expected``; fail with what
        differs (``when`` says at which point of the test)."""
        deadline = time.monotonic() + timeout
        while True:
            differences = self.accounting().differences(expected)
            if not differences:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the cluster is not back to its known state {when} after {timeout:.0f} s: "
                                     + "; ".join(differences))
            time.sleep(0.5)

    def ensure_namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def pod_manifest(name: str, namespace: str, *, requests: Optional[dict[str, str]] = None,
                 tolerations: Optional[list[dict[str, str]]] = None, node_selector: Optional[dict[str, str]] = None,
                 priority_class: Optional[str] = None, labels: Optional[dict[str, str]] = None,
                 **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    if requests:
        limits = {k: v for k, v in requests.items() if "/" in k}
        container["resources"] = {"requests": dict(requests), **({"limits": limits} if limits else {})}
    pod_spec: dict[str, Any] = {"containers": [container], **spec}
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": pod_spec,
    }
