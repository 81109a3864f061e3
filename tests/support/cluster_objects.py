"""Kubernetes objects as the API server serves them (``kubectl get -o json`` shape), for the tests of
verify and of rendered pods: nodes of a GPU pool, training pods, PDBs, PriorityClasses, queues."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES

LAYER_KEY = "topology.k8s.aws/network-node-layer-{}"


def node(
    name: str,
    instance_type: str = "p5.48xlarge",
    *,
    pool: Optional[str] = "p5-training",
    karpenter_pool: Optional[str] = None,
    gpus: Optional[int] = None,
    efa: Optional[int] = None,
    tainted: bool = True,
    layers: Optional[Sequence[str]] = ("nn-a", "nn-b", "nn-c"),
    ready: bool = True,
    role: bool = True,
    accelerated_hardware_ready: Optional[str] = "True",
) -> dict[str, Any]:
    """A GPU node as EKS and the device plugins leave it: labels, the GPU taint, allocatable GPUs and
    EFA devices (by default the type's counts from the catalog), Ready and AcceleratedHardwareReady."""
    facts = GPU_INSTANCE_TYPES.get(instance_type)
    gpus = gpus if gpus is not None else (facts.gpus if facts else 0)
    efa = efa if efa is not None else (facts.efa_interfaces if facts else 0)
    labels = {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": instance_type}
    if role:
        labels["role"] = "gpu-training"
    if pool is not None:
        labels["eks-gpu-training/pool"] = pool
        labels["eks.amazonaws.com/nodegroup"] = f"{pool}-20260101000000000000000001"
    if karpenter_pool is not None:
        labels["karpenter.sh/nodepool"] = karpenter_pool
    for layer, value in enumerate(layers or (), start=1):
        labels[LAYER_KEY.format(layer)] = value
    allocatable = {"cpu": "191450m", "memory": "2002707124Ki", "pods": "100"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    if efa:
        allocatable["vpc.amazonaws.com/efa"] = str(efa)
    conditions = [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady" if ready else "KubeletNotReady"}]
    if accelerated_hardware_ready is not None:
        conditions.append({"type": "AcceleratedHardwareReady", "status": accelerated_hardware_ready, "reason": "AcceleratedHardwareIsReady" if accelerated_hardware_ready == "True" else "NvidiaXID79Error"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}] if tainted else []},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable, "conditions": conditions},
    }


def system_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"role": "system", "node.kubernetes.io/instance-type": "m7i.xlarge", "kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "3920m", "memory": "15147292Ki"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: Optional[str] = None,
    phase: str = "Running",
    labels: Optional[dict[str, str]] = None,
    annotations: Optional[dict[str, str]] = None,
    gpus: int = 0,
    owner: Optional[tuple[str, str]] = None,
    priority_class: Optional[str] = None,
    spread_keys: Sequence[str] = (),
    ready: bool = True,
) -> dict[str, Any]:
    """A pod; ``owner`` is (kind, name) of its controller."""
    resources = {"requests": {"cpu": "1"}, "limits": {}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "example/image:1", "resources": resources}]}
    if node is not None:
        spec["nodeName"] = node
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if spread_keys:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}} for key in spread_keys]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1" if owner[0] != "Job" else "batch/v1", "kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
    status: dict[str, Any] = {"phase": phase}
    if phase == "Running":
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def training_pods(
    app: str,
    nodes: Sequence[Optional[str]],
    *,
    namespace: str = "training",
    gpus: int = 8,
    priority_class: Optional[str] = "training-critical",
    spread_keys: Sequence[str] = ("kubernetes.io/hostname", LAYER_KEY.format(2)),
    topology_request: Optional[tuple[str, str]] = None,
    phase: str = "Running",
) -> list[dict[str, Any]]:
    """The pods of an Indexed training Job, labelled as the library's template labels them, one per
    entry of ``nodes`` (None: not scheduled). ``topology_request`` is (mode, level) of a Kueue request."""
    label_value = f"{app}-multi" if len(nodes) > 1 else app
    annotations = None
    if topology_request is not None:
        annotations = {f"kueue.x-k8s.io/podset-{topology_request[0]}-topology": topology_request[1]}
    return [
        pod(
            f"{app}-{index}-abcde",
            namespace,
            node=node_name,
            phase=phase if node_name is not None else "Pending",
            labels={
                "app": label_value,
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/component": "training",
                "app.kubernetes.io/part-of": "eks-gpu-training",
                "batch.kubernetes.io/job-name": app,
            },
            annotations=annotations,
            gpus=gpus,
            owner=("Job", app),
            priority_class=priority_class,
            spread_keys=spread_keys,
        )
        for index, node_name in enumerate(nodes)
    ]


