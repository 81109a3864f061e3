"""The gate's calls to the API server: what it lists, and how each action is written.

Every write is one the gate's admission policy allows (``workloads.health_gate_admission``): a
Node's taint list, replaced whole but only with the gate's own taints changed, sent with the
``resourceVersion`` it was read at (a write racing another is refused and tried again at the next
round); one node condition, ``HealthChecksPassed``, through the status subresource; check Jobs in
its own namespace; NodeClaims of the stack's Karpenter GPU pools, each deletion recorded as an
Event in its namespace (``replacements``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable, Optional

from .changes import WATCH
from .node_check import check_job
from .decide import Action, CreateCheck, DeleteCheck, DeleteNodeClaim, SetCondition, SetTaints
from .replacements import POOL_LABEL, Replacement, event_manifest, from_events
from .gate_settings import CHECK_LABELS, CONDITION_TYPE, CONFIG_KEY, GateSettings

NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")
SELECTOR = ",".join(f"{key}={value}" for key, value in CHECK_LABELS.items())


def list_items(call: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as the API server's JSON: the client's models, and the dicts made back
    from them, were most of a gate round at a thousand nodes. The local cluster's programs and the
    cluster tier read their lists the same way."""
    response = call(*args, _preload_content=False, **kwargs)
    return list(json.loads(response.data).get("items") or [])


class Cluster:
    """The API server, through one client (in-cluster, or a kubeconfig's identity, optionally
    impersonating the gate's ServiceAccount)."""

    def __init__(self, api_client: Any, namespace: str):
        from kubernetes import client

        self.api = api_client
        self.namespace = namespace
        # Typed loosely: the client takes plain dicts as bodies and returns dicts for custom
        # objects, which its annotations (model classes, ``object``) do not say.
        self.core: Any = client.CoreV1Api(api_client)
        self.batch: Any = client.BatchV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)
        self.events: Any = client.EventsV1Api(api_client)
        self.config_map = ""
        self.last_settings: Optional[GateSettings] = None
        """The settings the last round read (None before one read them)."""
        # What a round lists, each named once: a round lists them, and ``watches`` watches the same.
        self._list_nodes: Callable[..., Any] = self.core.list_node
        self._list_jobs: Callable[..., Any] = partial(self.batch.list_namespaced_job, namespace, label_selector=SELECTOR)
        self._list_pods: Callable[..., Any] = partial(self.core.list_namespaced_pod, namespace, label_selector=SELECTOR)
        self._list_nodeclaims: Callable[..., Any] = partial(self.custom.list_cluster_custom_object, *NODECLAIMS)
        self._list_events: Callable[..., Any] = partial(self.events.list_namespaced_event, namespace, label_selector=POOL_LABEL)

    @staticmethod
    def _send(call: Any, *args: Any, **kwargs: Any) -> None:
        """A write whose answer the gate does not read (a refusal still raises ``ApiException``)."""
        response = call(*args, _preload_content=False, **kwargs)
        response.read()
        response.release_conn()

    def settings(self, config_map: str) -> GateSettings:
        self.config_map = config_map
        data = self.core.read_namespaced_config_map(config_map, self.namespace).data or {}
        self.last_settings = GateSettings.from_json(data.get(CONFIG_KEY, ""))
        return self.last_settings

    def nodes(self) -> list[dict[str, Any]]:
        return list_items(self._list_nodes)

    def check_jobs(self) -> list[dict[str, Any]]:
        return list_items(self._list_jobs)

    def check_pods(self) -> list[dict[str, Any]]:
        return list_items(self._list_pods)

    def nodeclaims(self, settings: GateSettings) -> list[dict[str, Any]]:
        if not settings.karpenter_pools:
            return []
        items = self._list_nodeclaims()["items"]
        return [c for c in items if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") in settings.karpenter_pools]

    def replacements(self, settings: GateSettings) -> list[Replacement]:
        """The NodeClaims the gate deleted lately, from the Events it wrote (none without Karpenter pools)."""
        if not settings.karpenter_pools:
            return []
        return from_events(list_items(self._list_events))

    def watches(self, config_map: str) -> list[Callable[[], Any]]:
        """What a round reads whatever the settings, as watches (``changes.Changes``): the nodes,
        the check Jobs and their pods, and the settings' ConfigMap."""
        return [
            *(partial(read, **WATCH) for read in (self._list_nodes, self._list_jobs, self._list_pods)),
            partial(self.core.list_namespaced_config_map, self.namespace, field_selector=f"metadata.name={config_map}", **WATCH),
        ]

    def karpenter_watches(self) -> list[Callable[[], Any]]:
        """What a round reads once the settings name Karpenter pools: NodeClaims, and the gate's Events."""
        return [partial(read, **WATCH) for read in (self._list_nodeclaims, self._list_events)]

    def apply(self, action: Action, settings: GateSettings, now: str) -> None:
        if isinstance(action, CreateCheck):
            job = check_job(settings.check_pod, settings.namespace, action.node, action.node_uid,
                            settings.pools[action.pool], settings.check_seconds)
            self._create_job(job)
        elif isinstance(action, SetTaints):
            body: dict[str, Any] = {"spec": {"taints": [dict(t) for t in action.taints] or None}}
            if action.resource_version:
                body["metadata"] = {"resourceVersion": action.resource_version}
            self._send(self.core.patch_node, action.node, body)
        elif isinstance(action, SetCondition):
            condition = {"type": CONDITION_TYPE, "status": action.status, "reason": action.reason,
                         "message": action.message, "lastHeartbeatTime": now, "lastTransitionTime": now}
            self._send(self.core.patch_node_status, action.node, {"status": {"conditions": [condition]}})
        elif isinstance(action, DeleteCheck):
            self._delete(lambda: self._send(self.batch.delete_namespaced_job, action.job, self.namespace,
                                            propagation_policy="Background"))
        elif isinstance(action, DeleteNodeClaim):
            group, version, plural = NODECLAIMS
            self._delete(lambda: self.custom.delete_cluster_custom_object(group, version, plural, action.name))
            # Recorded after the deletion: a deletion that failed counts for nothing.
            self._send(self.events.create_namespaced_event, self.namespace, event_manifest(
                self.namespace, self.config_map, action.name, action.node, action.pool, action.reason,
                datetime.now(timezone.utc)))

    def _create_job(self, job: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._send(self.batch.create_namespaced_job, self.namespace, job)
        except ApiException as error:
            if error.status != 409:  # made by an earlier round: the next round reads it
                raise

    @staticmethod
    def _delete(call: Any) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            call()
        except ApiException as error:
            if error.status != 404:
                raise


def refusal(error: BaseException) -> Optional[str]:
    """The API server's words when it refused a write (a conflict, a policy), else None."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException) and error.status in (403, 409, 422):
        return f"{error.status} {error.reason}: {error.body}"
    return None
