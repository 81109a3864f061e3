"""``--fleet``: on a MultiKueue manager, a row for its AdmissionCheck and one per worker.

A worker's row passes when Kueue on the manager reaches it (its ``MultiKueueCluster`` is
``Active``; Kueue's reason and message when not), a ``MultiKueueConfig`` the AdmissionCheck names
lists it, and, read through the kubeconfig the manager holds for it, it has every ClusterQueue that
dispatches on the manager, active, and their LocalQueues: a job copied to it finds its queue there.
That last part needs ``get`` on the worker's Secret in Kueue's namespace, which the read-only role
does not grant, and a network path to the worker; without them the row says its queues were not
checked and why. ``read_workers`` reads the workers; ``judge_fleet`` is a plain function of what was read.
"""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import yaml

from ..addons.kueue import KUEUE_NAMESPACE
from ..addons.verifier_role import KUEUE_GROUP, KUEUE_VERSION, ApiRead
from ..facts import yaml_io
from ..workloads.multikueue_manager import KUBECONFIG_KEY, MULTIKUEUE_CONTROLLER
from .objects import condition, name, natural_key, qualified
from .rows import EXAMPLES, Row, described, failed, group, listing, passed
from .snapshot import READERS, ClusterUnreadable, Snapshot, api_client_of, get_object, list_all

