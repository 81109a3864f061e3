"""EKS node auto repair of managed node groups, simulated beside a local cluster.

On AWS, EKS replaces a node of a group with ``nodeRepairConfig`` enabled once a condition the node
monitoring agent sets has been False long enough: ``AcceleratedHardwareReady`` after 10 minutes,
the others after 30 (docs.aws.amazon.com/eks/latest/userguide/node-repair.html), unless an override
says otherwise, and never while more of the group is unhealthy than its threshold allows. It
launches an instance in the bad node's place and evicts the bad node's pods, so a
PodDisruptionBudget holds them, before terminating it
(docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html).

That runs on AWS's side, so this module simulates it, and only it: every step is an API write the
real control plane judges.

- the replacement registers as a kubelet would: a Node with the group's labels, taints (the health
  gate's startup taint among them) and capacity, in the bad node's zone and network block;
- the bad node is cordoned and its pods (not its DaemonSets') are evicted through the Eviction API,
  tried again every round while a budget refuses; once none is left, the Node is deleted.

Not simulated: a ``Reboot`` or ``NoAction`` override, and EKS's 15-minute drain limit. The waits
are scaled: one minute of EKS's is ``SECONDS_PER_REPAIR_MINUTE`` here.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..facts.gpu_nodes import GPU_POOL_KEY
from ..facts.node_monitoring import REPAIR_AFTER_MINUTES
from ..healthgate.gate_api import list_items
from ..healthgate.changes import WATCH, Changes, run_rounds
from .layout import File, Layout
from .processes import Process

SECONDS_PER_REPAIR_MINUTE = 1.0
"""How long one minute of EKS's repair wait lasts here: a second, so the 10 minutes EKS waits for
``AcceleratedHardwareReady`` are 10 s. The order of what happens is kept (the health gate's
quarantine acts within a round of 5 s, long before the repair), only the clock is shorter."""
INTERVAL_SECONDS = 2
"""How often the simulation looks at the nodes while one of a pool is unhealthy or being replaced;
otherwise it looks when a node changes (``healthgate.changes``)."""
IDLE_SECONDS = 60
"""A round at least this often, whatever the node watch says."""
REPAIRED_BY = "eks-gpu-training-local/repaired-by"
"""The annotation the simulation puts on a node it repairs: the name of the node that replaces it."""
REPLACE = "Replace"
LAYER_LABEL = re.compile(r"^topology\.k8s\.aws/network-node-layer-\d+$")
KEPT_LABELS = ("topology.kubernetes.io/zone",)
"""What the replacement takes from the node it replaces rather than from the group's template."""


@dataclass(frozen=True)
class Unhealthy:
    node: str
    pool: str
    condition: str
    reason: str
    since: datetime


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def unhealthy(node: Mapping[str, Any]) -> Optional[Unhealthy]:
    """The node's earliest False condition among those node auto repair acts on, or None."""
    found = []
    pool = (node["metadata"].get("labels") or {}).get(GPU_POOL_KEY, "")
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") in REPAIR_AFTER_MINUTES and condition.get("status") == "False":
            since = _parse_time(condition.get("lastTransitionTime") or condition.get("lastHeartbeatTime"))
            found.append(Unhealthy(node["metadata"]["name"], pool, condition["type"], condition.get("reason") or "", since))
    return min(found, key=lambda u: u.since) if found else None


def repair_action(settings: Mapping[str, Any], condition: str, reason: str) -> tuple[str, int]:
    """The action and its wait in minutes for a condition and reason: an override's, else EKS's (Replace)."""
    for override in settings.get("node_repair_config_overrides") or []:
        if override["node_monitoring_condition"] == condition and override["node_unhealthy_reason"] == reason:
            return override["repair_action"], int(override["min_repair_wait_time_mins"])
    return REPLACE, REPAIR_AFTER_MINUTES[condition]


