"""Reading a cluster once: every object the checks judge, as plain dicts.

``read_snapshot`` lists each resource of ``VERIFY_READS`` across all namespaces with the official
``kubernetes`` client (the ``[verify]`` extra) and keeps the API server's JSON as it came (the
shape ``kubectl get -o json`` prints), so the judges are plain functions of a ``Snapshot`` that
tests build from dicts. It only lists: nothing is written, watched or exec'd. Anything that keeps
the cluster from being read raises ``ClusterUnreadable`` with a one-line reason.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..addons.verifier_role import VERIFY_READS, VERIFY_VERB, ApiRead

PAGE_SIZE = 500
"""Objects per list call; the API server pages large lists (``limit`` and ``continue``)."""

READERS = 4
"""Resources read at once, each with its next page asked for ahead: eight connections at most."""

CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS = 10, 60
"""How long a read waits to connect and then for the answer: an endpoint that drops packets (a
private endpoint outside its VPN) fails within seconds instead of hanging."""

CONNECT_RETRIES = 1
"""Retries of a failed connection (urllib3's default, 3, only delays the answer when nothing listens)."""


class ClusterUnreadable(Exception):
    """The cluster cannot be reached or read; the message is one line saying why."""


@dataclass(frozen=True)
class Snapshot:
    """What the cluster showed, one list of API objects (plain dicts) per resource."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    pod_disruption_budgets: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    resource_quotas: list[dict[str, Any]] = field(default_factory=list)
    """Read with ``--stack`` only."""
    persistent_volume_claims: list[dict[str, Any]] = field(default_factory=list)
    """Read with ``--stack`` only."""
    daemon_sets: list[dict[str, Any]] = field(default_factory=list)
    """Read with ``--stack`` only."""
    cluster_queues: Optional[list[dict[str, Any]]] = None
    """Kueue's ClusterQueues; None when the cluster does not serve them (Kueue not installed) or
    they were not read (no ``--stack``)."""
    local_queues: Optional[list[dict[str, Any]]] = None
    """Kueue's LocalQueues; None as for ``cluster_queues``."""
    role_bindings: list[dict[str, Any]] = field(default_factory=list)
    """Read with ``--stack`` only."""
    cluster_role_bindings: list[dict[str, Any]] = field(default_factory=list)
    """Read with ``--stack`` only."""
    admission_policies: list[dict[str, Any]] = field(default_factory=list)
    """ValidatingAdmissionPolicies; read with ``--stack`` only."""
    admission_policy_bindings: list[dict[str, Any]] = field(default_factory=list)
    """ValidatingAdmissionPolicyBindings; read with ``--stack`` only."""
    admission_checks: Optional[list[dict[str, Any]]] = None
    """Kueue's AdmissionChecks; None when not served or not read (no ``--fleet``)."""
    multikueue_clusters: Optional[list[dict[str, Any]]] = None
    """A MultiKueue manager's workers (MultiKueueClusters); None as for ``admission_checks``."""
    multikueue_configs: Optional[list[dict[str, Any]]] = None
    """The MultiKueueConfigs listing them; None as for ``admission_checks``."""


SNAPSHOT_FIELDS = {
    "nodes": "nodes",
    "pods": "pods",
    "poddisruptionbudgets": "pod_disruption_budgets",
    "priorityclasses": "priority_classes",
    "resourcequotas": "resource_quotas",
    "persistentvolumeclaims": "persistent_volume_claims",
    "daemonsets": "daemon_sets",
    "clusterqueues": "cluster_queues",
    "localqueues": "local_queues",
    "rolebindings": "role_bindings",
    "clusterrolebindings": "cluster_role_bindings",
    "validatingadmissionpolicies": "admission_policies",
    "validatingadmissionpolicybindings": "admission_policy_bindings",
    "admissionchecks": "admission_checks",
    "multikueueclusters": "multikueue_clusters",
    "multikueueconfigs": "multikueue_configs",
}
"""The snapshot field each read of ``VERIFY_READS`` fills, by resource."""


def _forbidden(read: ApiRead) -> str:
    return (
        f"forbidden: the credentials may not {VERIFY_VERB} {read.resource} ({read.api_version}) in all namespaces; "
        f"grant '{VERIFY_VERB}' on '{read.resource}' of API group '{read.group}' "
        "(the stack's read-only ClusterRole does, with verify.clusterRole: true)"
    )


def _require_client() -> None:
    try:
        import kubernetes  # noqa: F401 - only whether it is there
    except ImportError:
        raise ClusterUnreadable("the kubernetes client is not installed: pip install 'eks-gpu-training[verify]'") from None


def api_client(kubeconfig: Optional[str], context: Optional[str]) -> Any:
    """A client of ``context`` in ``kubeconfig`` (defaults as ``read_snapshot``'s). Raises ``ClusterUnreadable``."""
    _require_client()
    from kubernetes import client, config

    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise ClusterUnreadable(f"kubeconfig {kubeconfig}: no such file")
    if kubeconfig is None and not os.environ.get("KUBECONFIG") and not Path(config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser().is_file():
        raise ClusterUnreadable(
            f"no kubeconfig: pass --kubeconfig, set $KUBECONFIG or write {config.KUBE_CONFIG_DEFAULT_LOCATION} "
            "(aws eks update-kubeconfig --name <cluster>)"
        )
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except Exception as error:  # noqa: BLE001 - the loader raises ConfigException, and an exec plugin anything
        raise ClusterUnreadable(f"kubeconfig: {_one_line(error)}") from None
    return _client(configuration)


def api_client_of(kubeconfig: dict[str, Any]) -> Any:
    """A client of the current context of a kubeconfig held as data (a MultiKueue worker's, read
    from the manager's Secret). Raises ``ClusterUnreadable``."""
    _require_client()
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(kubeconfig, client_configuration=configuration)
    except Exception as error:  # noqa: BLE001 - as in api_client
        raise ClusterUnreadable(f"kubeconfig: {_one_line(error)}") from None
    return _client(configuration)


def _client(configuration: Any) -> Any:
    from kubernetes import client

    configuration.retries = CONNECT_RETRIES
    # Every reader and the page it asks for ahead hold a connection at once; the client sizes its
    # pool by the CPUs (five each), and urllib3 warns on stderr when a pool overflows.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 2 * READERS)
    return client.ApiClient(configuration)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def _reason(error: BaseException) -> str:
    """The innermost cause of a connection failure (urllib3 wraps it in MaxRetryError)."""
    reason: Any = getattr(error, "reason", None)
    while getattr(reason, "reason", None) is not None and reason is not reason.reason:
        reason = reason.reason
    text = _one_line(reason if reason is not None else error)
    # NewConnectionError names the connection object first ("HTTPSConnection(host=..., port=...): Failed
    # to establish a new connection: [Errno 111] Connection refused"); the host is said already.
    return re.sub(r"^(<[^>]*>|HTTPS?Connection\([^)]*\)): ", "", text)


def _get(api: Any, path: str, query: list[tuple[str, Any]]) -> tuple[int, str, bytes]:
    """One GET: the answer's status, reason and bytes. Raises ``ClusterUnreadable`` when nothing answered."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    host = api.configuration.host
    try:
        request = api.param_serialize(
            "GET", path, query_params=query, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
        )
        response = api.call_api(*request, _request_timeout=(CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS))
        body = response.read()
    except ApiException as error:
        raise ClusterUnreadable(f"{host}: {_one_line(error)}") from None
    except HTTPError as error:
        raise ClusterUnreadable(f"cannot reach the API server at {host}: {_reason(error)}") from None
    except Exception as error:  # noqa: BLE001 - an exec plugin (aws eks get-token) failing to refresh the token
        raise ClusterUnreadable(f"{host}: {_one_line(error)}") from None
    if response.status == 401:
        raise ClusterUnreadable(f"unauthorized: the API server at {host} refused the kubeconfig's credentials (expired or unknown)")
    return response.status, str(response.reason), bytes(body)


def _page(api: Any, read: ApiRead, token: Optional[str]) -> Optional[bytes]:
    """One page of a resource's list, as the API server's bytes; None for an optional resource not served."""
    query: list[tuple[str, Any]] = [("limit", PAGE_SIZE)] + ([("continue", token)] if token else [])
    status, reason, body = _get(api, read.path, query)
    if status == 404 and read.optional:
        return None
    if status == 403:
        raise ClusterUnreadable(_forbidden(read))
    if not 200 <= status <= 299:
        raise ClusterUnreadable(f"{api.configuration.host}: {VERIFY_VERB} {read.resource} answered {status} {reason}")
    return body


def get_object(api: Any, path: str, what: str) -> dict[str, Any]:
    """The object at ``path`` (``what`` names it in a reason). Raises ``ClusterUnreadable`` when it
    cannot be read: absent, forbidden, or nothing answered."""
    status, reason, body = _get(api, path, [])
    if status == 403:
        raise ClusterUnreadable(f"forbidden: the credentials may not get {what}")
    if status == 404:
        raise ClusterUnreadable(f"no {what}")
    if not 200 <= status <= 299:
        raise ClusterUnreadable(f"{api.configuration.host}: get {what} answered {status} {reason}")
    try:
        found = json.loads(body)
    except ValueError:
        raise ClusterUnreadable(f"{api.configuration.host}: get {what} answered something other than JSON") from None
    return found if isinstance(found, dict) else {}


def list_all(api: Any, read: ApiRead) -> Optional[list[dict[str, Any]]]:
    """Every object of one resource; None for an optional resource not served. Raises ``ClusterUnreadable``."""
    return _list(api, read)


def _next_token_ahead(body: bytes) -> Optional[str]:
    """The next page's token read from the list's head alone (the API server writes ``metadata``
    before ``items``), so that page is asked for while this one parses; None when the head does
    not say. Only a guess: ``_list`` uses it when the whole page agrees."""
    head = body[:4096]
    end = head.find(b',"items":')
    if end < 0:
        return None
    try:
        token = (json.loads(head[:end] + b"}").get("metadata") or {}).get("continue")
    except ValueError:
        return None
    return token if isinstance(token, str) and token else None


def _list(api: Any, read: ApiRead) -> Optional[list[dict[str, Any]]]:
    """Every object of one resource, page by page, each page asked for while the one before it
    parses (at a thousand nodes the pods' pages parse for seconds); None for an optional resource
    not served."""
    items: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=1) as ahead:
        body = _page(api, read, None)
        while True:
            if body is None:
                return None
            guess = _next_token_ahead(body)
            fetching = ahead.submit(_page, api, read, guess) if guess else None
            try:
                page = json.loads(body)
            except ValueError:
                raise ClusterUnreadable(f"{api.configuration.host}: {VERIFY_VERB} {read.resource} answered something other "
                                        "than JSON; is it a Kubernetes API server?") from None
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            body = fetching.result() if fetching is not None and token == guess else _page(api, read, token)


def read_snapshot(kubeconfig: Optional[str] = None, context: Optional[str] = None, *, with_stack: bool = False,
                  with_fleet: bool = False) -> Snapshot:
    """List what the checks judge from the cluster of ``context`` (default: the kubeconfig's current
    context) in ``kubeconfig`` (default: ``$KUBECONFIG``, else ``~/.kube/config``); with
    ``with_stack`` and ``with_fleet``, also the objects of the ``--stack`` and ``--fleet`` checks.
    Raises ``ClusterUnreadable``."""
    api = api_client(kubeconfig, context)
    reads = [read for read in VERIFY_READS if read.wanted(with_stack, with_fleet)]
    try:
        # Side by side: the API server answers one while this process parses another.
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            listed = [pool.submit(_list, api, read) for read in reads]
            # In VERIFY_READS' order, so the first read that fails is the one reported.
            values: dict[str, Any] = {SNAPSHOT_FIELDS[read.resource]: result.result() for read, result in zip(reads, listed, strict=True)}
        return Snapshot(**values)
    finally:
        api.close()
