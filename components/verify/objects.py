"""Reading Kubernetes objects as the API serves them (plain dicts, the shape of ``kubectl get -o
json``): which nodes are GPU nodes and of which pool, which pods make up a training job, what a
pod requests, which label selector selects it."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

from ..facts.catalog import GPU_INSTANCE_TYPES
from ..facts.gpu_nodes import (
    EKS_NODEGROUP_KEY,
    GPU_NODE_ROLE_LABEL,
    GPU_POOL_KEY,
    GPU_RESOURCE,
    INSTANCE_TYPE_KEY,
    KARPENTER_NODEPOOL_LABEL,
)
from ..facts.quantity import parse_quantity
from ..workloads.training_spec import COMPONENT_LABEL, JOB_NAME_LABEL, TRAINING_COMPONENT

TERMINATED_PHASES = ("Succeeded", "Failed")
"""Pod phases of pods that hold nothing on their node any more."""

NO_GPU_NODE = "no GPU node in the cluster (none labelled role=gpu-training or of a GPU type of the catalog)"
NO_TRAINING_JOB = "no training job runs (no Running pod labelled app.kubernetes.io/component=training)"
"""Why a row has nothing to judge: what counts as a GPU node and as a training job (below)."""


def name(obj: Mapping[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "")


def namespace(obj: Mapping[str, Any]) -> str:
    return obj.get("metadata", {}).get("namespace", "")


DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Union[str, int], ...]:
    """Sorts names as a person counts them: ``gpu-2`` before ``gpu-10``. Splitting on digits puts
    text at even places and numbers at odd ones, so two keys only ever compare like with like."""
    return tuple(int(part) if index % 2 else part for index, part in enumerate(DIGITS.split(text)))


def qualified(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object."""
    return f"{namespace(obj)}/{name(obj)}"


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("annotations") or {}


def condition(obj: Mapping[str, Any], kind: str) -> Optional[dict[str, Any]]:
    """The status condition of type ``kind``, if the object has one."""
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


# --- nodes ---------------------------------------------------------------------------------------


def instance_type(node: Mapping[str, Any]) -> str:
    return labels(node).get(INSTANCE_TYPE_KEY, "")


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """A node labelled ``role=gpu-training``, or of a GPU type of the catalog (a GPU node that lost
    its role label is still one)."""
    key, value = GPU_NODE_ROLE_LABEL
    return labels(node).get(key) == value or instance_type(node) in GPU_INSTANCE_TYPES