def halted(settings: Mapping[str, Any], unhealthy_nodes: int, pool_nodes: int) -> bool:
    """Whether the group has more unhealthy nodes than its threshold lets EKS repair."""
    count = settings.get("max_unhealthy_node_threshold_count")
    if count is not None:
        return unhealthy_nodes > count
    percentage = settings.get("max_unhealthy_node_threshold_percentage")
    return percentage is not None and pool_nodes > 0 and unhealthy_nodes * 100 > percentage * pool_nodes


def parallel_limit(settings: Mapping[str, Any], unhealthy_nodes: int) -> int:
    """How many of the group's nodes may be in repair at once."""
    percentage = settings.get("max_parallel_nodes_repaired_percentage")
    if percentage is not None:
        return max(1, math.floor(unhealthy_nodes * percentage / 100))
    return int(settings.get("max_parallel_nodes_repaired_count") or 1)


def due_repairs(nodes: Sequence[Mapping[str, Any]], pools: Mapping[str, Mapping[str, Any]], now: datetime, *,
                seconds_per_minute: float = SECONDS_PER_REPAIR_MINUTE) -> tuple[list[Unhealthy], list[str]]:
    """The nodes whose repair starts now, and why others wait (halted groups, overrides that do not
    replace), in words."""
    due: list[Unhealthy] = []
    notes: list[str] = []
    for pool, config in pools.items():
        members = [n for n in nodes if (n["metadata"].get("labels") or {}).get(GPU_POOL_KEY) == pool]
        in_repair = [n for n in members if REPAIRED_BY in (n["metadata"].get("annotations") or {})]
        sick = [u for u in (unhealthy(n) for n in members if n not in in_repair) if u is not None]
        if not sick:
            continue
        settings = config["settings"]
        if halted(settings, len(sick) + len(in_repair), len(members)):
            notes.append(f"pool {pool}: {len(sick) + len(in_repair)} of {len(members)} nodes unhealthy, above the "
                         "group's threshold: repair halted")
            continue
        room = parallel_limit(settings, len(sick) + len(in_repair)) - len(in_repair)
        for found in sorted(sick, key=lambda u: u.since):
            action, minutes = repair_action(settings, found.condition, found.reason)
            if (now - found.since).total_seconds() < minutes * seconds_per_minute:
                continue
            if action != REPLACE:
                notes.append(f"{found.node}: {found.condition} {found.reason}: the group's override says {action}, "
                             "which the local cluster does not simulate")
                continue
            if room <= 0:
                notes.append(f"{found.node}: waits, the group repairs {len(in_repair)} node(s) at once already")
                continue
            due.append(found)
            room -= 1
    return due, notes


def replacement_name(pool: str, taken: Iterable[str]) -> str:
    names = set(taken)
    index = 0
    while f"{pool}-repair-{index}" in names:
        index += 1
    return f"{pool}-repair-{index}"


def replacement(template: Mapping[str, Any], bad: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The Node a replacement instance registers: the group's template, under a new name, in the bad
    node's zone and network block."""
    manifest = json.loads(json.dumps(template))
    labels = manifest["metadata"]["labels"]
    bad_labels = bad["metadata"].get("labels") or {}
    for key in [k for k in labels if LAYER_LABEL.match(k)]:
        del labels[key]
    labels.update({k: v for k, v in bad_labels.items() if LAYER_LABEL.match(k) or k in KEPT_LABELS})
    labels["kubernetes.io/hostname"] = name
    manifest["metadata"]["name"] = name
    return manifest


def drained(pod: Mapping[str, Any]) -> bool:
    """A pod a drain moves off its node: not a DaemonSet's (kubectl drain leaves those), not a static pod's mirror."""
    meta = pod["metadata"]
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False
    return not any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or [])