def pdb(name: str, namespace: str, app_label: str, *, min_available: int, disruptions_allowed: int = 0, observed: bool = True) -> dict[str, Any]:
    """A PDB over ``app=<app_label>`` with the status the disruption controller computes."""
    status: dict[str, Any] = {"disruptionsAllowed": disruptions_allowed, "currentHealthy": min_available, "desiredHealthy": min_available, "expectedPods": min_available}
    if observed:
        status["observedGeneration"] = 1
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app_label}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        "status": status if observed else {},
    }


def priority_class(name: str, value: int, *, preemption_policy: str = "PreemptLowerPriority", global_default: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, "preemptionPolicy": preemption_policy}
    if global_default:
        body["globalDefault"] = True
    return body


SEED_CLASSES = [priority_class("training-critical", 1_000_000), priority_class("evaluation-normal", 500_000), priority_class("data-prep-low", 100_000)]
"""The library's default PriorityClasses as the API server returns them."""


def daemon_set(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace}, "spec": {}, "status": {}}


def daemon_pods(daemon: str, namespace: str, nodes: Sequence[str], *, ready: bool = True) -> list[dict[str, Any]]:
    return [pod(f"{daemon}-{n}", namespace, node=n, owner=("DaemonSet", daemon), ready=ready) for n in nodes]


def _matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    return {
        "In": lambda: labels.get(key) in values,
        "NotIn": lambda: labels.get(key) not in values,
        "Exists": lambda: key in labels,
        "DoesNotExist": lambda: key not in labels,
    }[operator]()


def selects_node(pod_spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """A node with ``labels`` satisfies the pod's nodeSelector and required node affinity: a unit
    tier pre-check of a rendered pod (taints aside); the cluster tier has the scheduler decide."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return not required or any(all(_matches(e, labels) for e in term.get("matchExpressions") or [])
                               for term in required["nodeSelectorTerms"])


FLEET_BLOCK_NODES = 16
"""Nodes under one layer-3 network node in ``fleet`` (about what EC2 shows for p5 capacity blocks);
four layer-3 blocks make a layer-2 block, four of those a layer-1 block."""
FLEET_DAEMONS = (
    ("nvidia-device-plugin-daemonset", "gpu-operator"),
    ("topology-labeler", "topology-labeler"),
    ("eks-node-monitoring-agent", "kube-system"),
    ("dcgm-server", "kube-system"),
)
"""The DaemonSets with a pod on every GPU node of ``fleet`` (the device plugin's, the labeler's and
the node monitoring agent's two)."""


def fleet(nodes: int = 1000, *, job_nodes: int = 8, pool: str = "p5-training", namespace: str = "training") -> dict[str, list[dict[str, Any]]]:
    """A healthy fleet of ``nodes`` p5 nodes as the API server lists it: network-node labels of
    ``FLEET_BLOCK_NODES`` per layer-3 block, a pod of each of ``FLEET_DAEMONS`` on every node, and
    the nodes filled with training jobs of ``job_nodes`` pods (one per node, each job under one
    layer-3 block), each with its PDB. The fields of a ``Snapshot``, by name."""
    names = [f"{pool}-{i}" for i in range(nodes)]
    gpu_nodes = [
        node(n, pool=pool, layers=(f"nn-l1-{i // (FLEET_BLOCK_NODES * 16)}", f"nn-l2-{i // (FLEET_BLOCK_NODES * 4)}", f"nn-l3-{i // FLEET_BLOCK_NODES}"))
        for i, n in enumerate(names)
    ]
    pods = [p for daemon, daemon_namespace in FLEET_DAEMONS for p in daemon_pods(daemon, daemon_namespace, names)]
    budgets = []
    for first in range(0, nodes - job_nodes + 1, job_nodes):
        app = f"job-{first // job_nodes}"
        pods += training_pods(app, names[first:first + job_nodes], namespace=namespace)
        budgets.append(pdb(app, namespace, f"{app}-multi", min_available=job_nodes))
    return {
        "nodes": [system_node("system-0"), system_node("system-1"), *gpu_nodes],
        "pods": pods,
        "pod_disruption_budgets": budgets,
        "priority_classes": list(SEED_CLASSES),
        "daemon_sets": [daemon_set(daemon, daemon_namespace) for daemon, daemon_namespace in FLEET_DAEMONS],
    }
