"""The platform applied to a local cluster as the stack renders it.

The stack's program runs under the mock engine (``offline.render``), which gives every Kubernetes
object it creates and every Helm release's chart rendered by Helm's own engine. They are applied
by server-side apply, CRDs first and Established, and the API server decides: structural schemas,
CEL rules, ValidatingAdmissionPolicies, quota admission. A refusal stops ``up`` with the object and
the server's own message.

What cannot run as a pod here runs beside the cluster instead, and only the objects that point at
it change (``localize``):
- Kueue runs out of cluster with the chart's own configuration; its webhooks and CRD conversion
  point at it on loopback.
- Karpenter's KWOK provider runs out of cluster; the stack's NodePools keep everything but their
  ``nodeClassRef``, which points at a ``KWOKNodeClass``.
- APIServices backed by an in-cluster Service (Kueue's visibility API) are left out: nothing would
  answer, and an unavailable APIService breaks discovery for every client.
Every Deployment and DaemonSet of the charts is applied as rendered: its pods are scheduled by the
real scheduler onto the simulated nodes and become Running there (KWOK), which is what proves they
fit.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Any, Iterable, Optional

from .errors import LocalError

HOOKS_APPLIED = {"pre-install", "post-install"}
"""Helm hooks a first install runs; the rest (upgrade, delete, test) never run on ``helm install``."""
KWOK_NODE_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
FIELD_MANAGER = "eks-gpu-training-local"
CRD_TIMEOUT_SECONDS = 60
BUSY_STATUSES = {429, 503, 504}
"""The API server's answers that say "busy, ask again" (Kubernetes API conventions: TooManyRequests,
ServiceUnavailable, and Timeout, which "the client may retry"). A server-side apply is idempotent,
so a loaded machine's slow API server delays ``up`` rather than failing it."""
BUSY_RETRY_SECONDS = 60


class ApplyError(LocalError):
    """The API server refused an object; the message names it and carries the server's words."""

    fix = ("the API server judged the stack's render: fix the stack (or the chart values it sets) so that "
           "`eks-gpu-training-render` and `eks-gpu-training-check` pass, then `up` again")


@dataclass
class PlatformObjects:
    """What a stack's render asks the cluster to hold, in apply order."""

    crds: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    """Objects not applied, each with the reason."""

    def all(self) -> list[dict[str, Any]]:
        return self.crds + self.namespaces + self.objects


def describe(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj.get('kind')} {where}{metadata.get('name')}"


def _hooks(obj: dict[str, Any]) -> set[str]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get("helm.sh/hook")
    return {hook.strip() for hook in value.split(",")} if value else set()


def collect(stack_objects: Iterable[dict[str, Any]], chart_objects: Iterable[dict[str, Any]]) -> PlatformObjects:
    """Sort the stack's and the charts' objects into apply order; leave out hooks an install does not run."""
    result = PlatformObjects()
    for obj in list(stack_objects) + list(chart_objects):
        hooks = _hooks(obj)
        if hooks and not hooks & HOOKS_APPLIED:
            result.left_out.append(f"{describe(obj)}: a Helm {'/'.join(sorted(hooks))} hook, which an install does not run")
            continue
        kind = obj.get("kind")
        if kind == "CustomResourceDefinition":
            result.crds.append(obj)
        elif kind == "Namespace":
            result.namespaces.append(obj)
        else:
            result.objects.append(obj)
    return result


def _webhook_url(endpoint: str, path: Optional[str]) -> str:
    return endpoint.rstrip("/") + (path or "/")


