"""A small client for the cluster tier's tests: the official Kubernetes client, and waiting."""

from __future__ import annotations

import time
import uuid
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