WORKER_READS = (ApiRead(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", optional=True),
                ApiRead(KUEUE_GROUP, KUEUE_VERSION, "localqueues", optional=True))
"""What is read of a worker, as the manager's identity there may (``multikueue_worker.reader_rules``)."""
CHECK_ITEM, WORKERS_ITEM = "multikueue-admission-check", "multikueue-workers"
FLEET_DOC = "docs/fleet.md"


@dataclass(frozen=True)
class WorkerQueues:
    """A worker's queues, read through the kubeconfig its manager holds for it."""

    cluster_queues: Optional[list[dict[str, Any]]] = None
    """Its ClusterQueues; None when not read."""
    local_queues: Optional[list[dict[str, Any]]] = None
    """Its LocalQueues; None when not read."""
    unread: str = ""
    """Why they were not read (the Secret forbidden or absent, the worker unreachable from here); empty when read."""


def multikueue_checks(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The manager's AdmissionChecks of MultiKueue's controller."""
    return [c for c in snapshot.admission_checks or [] if (c.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER]


def _config_of(check: Mapping[str, Any]) -> str:
    parameters = (check.get("spec") or {}).get("parameters") or {}
    return str(parameters.get("name", "")) if parameters.get("kind") == "MultiKueueConfig" else ""


def dispatching_queues(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The manager's ClusterQueues that run a MultiKueue check, by name."""
    checks = {name(c) for c in multikueue_checks(snapshot)}
    return sorted((q for q in snapshot.cluster_queues or [] if checks & _checks_of(q)), key=lambda q: natural_key(name(q)))


def _checks_of(queue: Mapping[str, Any]) -> set[str]:
    spec = queue.get("spec") or {}
    named = [c.get("name", "") for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    return {*named, *(spec.get("admissionChecks") or [])}


def _kubeconfig_secret(cluster: Mapping[str, Any]) -> tuple[str, str]:
    """The Secret holding a MultiKueueCluster's kubeconfig; ``("", why)`` when it is held elsewhere."""
    source = (cluster.get("spec") or {}).get("clusterSource") or {}
    kubeconfig = source.get("kubeConfig") or (cluster.get("spec") or {}).get("kubeConfig") or {}
    if not kubeconfig:
        return "", "its credentials come from a ClusterProfile, not a kubeconfig Secret"
    if kubeconfig.get("locationType", "Secret") != "Secret":
        return "", "its kubeconfig is a file in the manager's Kueue pod"
    return str(kubeconfig.get("location", "")), ""


def read_worker(manager_api: Any, cluster: Mapping[str, Any]) -> WorkerQueues:
    """The worker's queues, through the kubeconfig in its MultiKueueCluster's Secret."""
    secret, elsewhere = _kubeconfig_secret(cluster)
    if not secret:
        return WorkerQueues(unread=elsewhere)
    try:
        found = get_object(manager_api, f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{secret}", f"Secret {KUEUE_NAMESPACE}/{secret}")
        encoded = (found.get("data") or {}).get(KUBECONFIG_KEY)
        if not encoded:
            return WorkerQueues(unread=f"Secret {KUEUE_NAMESPACE}/{secret} has no {KUBECONFIG_KEY}")
        worker_api = api_client_of(yaml_io.load(base64.b64decode(encoded).decode()))
        try:
            cluster_queues, local_queues = (list_all(worker_api, read) for read in WORKER_READS)
            return WorkerQueues(cluster_queues, local_queues)
        finally:
            worker_api.close()
    except ClusterUnreadable as error:
        return WorkerQueues(unread=str(error))
    except (ValueError, yaml.YAMLError) as error:  # not base64, or not YAML
        return WorkerQueues(unread=f"Secret {KUEUE_NAMESPACE}/{secret}: not a kubeconfig ({error})")


def read_workers(manager_api: Any, snapshot: Snapshot) -> dict[str, WorkerQueues]:
    """Each MultiKueueCluster's worker read side by side (an unreachable one waits out its timeout)."""
    clusters = snapshot.multikueue_clusters or []
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        read = [pool.submit(read_worker, manager_api, cluster) for cluster in clusters]
        return {name(cluster): result.result() for cluster, result in zip(clusters, read, strict=True)}


def judge_fleet(snapshot: Snapshot, workers: Mapping[str, WorkerQueues], examples: int = EXAMPLES) -> list[Row]:
    """The AdmissionCheck's row, then a row per worker: those its MultiKueueConfigs list, in their
    order, then any other MultiKueueCluster."""
    checks = multikueue_checks(snapshot)
    if not checks or not snapshot.multikueue_clusters:
        return [_not_a_manager(snapshot)]
    configs = {name(c): list((c.get("spec") or {}).get("clusters") or []) for c in snapshot.multikueue_configs or []}
    used = [configs.get(_config_of(check), []) for check in checks]
    listed = list(dict.fromkeys(worker for names in used for worker in names))
    clusters = {name(c): c for c in snapshot.multikueue_clusters}
    order = listed + sorted(set(clusters) - set(listed), key=natural_key)
    queues = dispatching_queues(snapshot)
    return [_admission_check_row(snapshot, checks, queues, examples),
            *(_worker_row(worker, clusters.get(worker), _place(worker, checks, configs), queues, snapshot,
                          workers.get(worker, WorkerQueues(unread="not read")), examples) for worker in order)]


def _not_a_manager(snapshot: Snapshot) -> Row:
    if snapshot.admission_checks is None or snapshot.multikueue_clusters is None:
        why = "Kueue on this cluster serves no MultiKueue objects (no Kueue, or MultiKueue off)"
    elif not multikueue_checks(snapshot):
        why = f"no AdmissionCheck of controller {MULTIKUEUE_CONTROLLER}"
    else:
        why = "no MultiKueueCluster"
    return failed(WORKERS_ITEM, f"{why}: this cluster is no MultiKueue manager.",
                  "point --kubeconfig/--context at the manager, or deploy it with multiKueue.manager: true "
                  f"and its workers ({FLEET_DOC}).")


def _place(worker: str, checks: Sequence[Mapping[str, Any]], configs: Mapping[str, list[str]]) -> str:
    """Where the worker stands in the configs the checks name; empty when in none."""
    for check in checks:
        listed = configs.get(_config_of(check), [])
        if worker in listed:
            return f"{_ordinal(listed.index(worker) + 1)} of {len(listed)} in MultiKueueConfig {_config_of(check)}"
    return ""


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _said(obj: Mapping[str, Any], kind: str) -> str:
    found = condition(obj, kind) or {}
    return ": ".join(part for part in (found.get("reason", ""), found.get("message", "")) if part)


def _active(obj: Mapping[str, Any]) -> bool:
    return (condition(obj, "Active") or {}).get("status") == "True"


def _admission_check_row(snapshot: Snapshot, checks: list[dict[str, Any]], queues: list[dict[str, Any]], examples: int) -> Row:
    names = ", ".join(name(c) for c in checks)
    inactive = [c for c in checks if not _active(c)]
    without = sorted((name(q) for q in snapshot.cluster_queues or [] if q not in queues), key=natural_key)
    stopped = [q for q in queues if not _active(q)]
    states = "; ".join(f"{name(c)} {'Active' if _active(c) else 'not Active'} ({_said(c, 'Active') or 'no Active condition yet'})"
                       for c in checks)
    evidence = f"AdmissionCheck {states}; {len(queues)} ClusterQueue(s) dispatch through it ({listing([name(q) for q in queues])})."
    if not (inactive or without or stopped or not queues):
        return passed(CHECK_ITEM, evidence)
    groups = group("ClusterQueue", [*((queue, f"without AdmissionCheck {names}: its jobs run on the manager") for queue in without),
                                    *((name(q), f"not Active ({_said(q, 'Active')})") for q in stopped)], examples)
    fix = ("Kueue says what is wrong in the check's Active condition (kubectl get admissionchecks -o yaml)" if inactive else
           "put the check on every ClusterQueue of the manager (its stack does, with multiKueue.manager)")
    return failed(CHECK_ITEM, f"{evidence} {described(groups)}".rstrip(), f"{fix} ({FLEET_DOC}).", groups)


def _worker_row(worker: str, cluster: Optional[Mapping[str, Any]], place: str, queues: list[dict[str, Any]],
                snapshot: Snapshot, read: WorkerQueues, examples: int) -> Row:
    item = f"multikueue-worker/{worker}"
    if cluster is None:
        return failed(item, f"{place[0].upper()}{place[1:]}, but no MultiKueueCluster {worker}: Kueue counts it missing.",
                      f"create it with its kubeconfig Secret, or take it out of the config ({FLEET_DOC}).")
    found = condition(cluster, "Active")
    if found is None or found.get("status") != "True":
        said = f"{found.get('reason', '')}: {found.get('message', '')}" if found else "no Active condition yet"
        return failed(item, f"MultiKueueCluster {worker} not Active ({said}): no job is dispatched to it"
                      + (f"; {_queues_said(read, queues, snapshot)[0]}" if read.unread else "") + ".",
                      "Kueue on the manager cannot reach or use the worker: check its API server is up and reachable "
                      f"from the manager and its kubeconfig Secret holds a live token ({FLEET_DOC}#the-credential).")
    evidence = f"MultiKueueCluster {worker} Active ({_said(cluster, 'Active')})"
    if not place:
        return failed(item, f"{evidence}, but in no MultiKueueConfig the AdmissionCheck names: no job is dispatched to it.",
                      f"list it in the manager's workers ({FLEET_DOC}).")
    text, problems = _queues_said(read, queues, snapshot)
    if not problems:
        return passed(item, f"{evidence}, {place}; {text}.")
    groups = group("queue", problems, examples)
    return failed(item, f"{evidence}, {place}; {described(groups)}.",
                  "the worker's stack must make the manager's namespaces in the same teams, and its ClusterQueues say "
                  f"in their Active condition why not active (kubectl get clusterqueues on the worker; {FLEET_DOC}).", groups)


def _queues_said(read: WorkerQueues, queues: list[dict[str, Any]], snapshot: Snapshot) -> tuple[str, list[tuple[str, str]]]:
    """What the worker's queues show, and each dispatching queue missing or inactive there."""
    if read.unread:
        return f"its queues not checked: {read.unread}", []
    if read.cluster_queues is None:
        return "", [("Kueue", "not served on the worker")]
    theirs = {name(q): q for q in read.cluster_queues}
    wanted = {name(q) for q in queues}
    problems = [(f"ClusterQueue {queue}", "missing on the worker") for queue in sorted(wanted - set(theirs), key=natural_key)]
    problems += [(f"ClusterQueue {queue}", f"not Active on the worker ({_said(theirs[queue], 'Active')})")
                 for queue in sorted(wanted & set(theirs), key=natural_key) if not _active(theirs[queue])]
    local = sorted(qualified(q) for q in snapshot.local_queues or [] if (q.get("spec") or {}).get("clusterQueue") in wanted)
    present = {qualified(q) for q in read.local_queues or []}
    problems += [(f"LocalQueue {queue}", "missing on the worker") for queue in local if queue not in present]
    return f"its ClusterQueues {listing(sorted(wanted, key=natural_key))} active and their {len(local)} LocalQueues there", problems