def localize(
    platform: PlatformObjects, *, out_of_cluster: dict[tuple[str, str], tuple[str, str]],
    replaced: AbstractSet[tuple[str, str, str]] = frozenset(),
) -> PlatformObjects:
    """Point what runs beside the cluster at it. ``out_of_cluster`` maps a Service
    ``(namespace, name)`` to the ``(https://127.0.0.1:PORT, caBundle)`` of the process that serves it;
    ``replaced`` names ``(kind, namespace, name)`` objects the local cluster put in place itself
    (Kueue's webhook certificate Secret), which the chart's copy must not overwrite."""
    result = PlatformObjects(left_out=list(platform.left_out))
    for obj in platform.crds:
        obj = copy.deepcopy(obj)
        webhook = ((obj.get("spec") or {}).get("conversion") or {}).get("webhook")
        if webhook and webhook.get("clientConfig"):
            config = _client_config(webhook["clientConfig"], out_of_cluster)
            if config is None:
                result.left_out.append(f"{describe(obj)}: converted by a Service no process serves here")
                continue
            webhook["clientConfig"] = config
        result.crds.append(obj)
    result.namespaces = copy.deepcopy(platform.namespaces)
    for obj in platform.objects:
        obj = copy.deepcopy(obj)
        metadata = obj.get("metadata") or {}
        if (obj.get("kind"), metadata.get("namespace"), metadata.get("name")) in replaced:
            result.left_out.append(f"{describe(obj)}: replaced by the local cluster's own (certificates for loopback)")
            continue
        localized = _localized_object(obj, out_of_cluster, result.left_out)
        if localized is not None:
            result.objects.append(localized)
    return result


def _client_config(config: dict[str, Any], out_of_cluster: dict[tuple[str, str], tuple[str, str]]) -> Optional[dict[str, Any]]:
    """A webhook's ``clientConfig`` pointed at the process that serves its Service here; None when
    none does. A config with a URL rather than a Service stays as it is."""
    service = config.get("service")
    if not service:
        return config
    target = out_of_cluster.get((service.get("namespace"), service.get("name")))
    if target is None:
        return None
    endpoint, ca_bundle = target
    return {"url": _webhook_url(endpoint, service.get("path")), "caBundle": ca_bundle}


def _localized_object(
    obj: dict[str, Any], out_of_cluster: dict[tuple[str, str], tuple[str, str]], left_out: list[str]
) -> Optional[dict[str, Any]]:
    """``obj`` (a copy) pointed at what serves it here: webhooks at their processes, a Karpenter
    NodePool at KWOK's node class; None, with the reason in ``left_out``, when nothing here serves it."""
    kind = obj.get("kind")
    if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        kept = []
        for webhook in obj.get("webhooks") or []:
            config = _client_config(webhook.get("clientConfig") or {}, out_of_cluster)
            if config is None:
                left_out.append(f"{describe(obj)} webhook {webhook.get('name')}: its Service has no process here")
                continue
            webhook["clientConfig"] = config
            kept.append(webhook)
        if not kept:
            return None
        obj["webhooks"] = kept
    elif kind == "APIService" and (obj.get("spec") or {}).get("service"):
        left_out.append(f"{describe(obj)}: served by an in-cluster Service, which nothing answers here")
        return None
    elif kind == "NodePool" and obj.get("apiVersion", "").startswith("karpenter.sh/"):
        obj["spec"]["template"]["spec"]["nodeClassRef"] = dict(KWOK_NODE_CLASS)
    return obj


def discovery_cache(kubeconfig: Path) -> Path:
    """Where ``Applier`` keeps the dynamic client's discovery of the cluster ``kubeconfig`` reaches."""
    return kubeconfig.with_name(kubeconfig.name + ".discovery.json")


