"""Where a training pod may run, and why: its node affinity, pod (anti-)affinity and topology
spread, plus the whole-node pod spec of the checks that take a GPU node (smoke test, DCGM
diagnostics), as plain functions of a ``TrainingJobSpec`` returning plain Kubernetes data. A pod:

- tolerates the GPU taint and requires a GPU node (``role=gpu-training``) of an allowed type;
- requires that no other pod of its app runs on its node, and spreads with ``DoNotSchedule``: one
  pod per node, owning every GPU of it;
- prefers nodes under the same network switch as its app's other pods (pod affinity on
  ``topology.k8s.aws/network-node-layer-3``, weight 100, and ``-layer-2``, weight 50): preferences,
  so a job still starts when no switch has room for all of it;
- carries a ``ScheduleAnyway`` spread on ``network-node-layer-2`` counting *other* apps' pods:
  counting its own would push them apart; counting others' steers a new job to the least busy
  switch, where the affinity keeps it together (unlabelled nodes score lowest).

A job with a topology request (``kueue.x-k8s.io/podset-{preferred,required}-topology``) is placed
by Kueue, which gives each pod a ``kubernetes.io/hostname`` node selector, so the two soft rules
would be scored among one node and are left out. The required rules agree with Kueue's choice: it
picks among the flavor's nodes honouring the pods' selector and tolerations, the GPU affinity names
all the pool's types (the configuration refuses an app that narrows them), and ``pool_selector``
pins the pods to their pool, so Kueue gives them that pool's ResourceFlavor and no other.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..facts.gpu_nodes import HOSTNAME_KEY, INSTANCE_TYPE_KEY, gpu_node_selector, gpu_toleration, network_layer_key
from .training_spec import COMPONENT_LABEL, TRAINING_COMPONENT, TrainingJobSpec


def app_selector(spec: TrainingJobSpec) -> dict[str, Any]:
    """Label selector matching the app's pods (the seed's ``app In [<name>-multi]``)."""
    return {"matchExpressions": [label_in("app", [spec.app_label])]}


def label_in(key: str, values: Sequence[str]) -> dict[str, Any]:
    """A node selector requirement: label ``key`` has one of ``values``."""
    return {"key": key, "operator": "In", "values": list(values)}


def gpu_node_affinity(*requirements: dict[str, Any]) -> dict[str, Any]:
    """Required node affinity: a GPU node (``role=gpu-training``) that meets every requirement."""
    expressions = [label_in(key, [value]) for key, value in gpu_node_selector().items()]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [*expressions, *requirements]}]}}


def one_pod_per_node(selector: dict[str, Any]) -> dict[str, Any]:
    """Required pod anti-affinity: no two pods matching ``selector`` on one node."""
    return {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": HOSTNAME_KEY}]}


def whole_node_pod(container: dict[str, Any], node_label: tuple[str, str], selector: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a check that takes a whole GPU node (the smoke test, DCGM diagnostics): it
    tolerates the GPU taint, runs only on nodes labelled ``node_label`` (a pool), and never beside
    another pod matching ``selector``, so a Job of N such pods covers N nodes."""
    key, value = node_label
    return {
        "restartPolicy": "Never",
        "tolerations": [gpu_toleration()],
        "affinity": {
            "nodeAffinity": gpu_node_affinity(label_in(key, [value])),
            "podAntiAffinity": one_pod_per_node(selector),
        },
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }


def training_affinity(spec: TrainingJobSpec) -> dict[str, Any]:
    """GPU nodes of the allowed types (and pool), one pod per node, close together on the network
    unless Kueue places the pods (see the module docstring)."""
    selector = app_selector(spec)
    requirements = [label_in(INSTANCE_TYPE_KEY, spec.instance_types)]
    if spec.pool_selector is not None:
        requirements.append(label_in(spec.pool_selector[0], [spec.pool_selector[1]]))
    affinity: dict[str, Any] = {
        "nodeAffinity": gpu_node_affinity(*requirements),
        "podAntiAffinity": one_pod_per_node(selector),
    }
    if spec.topology_request is not None:
        return affinity
    return {
        **affinity,
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": network_layer_key(3)}},
                {"weight": 50, "podAffinityTerm": {"labelSelector": selector, "topologyKey": network_layer_key(2)}},
            ]
        },
    }


def training_topology_spread(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """One pod per node (hostname, DoNotSchedule); away from other training apps' switches (layer 2,
    ScheduleAnyway) unless Kueue places the pods."""
    per_node = {
        "maxSkew": 1,
        "topologyKey": HOSTNAME_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": spec.app_label}},
    }
    if spec.topology_request is not None:
        return [per_node]
    return [
        per_node,
        {
            "maxSkew": 1,
            "topologyKey": network_layer_key(2),
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {
                "matchExpressions": [
                    {"key": COMPONENT_LABEL, "operator": "In", "values": [TRAINING_COMPONENT]},
                    {"key": "app", "operator": "NotIn", "values": [spec.app_label]},
                ]
            },
        },
    ]
