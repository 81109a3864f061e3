"""Where a training pod may run, and why: its node affinity, pod (anti-)affinity and topology spread,
plus the whole-node pod spec of the checks that take a GPU node (smoke test, DCGM diagnostics). Plain
functions of a ``TrainingJobSpec`` returning plain Kubernetes data.

How a training pod is placed, and why:

- it tolerates the GPU taint and requires a GPU node (``role=gpu-training``) of one of the allowed
  instance types;
- it requires that no other pod of the same app runs on its node (anti-affinity on
  ``kubernetes.io/hostname``) and spreads over nodes with ``DoNotSchedule``: one pod per node,
  each owning every GPU of its node;
- it prefers nodes under the same network switch as the app's other pods: a preferred pod affinity
  on ``topology.k8s.aws/network-node-layer-3`` (the switch closest to the instance, weight 100)
  and on ``-layer-2`` (weight 50). These are preferences, not requirements, because a job must still
  start when no single switch has room for all of it;
- it carries a ``ScheduleAnyway`` spread on ``network-node-layer-2`` whose selector counts the pods
  of *other* training apps. A spread constraint balances the pods it counts across domains, so
  counting the app's own pods would push them onto different switches, the opposite of what the
  seed wants; counting other apps' pods steers a new job towards the least busy layer-2 switch,
  and the affinity above then keeps its pods together there. Nodes without the label score lowest
  for a ``ScheduleAnyway`` constraint, so labelled nodes are preferred as well.

A job with a topology request (``kueue.x-k8s.io/podset-{preferred,required}-topology`` on the pod
template) is placed by Kueue: it picks a node for every pod and adds a ``kubernetes.io/hostname``
node selector to each, so the two soft rules above (the preferred switch affinity and the layer-2
spread) would only be scored among one node and are left out. The required rules stay and agree
with Kueue's choice: Kueue picks among the flavor's nodes (one pool, by its label) honouring the
pods' node selector and tolerations, the GPU node affinity names all of that pool's types (the
configuration refuses a topology request from an app that narrows them), and whole-node pods go one
per node anyway. ``pool_selector`` pins the pods to their pool's nodes, so that Kueue gives them
that pool's ResourceFlavor and no other.
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