class Applier:
    """Server-side apply through the official Kubernetes client's dynamic client."""

    def __init__(self, kubeconfig: Path):
        from kubernetes import client, config, dynamic

        self._api = config.new_client_from_config(config_file=str(kubeconfig))
        # The client caches its discovery in a file, by default one per API server address in the
        # temporary folder: every local cluster, on new ports, would leave one there for good.
        # Beside the kubeconfig it goes with the cluster's state.
        self.dynamic = dynamic.DynamicClient(self._api, cache_file=str(discovery_cache(kubeconfig)))
        self.core = client.CoreV1Api(self._api)
        self.extensions = client.ApiextensionsV1Api(self._api)

    @property
    def api_client(self):
        return self._api

    def resource(self, obj: dict[str, Any]):
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            return self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            self.dynamic.resources.invalidate_cache()
            return self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        resource = self.resource(obj)
        metadata = obj["metadata"]
        namespace = metadata.get("namespace") if resource.namespaced else None
        if resource.namespaced and not namespace:
            namespace = "default"
            obj = {**obj, "metadata": {**metadata, "namespace": namespace}}
        deadline = time.monotonic() + BUSY_RETRY_SECONDS
        while True:
            try:
                return resource.server_side_apply(
                    body=obj, name=metadata["name"], namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True,
                ).to_dict()
            except ApiException as error:
                if error.status not in BUSY_STATUSES or time.monotonic() >= deadline:
                    raise ApplyError(f"{describe(obj)} refused by the API server: {_server_message(error)}") from None
                time.sleep(_retry_after(error))

    def wait_established(self, crds: list[dict[str, Any]], timeout: float = CRD_TIMEOUT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        pending = {crd["metadata"]["name"] for crd in crds}
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                status = self.extensions.read_custom_resource_definition(name).status
                if any(c.type == "Established" and c.status == "True" for c in ((status.conditions if status else None) or [])):
                    pending.discard(name)
            if pending:
                time.sleep(0.2)
        if pending:
            raise ApplyError(f"CRDs not Established after {timeout:.0f} s: {', '.join(sorted(pending))}")
        self.dynamic.resources.invalidate_cache()

    def apply_all(self, objects: list[dict[str, Any]]) -> None:
        """Apply in order; an object whose kind the server does not serve yet (a CRD still being
        registered) is retried once the rest is in."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        pending = list(objects)
        for _attempt in range(3):
            retry = []
            for obj in pending:
                try:
                    self.apply(obj)
                except ResourceNotFoundError:
                    retry.append(obj)
            if not retry:
                return
            pending = retry
            time.sleep(1)
            self.dynamic.resources.invalidate_cache()
        raise ApplyError("the API server serves no kind for: " + ", ".join(describe(o) for o in pending))

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The object as the API server holds it; None when it holds none of that name."""
        from kubernetes.client.exceptions import ApiException

        resource = self.resource({"apiVersion": api_version, "kind": kind})
        try:
            return resource.get(name=name, namespace=namespace).to_dict()
        except ApiException as error:
            if error.status == 404:
                return None
            raise ApplyError(f"{_named(kind, name, namespace)} not read: {_server_message(error)}") from None

    def list(self, api_version: str, kind: str, namespace: Optional[str] = None, *,
             label_selector: str = "") -> list[dict[str, Any]]:
        """The objects of a kind (in ``namespace``, else in every namespace) matching ``label_selector``."""
        from kubernetes.client.exceptions import ApiException

        resource = self.resource({"apiVersion": api_version, "kind": kind})
        try:
            return resource.get(namespace=namespace, label_selector=label_selector or None).to_dict()["items"]
        except ApiException as error:
            where = f" in {namespace}" if namespace else ""
            raise ApplyError(f"{kind} objects{where} not listed: {_server_message(error)}") from None

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None, *,
               propagation: str = "Background", grace_seconds: Optional[int] = None) -> bool:
        """Delete an object; False when there was none. ``propagation`` is the API's
        ``propagationPolicy``: ``Background`` removes the object at once and its dependents after,
        ``Foreground`` keeps it (with a deletionTimestamp) until the garbage collector has removed
        every dependent that blocks it. ``grace_seconds`` unset keeps each pod's own grace period."""
        from kubernetes.client.exceptions import ApiException

        resource = self.resource({"apiVersion": api_version, "kind": kind})
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            resource.delete(name=name, namespace=namespace, body=body)
        except ApiException as error:
            if error.status == 404:
                return False
            raise ApplyError(f"{_named(kind, name, namespace)} not deleted: {_server_message(error)}") from None
        return True


def _named(kind: str, name: str, namespace: Optional[str]) -> str:
    return describe({"kind": kind, "metadata": {"name": name, "namespace": namespace}})


def _retry_after(error) -> float:
    """The seconds a busy API server asks for (its Retry-After header), 1 when it names none."""
    try:
        return min(float((error.headers or {}).get("Retry-After", 1)), 10.0)
    except (TypeError, ValueError):
        return 1.0


def _server_message(error) -> str:
    try:
        body = json.loads(error.body)
        return body.get("message") or str(error.body)
    except (TypeError, ValueError):
        return f"{error.status} {error.reason}"