class Repairer:
    """One round at a time, through the API server: start due repairs, drain and remove repaired nodes."""

    def __init__(self, core: Any, pools: Mapping[str, Mapping[str, Any]], log: Any = print):
        self.core = core
        self.pools = pools
        self.log = log
        self._said: set[str] = set()

    def _say(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self.log(line)

    def _nodes(self) -> list[dict[str, Any]]:
        return list_items(self.core.list_node)

    def round(self, now: datetime) -> bool:
        """Start the repairs due at ``now``, drain and remove the nodes being replaced; whether
        any node of a pool is unhealthy or being replaced (a later round goes on with it)."""
        nodes = self._nodes()
        in_repair = [n for n in nodes if REPAIRED_BY in (n["metadata"].get("annotations") or {})]
        for node in in_repair:
            self._drain(node)
        due, notes = due_repairs(nodes, self.pools, now)
        for note in notes:
            self._say(note)
        for found in due:
            bad = next(n for n in nodes if n["metadata"]["name"] == found.node)
            name = replacement_name(found.pool, (n["metadata"]["name"] for n in nodes))
            self._register(replacement(self.pools[found.pool]["template"], bad, name))
            self.core.patch_node(found.node, {"metadata": {"annotations": {REPAIRED_BY: name}}, "spec": {"unschedulable": True}})
            self.log(f"{found.node}: {found.condition} False ({found.reason}) since {found.since:%H:%M:%S}: "
                     f"{name} registered in its place; {found.node} cordoned and drained")
        # A node whose repair just started is unhealthy in its pool: counted there.
        pooled = [n for n in nodes if (n["metadata"].get("labels") or {}).get(GPU_POOL_KEY) in self.pools]
        return bool(in_repair) or any(unhealthy(n) is not None for n in pooled)

    def _register(self, manifest: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_node(manifest, _preload_content=False)
        except ApiException as error:
            if error.status != 409:
                raise

    def _drain(self, node: Mapping[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        name = node["metadata"]["name"]
        listed = list_items(self.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={name}")
        moved = [pod for pod in listed if drained(pod)]
        for pod in [p for p in moved if not p["metadata"].get("deletionTimestamp")]:
            meta = pod["metadata"]
            eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
            try:
                self.core.create_namespaced_pod_eviction(meta["name"], meta["namespace"], eviction)
                self.log(f"{name}: evicted {meta['namespace']}/{meta['name']}")
            except ApiException as error:
                if error.status == 404:
                    continue
                if error.status != 429:
                    raise
                self._say(f"{name}: eviction of {meta['namespace']}/{meta['name']} refused, its disruption budget "
                          "allows none; trying again every round")
        if not moved:
            try:
                self.core.delete_node(name)
            except ApiException as error:
                if error.status != 404:
                    raise
            self.log(f"{name}: drained and deleted, as when its instance terminates")


def repair_files(layout: Layout, config: Mapping[str, Any]) -> tuple[File, ...]:
    return (File(layout.node_repair_config, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()),)


def node_repair_process(layout: Layout) -> Process:
    """The simulation beside the cluster, run by this interpreter (it has the package)."""
    import sys

    return Process("node-repair", Path(sys.executable), ("-m", "eks_gpu_training.local.node_repair",
                                                         f"--kubeconfig={layout.kubeconfig}",
                                                         f"--config={layout.node_repair_config}"),
                   after=("kube-apiserver",))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Simulate EKS node auto repair of managed node groups on a local cluster.")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--config", required=True, type=Path)
    options = parser.parse_args(argv)
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=options.kubeconfig)
    core = client.CoreV1Api(api)
    repairer = Repairer(core, json.loads(options.config.read_text()), log=lambda line: print(line, flush=True))

    def round_() -> bool:
        try:
            return repairer.round(datetime.now(timezone.utc))
        except Exception as error:  # noqa: BLE001 - the API server restarting; try again next round
            print(f"could not repair: {error}", flush=True)
            return True

    run_rounds(round_, Changes(partial(core.list_node, **WATCH)), interval=INTERVAL_SECONDS, idle=IDLE_SECONDS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
