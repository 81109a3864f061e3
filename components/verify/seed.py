"""The seed's validation checklist, judged on what a live cluster shows.

| seed item                                                         | row                       |
|-------------------------------------------------------------------|---------------------------|
| NVIDIA device plugin reports GPUs on all training nodes           | ``gpu-device-plugin``     |
| EFA device plugin reports EFA interfaces                          | ``efa-device-plugin``     |
| Priority classes are created and applied to training jobs         | ``priority-classes``      |
| PDB is protecting running training pods                           | ``pod-disruption-budgets``|
| GPU taints prevent non-GPU workloads from scheduling on GPU nodes | ``gpu-taints``            |
| Training pods are anti-affined (one per node for multi-node)      | ``one-pod-per-node``      |
| (3+ nodes) Topology labels applied to GPU nodes                   | ``topology-labels``       |
| (3+ nodes) Training pods use topology-aware spread constraints    | ``topology-aware-spread`` |

GPU nodes are the nodes labelled ``role=gpu-training`` or of a GPU type of the catalog. A training
job is the unfinished pods of one ``app`` label with ``app.kubernetes.io/component=training`` (the
label the training templates put on every pod) in one namespace, of which at least one runs. Each
judge is a plain function of a ``Snapshot``; with the stack's arguments, it uses what the stack
declares (which pools have EFA, which PriorityClasses exist) instead of the library's defaults.
The two "(3+ nodes)" items live in ``topology``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Optional

from ..addons import efa_device_plugin as efa_plugin, gpu_operator
from ..config import DEFAULT_PRIORITY_CLASSES, GpuPoolConfig, GpuTrainingPlatformArgs
from ..facts.catalog import GPU_INSTANCE_TYPES
from ..facts.gpu_nodes import (
    EFA_RESOURCE,
    GPU_POOL_KEY,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    KARPENTER_NODEPOOL_LABEL,
)
from .objects import (
    NO_GPU_NODE,
    NO_TRAINING_JOB,
    PoolKey,
    SelectorIndex,
    allocatable,
    gpu_nodes,
    instance_type,
    is_active,
    labels,
    name,
    node_name,
    owner_kinds,
    pool_of,
    qualified,
    requests_gpus,
    taints,
    training_jobs,
)
from .rows import EXAMPLES, Row, described, failed, group, listing, passed, skipped
from .snapshot import Snapshot
from .topology_placement import TOPOLOGY_AWARE_SPREAD, TOPOLOGY_LABELS, topology_aware_spread, topology_labels

GPU_DEVICE_PLUGIN = "gpu-device-plugin"
EFA_DEVICE_PLUGIN = "efa-device-plugin"
PRIORITY_CLASSES = "priority-classes"
POD_DISRUPTION_BUDGETS = "pod-disruption-budgets"
GPU_TAINTS = "gpu-taints"
ONE_POD_PER_NODE = "one-pod-per-node"
SEED_ITEMS = (
    GPU_DEVICE_PLUGIN,
    EFA_DEVICE_PLUGIN,
    PRIORITY_CLASSES,
    POD_DISRUPTION_BUDGETS,
    GPU_TAINTS,
    ONE_POD_PER_NODE,
    TOPOLOGY_LABELS,
    TOPOLOGY_AWARE_SPREAD,
)
"""The rows of the seed's checklist, in its order."""

TAINT_EFFECTS_KEEPING_PODS_OFF = ("NoSchedule", "NoExecute")
"""Taint effects that keep pods which do not tolerate them off a node (NoExecute also evicts them)."""



def _by_type(nodes: list[Mapping[str, Any]], resource: str) -> str:
    counts = Counter((instance_type(n), allocatable(n, resource)) for n in nodes)
    return ", ".join(f"{count} × {kind}: {value} each" for (kind, value), count in sorted(counts.items()))