def gpu_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The GPU nodes, by name as a person counts (``gpu-2`` before ``gpu-10``)."""
    return sorted((n for n in nodes if is_gpu_node(n)), key=lambda n: natural_key(name(n)))


@dataclass(frozen=True, order=True)
class PoolKey:
    """The pool a node belongs to, by the label that names it."""

    label: str
    """The node label: ``eks-gpu-training/pool`` (managed pool), ``karpenter.sh/nodepool``, or
    ``eks.amazonaws.com/nodegroup`` (a node group of another program)."""
    value: str

    def __str__(self) -> str:
        if self.label == GPU_POOL_KEY:
            return f"pool {self.value}"
        if self.label == KARPENTER_NODEPOOL_LABEL:
            return f"Karpenter pool {self.value}"
        if self.label == EKS_NODEGROUP_KEY:
            return f"node group {self.value}"
        return "nodes without a pool label"


def pool_of(node: Mapping[str, Any]) -> PoolKey:
    node_labels = labels(node)
    for key in (GPU_POOL_KEY, KARPENTER_NODEPOOL_LABEL, EKS_NODEGROUP_KEY):
        if key in node_labels:
            return PoolKey(key, node_labels[key])
    return PoolKey("", "")


def nodes_by_pool(nodes: Iterable[Mapping[str, Any]]) -> dict[PoolKey, list[Mapping[str, Any]]]:
    pools: dict[PoolKey, list[Mapping[str, Any]]] = defaultdict(list)
    for node in nodes:
        pools[pool_of(node)].append(node)
    return dict(sorted(pools.items()))


def allocatable(node: Mapping[str, Any], resource: str) -> int:
    """Whole units of an extended resource the node offers pods (0 when it reports none)."""
    value = node.get("status", {}).get("allocatable", {}).get(resource)
    return int(parse_quantity(str(value))) if value is not None else 0


def taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return node.get("spec", {}).get("taints") or []


# --- pods ----------------------------------------------------------------------------------------


def is_active(pod: Mapping[str, Any]) -> bool:
    """A pod that is not finished (Pending or Running)."""
    return pod.get("status", {}).get("phase") not in TERMINATED_PHASES


def is_running(pod: Mapping[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running"


def node_name(pod: Mapping[str, Any]) -> str:
    return pod.get("spec", {}).get("nodeName") or ""


def owner_kinds(obj: Mapping[str, Any]) -> set[str]:
    return {o.get("kind", "") for o in obj.get("metadata", {}).get("ownerReferences") or []}


def owned_by(obj: Mapping[str, Any], kind: str, owner: str) -> bool:
    return any(o.get("kind") == kind and o.get("name") == owner for o in obj.get("metadata", {}).get("ownerReferences") or [])


def requested(pod: Mapping[str, Any], resource: str) -> int:
    """Whole units of a resource the pod's largest request of it asks for, init containers included
    (a container's requests, else its limits, which Kubernetes copies to requests for extended
    resources); 0 when no container asks for it."""
    spec = pod.get("spec", {})
    total = 0
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
        if value is not None:
            total = max(total, int(parse_quantity(str(value))))
    return total


def requests_gpus(pod: Mapping[str, Any]) -> bool:
    return requested(pod, GPU_RESOURCE) > 0


def is_training_pod(pod: Mapping[str, Any]) -> bool:
    """A pod of the training template: ``app.kubernetes.io/component=training``."""
    return labels(pod).get(COMPONENT_LABEL) == TRAINING_COMPONENT


@dataclass(frozen=True)
class TrainingJob:
    """The unfinished pods of one training app in one namespace."""

    namespace: str
    app: str
    """The pods' ``app`` label (``<name>-multi`` for a multi-node app), else their Job's name."""
    pods: tuple[Mapping[str, Any], ...]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.app}"

    @property
    def running(self) -> list[Mapping[str, Any]]:
        return [p for p in self.pods if is_running(p)]

    @property
    def multi_node(self) -> bool:
        return len(self.pods) > 1


def training_jobs(pods: Iterable[Mapping[str, Any]]) -> list[TrainingJob]:
    """Training jobs with at least one Running pod, each with all its unfinished pods."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        if is_training_pod(pod) and is_active(pod):
            pod_labels = labels(pod)
            app = pod_labels.get("app") or pod_labels.get(JOB_NAME_LABEL) or name(pod)
            groups[(namespace(pod), app)].append(pod)
    jobs = [TrainingJob(ns, app, tuple(sorted(members, key=lambda p: natural_key(name(p))))) for (ns, app), members in sorted(groups.items(), key=lambda entry: (entry[0][0], natural_key(entry[0][1])))]
    return [job for job in jobs if job.running]


# --- label selectors -----------------------------------------------------------------------------


def selector_matches(selector: Optional[Mapping[str, Any]], object_labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` against a label set: a null selector selects nothing, an empty one
    everything (policy/v1 PodDisruptionBudget semantics)."""
    if selector is None:
        return False
    if any(object_labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in object_labels
        if operator == "In" and not (present and object_labels[key] in values):
            return False
        if operator == "NotIn" and present and object_labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class SelectorIndex:
    """Objects with a label selector (PodDisruptionBudgets), looked up by a pod's namespace and
    labels without matching every selector of the namespace: a selector with ``matchLabels`` is
    filed under one of its pairs, which a pod must carry to be selected, so a pod is matched only
    against the few filed under its own labels (and those without ``matchLabels``)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._filed: dict[tuple[str, str, str], list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
        self._unfiled: dict[str, list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
        for position, obj in enumerate(objects):
            selector = (obj.get("spec") or {}).get("selector") or {}
            pairs = sorted((selector.get("matchLabels") or {}).items())
            if pairs:
                key, value = pairs[0]
                self._filed[(namespace(obj), key, value)].append((position, obj))
            else:
                self._unfiled[namespace(obj)].append((position, obj))

    def selecting(self, object_namespace: str, object_labels: Mapping[str, str]) -> list[Mapping[str, Any]]:
        """The objects of the namespace whose selector selects the labels, in the order given."""
        candidates = list(self._unfiled.get(object_namespace, ()))
        for key, value in object_labels.items():
            candidates += self._filed.get((object_namespace, key, value), ())
        return [obj for _, obj in sorted(candidates, key=lambda entry: entry[0]) if selector_matches((obj.get("spec") or {}).get("selector"), object_labels)]