def gpu_device_plugin(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """Every GPU node offers pods (``allocatable``) as many ``nvidia.com/gpu`` as its type has GPUs."""
    nodes = gpu_nodes(snapshot.nodes)
    if not nodes:
        return skipped(GPU_DEVICE_PLUGIN, NO_GPU_NODE)
    wrong = []
    for node in nodes:
        kind = instance_type(node)
        if kind not in GPU_INSTANCE_TYPES:
            wrong.append((name(node), f"of instance type '{kind}', which is not a GPU type of the catalog, so the GPU count is unknown"))
        elif (found := allocatable(node, GPU_RESOURCE)) != GPU_INSTANCE_TYPES[kind].gpus:
            wrong.append((name(node), f"of type {kind} offering {found} {GPU_RESOURCE} of the type's {GPU_INSTANCE_TYPES[kind].gpus}"))
    if wrong:
        groups = group("node", wrong, examples)
        return failed(
            GPU_DEVICE_PLUGIN,
            f"{len(wrong)} of {len(nodes)} GPU nodes: {described(groups)}.",
            f"check the NVIDIA device plugin pod on each node (kubectl -n {gpu_operator.NAMESPACE} get pods -o wide "
            "--field-selector spec.nodeName=<node>) and the node's AcceleratedHardwareReady condition; "
            "a node short of GPUs has a failed GPU: cordon it and let repair replace it.",
            groups,
        )
    return passed(GPU_DEVICE_PLUGIN, f"{len(nodes)} GPU nodes offer every GPU of their type ({_by_type(nodes, GPU_RESOURCE)}).")


def _declared_pools(args: Optional[GpuTrainingPlatformArgs]) -> dict[PoolKey, GpuPoolConfig]:
    """The stack's GPU pools by the node label that names their nodes (none without the stack)."""
    if args is None:
        return {}
    pools: dict[PoolKey, GpuPoolConfig] = {PoolKey(GPU_POOL_KEY, p.name): p for p in args.gpu_node_groups}
    if args.karpenter.enabled:
        pools.update({PoolKey(KARPENTER_NODEPOOL_LABEL, p.name): p for p in args.karpenter.gpu_node_pools})
    return pools


def _expected_efa(node: Mapping[str, Any], pools: Mapping[PoolKey, GpuPoolConfig]) -> int:
    """EFA devices a node should offer: its pool's layout (the fewest of the pool's types, as its
    launch template lays them out) when the stack declares the pool, else its type's count."""
    pool = pools.get(pool_of(node))
    return pool.efa_interfaces if pool is not None else GPU_INSTANCE_TYPES[instance_type(node)].efa_interfaces


def efa_device_plugin(snapshot: Snapshot, args: Optional[GpuTrainingPlatformArgs] = None, *, examples: int = EXAMPLES) -> Row:
    """Every GPU node of a type with EFA offers pods as many ``vpc.amazonaws.com/efa`` as the type
    has EFA interfaces (with the stack: except pools it runs without EFA)."""
    pools = _declared_pools(args)
    off = {key: f"efa: {pool.efa}" for key, pool in pools.items() if not pool.efa_enabled}
    nodes = gpu_nodes(snapshot.nodes)
    capable = [n for n in nodes if instance_type(n) in GPU_INSTANCE_TYPES and GPU_INSTANCE_TYPES[instance_type(n)].efa_interfaces > 0]
    judged = [n for n in capable if pool_of(n) not in off]
    if not judged:
        if capable:
            return skipped(EFA_DEVICE_PLUGIN, f"the stack runs the GPU nodes of a type with EFA without it ({listing(sorted({f'{pool_of(n)} ({off[pool_of(n)]})' for n in capable}))}).")
        return skipped(EFA_DEVICE_PLUGIN, "no GPU node of an instance type with EFA" if nodes else NO_GPU_NODE)
    wrong = []
    for node in judged:
        expected, found = _expected_efa(node, pools), allocatable(node, EFA_RESOURCE)
        if found != expected:
            wrong.append((name(node), f"of type {instance_type(node)} ({pool_of(node)}) offering {found} {EFA_RESOURCE}, expected {expected}"))
    if wrong:
        groups = group("node", wrong, examples)
        return failed(
            EFA_DEVICE_PLUGIN,
            f"{len(wrong)} of {len(judged)} EFA-capable GPU nodes: {described(groups)}.",
            f"check the EFA device plugin pod on each node (kubectl -n {efa_plugin.NAMESPACE} get pods -o wide -l "
            f"app.kubernetes.io/name={efa_plugin.CHART} --field-selector spec.nodeName=<node>) and that the node was launched "
            "with its EFA interfaces (the pool's launch template)"
            + ("" if args is not None else "; a pool that runs without EFA on purpose shows here too: pass --stack so the stack's efa setting is known")
            + ".",
            groups,
        )
    return passed(EFA_DEVICE_PLUGIN, f"{len(judged)} GPU nodes offer their EFA interfaces ({_by_type(judged, EFA_RESOURCE)}).")


def _expected_classes(args: Optional[GpuTrainingPlatformArgs]) -> list[str]:
    classes = args.scheduling.priority_classes if args is not None else DEFAULT_PRIORITY_CLASSES
    return [c.name for c in classes]


def priority_classes(snapshot: Snapshot, args: Optional[GpuTrainingPlatformArgs] = None, *, examples: int = EXAMPLES) -> Row:
    """The PriorityClasses exist (the stack's, else the library's defaults) and every pod of a
    running training job names one that exists."""
    expected = _expected_classes(args)
    values = {name(c): c.get("value") for c in snapshot.priority_classes}
    missing = [c for c in expected if c not in values]
    pods = [p for job in training_jobs(snapshot.pods) for p in job.pods]
    wrong = []
    for pod in pods:
        named = pod.get("spec", {}).get("priorityClassName")
        if not named:
            wrong.append((qualified(pod), "without a priorityClassName"))
        elif named not in values:
            wrong.append((qualified(pod), f"naming PriorityClass '{named}', which does not exist"))
    groups = group("training pod", wrong, examples)
    whose = "the stack's" if args is not None else "the library's default (pass --stack for the stack's own)"
    problems = [f"missing PriorityClasses of {whose} classes: {', '.join(missing)}"] if missing else []
    if missing or groups:
        return failed(
            PRIORITY_CLASSES,
            "; ".join([*problems, *(str(g) for g in groups)]) + ".",
            "run `pulumi up` to recreate the stack's classes (scheduling.priorityClasses); a pod's priority is set when it "
            "is created, so resubmit training jobs whose pods name no class or a missing one, from the library's templates.",
            groups,
        )
    present = ", ".join(f"{c} ({values[c]})" for c in expected)
    applied = Counter(p["spec"]["priorityClassName"] for p in pods)
    if not pods:
        return passed(PRIORITY_CLASSES, f"{whose.split(' (')[0]} classes exist: {present}; no training job runs, so no pod's class to check.")
    return passed(
        PRIORITY_CLASSES,
        f"classes exist: {present}; the {len(pods)} pods of running training jobs name existing classes "
        f"({', '.join(f'{n} × {c}' for c, n in sorted(applied.items()))}).",
    )


def _pdb_summary(pdb: Mapping[str, Any]) -> str:
    spec, status = pdb.get("spec", {}), pdb.get("status", {})
    bound = f"minAvailable {spec['minAvailable']}" if "minAvailable" in spec else f"maxUnavailable {spec.get('maxUnavailable')}"
    return f"{name(pdb)} ({bound}, disruptionsAllowed {status.get('disruptionsAllowed')})"


def _keeps(pdb: Mapping[str, Any]) -> bool:
    """The PDB's status, as the disruption controller last computed it, allows no eviction."""
    status = pdb.get("status") or {}
    return status.get("observedGeneration") is not None and status.get("disruptionsAllowed") == 0


def _lets_go(pdb: Mapping[str, Any]) -> str:
    """Why a PDB does not keep its pods, naming no PDB (the job's example does)."""
    status = pdb.get("status") or {}
    if status.get("observedGeneration") is None:
        return "whose PDB's status the disruption controller has not computed yet"
    allowed = status.get("disruptionsAllowed")
    return f"whose PDB's status allows {allowed} disruption{'' if allowed == 1 else 's'}"


def pod_disruption_budgets(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """Every pod of a running training job is selected by a PDB whose status allows no disruption."""
    jobs = training_jobs(snapshot.pods)
    if not jobs:
        return skipped(POD_DISRUPTION_BUDGETS, NO_TRAINING_JOB)
    budgets = SelectorIndex(snapshot.pod_disruption_budgets)
    wrong, kept = [], []
    for job in jobs:
        selecting = {name(pod): budgets.selecting(job.namespace, labels(pod)) for pod in job.pods}
        unselected = [pod for pod, found in selecting.items() if not found]
        loose = [found for found in selecting.values() if found and not any(_keeps(b) for b in found)]
        if unselected:
            wrong.append((f"{job} ({len(unselected)} of {len(job.pods)} pods)" if len(unselected) < len(job.pods) else str(job), "with pods no PDB selects"))
        if loose:
            wrong.append((f"{job} with PDB {name(loose[0][0])}", f"with pods {_lets_go(loose[0][0])}"))
        summaries = sorted({_pdb_summary(b) for found in selecting.values() for b in found})
        kept.append(f"job {job}: {len(job.pods)} pods kept by {', '.join(summaries) or 'no PDB'}")
    if wrong:
        groups = group("training job", wrong, examples)
        return failed(
            POD_DISRUPTION_BUDGETS,
            f"{described(groups)}.",
            "run `pulumi up` to recreate the job's PDB (TrainingJob makes it; an app deployed elsewhere gets it from "
            "scheduling.trainingApps); its minAvailable must equal the job's pods, so that disruptionsAllowed is 0 while it runs.",
            groups,
        )
    return passed(POD_DISRUPTION_BUDGETS, f"{listing(kept, examples, separator='; ')}.")


def _tainted(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == GPU_TAINT_KEY and t.get("effect") in TAINT_EFFECTS_KEEPING_PODS_OFF for t in taints(node))


def gpu_taints(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """Every GPU node carries the GPU taint, and every unfinished pod on one either requests GPUs or
    belongs to a DaemonSet."""
    nodes = gpu_nodes(snapshot.nodes)
    if not nodes:
        return skipped(GPU_TAINTS, NO_GPU_NODE)
    untainted = group("GPU node", ((name(n), f"without the {GPU_TAINT_KEY} NoSchedule taint") for n in nodes if not _tainted(n)), examples)
    on_gpu_nodes = {name(n) for n in nodes}
    pods = [p for p in snapshot.pods if is_active(p) and node_name(p) in on_gpu_nodes]
    intruders = group(
        "pod",
        ((f"{qualified(p)} on {node_name(p)}", "without a GPU request on GPU nodes, not of a DaemonSet") for p in pods if not requests_gpus(p) and "DaemonSet" not in owner_kinds(p)),
        examples,
    )
    fixes = []
    if untainted:
        fixes.append(
            f"restore the taint (kubectl taint node <node> {GPU_TAINT_KEY}={GPU_TAINT_VALUE}:NoSchedule; a managed pool's "
            "nodes get it from their node group, a Karpenter pool's from its NodePool, both made by `pulumi up`)"
        )
    if intruders:
        fixes.append(
            f"find why each landed there (a toleration of {GPU_TAINT_KEY}, a nodeName, or the missing taint) and move it to a "
            "system node (delete the pod once its owner no longer tolerates the taint)"
        )
    if fixes:
        problems = (*untainted, *intruders)
        return failed(GPU_TAINTS, f"{described(problems)}.", "; ".join(fixes) + ".", problems)
    daemons = sum(1 for p in pods if "DaemonSet" in owner_kinds(p))
    return passed(
        GPU_TAINTS,
        f"{len(nodes)} GPU nodes carry the {GPU_TAINT_KEY} taint; of the {len(pods)} pods on them, "
        f"{len(pods) - daemons} request GPUs and {daemons} belong to DaemonSets.",
    )


def one_pod_per_node(snapshot: Snapshot, *, examples: int = EXAMPLES) -> Row:
    """No two Running pods of one multi-node training job share a node."""
    all_jobs = training_jobs(snapshot.pods)
    jobs = [j for j in all_jobs if j.multi_node]
    if not jobs:
        return skipped(ONE_POD_PER_NODE, "no multi-node training job runs" if all_jobs else NO_TRAINING_JOB)
    wrong, spread = [], []
    for job in jobs:
        running = job.running
        by_node: dict[str, list[str]] = {}
        for pod in running:
            by_node.setdefault(node_name(pod), []).append(name(pod))
        shared = sorted(node for node, pods in by_node.items() if len(pods) > 1)
        if shared:
            wrong.append((f"{job} on {shared[0]}" if len(shared) == 1 else f"{job} on {len(shared)} nodes", "with two or more running pods on one node"))
        spread.append(f"job {job}: {len(running)} running pods on {len(by_node)} nodes")
    if wrong:
        groups = group("training job", wrong, examples)
        return failed(
            ONE_POD_PER_NODE,
            f"{described(groups)}.",
            "the job's pods lack the required anti-affinity on kubernetes.io/hostname (or were bound with nodeName): "
            "delete the job and resubmit it from the library's training template, which places one pod per node.",
            groups,
        )
    return passed(ONE_POD_PER_NODE, f"{listing(spread, examples, separator='; ')}.")


def judge_seed(snapshot: Snapshot, args: Optional[GpuTrainingPlatformArgs] = None, *, examples: int = EXAMPLES) -> list[Row]:
    """The seed's eight rows, in the checklist's order; each group of failing objects names its
    first ``examples``."""
    return [
        gpu_device_plugin(snapshot, examples=examples),
        efa_device_plugin(snapshot, args, examples=examples),
        priority_classes(snapshot, args, examples=examples),
        pod_disruption_budgets(snapshot, examples=examples),
        gpu_taints(snapshot, examples=examples),
        one_pod_per_node(snapshot, examples=examples),
        topology_labels(snapshot, examples=examples),
        topology_aware_spread(snapshot, examples=examples),
    ]
