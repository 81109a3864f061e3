"""With ``--stack``: what the stack file declares, judged on the cluster.

Each managed pool's node count, the PriorityClasses' values, each training namespace's quota
against what the stack computes, Kueue's ClusterQueues (active, with the pools' flavors) and
LocalQueues, each team's quota and what it uses, borrows and lends, the topology labeler and the node monitoring agent running on every GPU node, and the
FSx claims Bound. A feature the stack leaves off gives one skip row that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Union

from ..addons import topology_labeler
from ..addons.kueue import KUEUE_NAMESPACE
from ..facts.node_monitoring import AGENT_DAEMONSETS, AGENT_NAMESPACE
from ..config import NODE_MONITORING_AGENT_ADDON, TEAM_COHORT, GpuTrainingPlatformArgs
from ..facts.gpu_nodes import GPU_POOL_KEY, GPU_RESOURCE
from ..facts.quantity import parse_quantity
from ..platform.stack_files import locate_stack
from ..workloads.teams import namespace_quota, team_of, team_pools
from ..workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE, pool_flavors
from ..workloads.scheduling_policies import QUOTA_NAME
from ..workloads.training_storage import claim_name
from .objects import condition, condition_true, gpu_nodes, labels, name, namespace, natural_key, node_name, owned_by
from .rows import EXAMPLES, Group, Row, described, failed, group, passed, skipped
from .snapshot import Snapshot
from .block_fit import kueue_blocks
from .team_isolation import team_admission
from .team_members import team_members
from .team_data import team_data

ACCELERATED_HARDWARE_READY = "AcceleratedHardwareReady"
"""The node condition the node monitoring agent sets on GPU nodes (docs.aws.amazon.com/eks/latest/userguide/node-health.html)."""

StackRef = Union[str, Path, GpuTrainingPlatformArgs]
"""A stack: its name (``stacks/Pulumi.<name>.yaml`` of the project), the path of a stack file, or
the checked arguments themselves."""


# --- reading the stack file ----------------------------------------------------------------------


def load_stack_args(stack: StackRef, project_dir: Optional[Path] = None) -> GpuTrainingPlatformArgs:
    """The checked arguments of a stack file, read from its configuration namespace
    (``StackFile.namespace``: a program named ``acme`` keeps them under ``acme:``) as
    ``load_stack_config`` reads a running stack's. Raises ``ConfigError``."""
    if isinstance(stack, GpuTrainingPlatformArgs):
        return stack
    return locate_stack(stack, project_dir).platform_args()


# --- the rows --------------------------------------------------------------------------------------


def _not_ready(node: Mapping[str, Any]) -> str:
    """Why a node is not Ready, naming no node: its Ready condition's reason."""
    ready = condition(node, "Ready")
    if ready is None:
        return "without a Ready condition"
    return f"with Ready {ready.get('status')}" + (f", reason {ready['reason']}" if ready.get("reason") else "")


def pool_nodes(snapshot: Snapshot, args: GpuTrainingPlatformArgs, *, examples: int = EXAMPLES) -> list[Row]:
    """Each managed pool has its declared nodes Ready (``desiredSize``, else ``minSize``), and no
    more than ``maxSize``. Karpenter pools declare no count."""
    by_pool: dict[str, list[Mapping[str, Any]]] = {}
    for node in sorted(snapshot.nodes, key=lambda n: natural_key(name(n))):
        if GPU_POOL_KEY in labels(node):
            by_pool.setdefault(labels(node)[GPU_POOL_KEY], []).append(node)
    rows = []
    for pool in args.gpu_node_groups:
        item = f"pool-nodes/{pool.name}"
        nodes = by_pool.get(pool.name, [])
        not_ready = group("node", ((name(n), _not_ready(n)) for n in nodes if not condition_true(n, "Ready")), examples)
        ready = len(nodes) - sum(g.count for g in not_ready)
        expected = pool.initial_size
        counts = f"{ready} Ready of {len(nodes)} nodes labelled {GPU_POOL_KEY}={pool.name}; the stack declares {expected} (minSize {pool.min_size}, maxSize {pool.max_size})"
        if ready < expected or len(nodes) > pool.max_size:
            rows.append(
                failed(
                    item,
                    counts + (f"; {described(not_ready)}" if not_ready else "") + ".",
                    "a node that is missing or not Ready is being replaced or failed to join: see the node group's health "
                    "in the EKS console (aws eks describe-nodegroup) and `kubectl describe node`; a job on this pool waits for it.",
                    not_ready,
                )
            )
        else:
            rows.append(passed(item, counts + "."))
    return rows


def priority_class_values(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> Row:
    """Each of the stack's PriorityClasses exists with its value, preemption policy and global default."""
    item = "priority-class-values"
    found = {name(c): c for c in snapshot.priority_classes}
    wrong = []
    for config in args.scheduling.priority_classes:
        actual = found.get(config.name)
        if actual is None:
            wrong.append(f"{config.name} is missing")
            continue
        declared = {"value": config.value, "preemptionPolicy": config.preemption_policy, "globalDefault": config.global_default}
        shown = {"value": actual.get("value"), "preemptionPolicy": actual.get("preemptionPolicy", "PreemptLowerPriority"), "globalDefault": bool(actual.get("globalDefault"))}
        wrong += [f"{config.name}: {key} {shown[key]}, the stack declares {declared[key]}" for key in declared if shown[key] != declared[key]]
    if wrong:
        return failed(item, "; ".join(wrong) + ".", "run `pulumi up`: it recreates a missing class and replaces one whose value differs (a class's value is immutable).")
    return passed(item, "; ".join(f"{c.name} {c.value}" for c in args.scheduling.priority_classes) + ", as the stack declares.")


def resource_quotas(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """Each training namespace's ResourceQuota ``gpu-quota`` holds what the stack computes."""
    rows = []
    for config in args.scheduling.namespaces:
        item = f"resource-quota/{config.name}"
        expected = namespace_quota(config, args).hard()
        quota = next((q for q in snapshot.resource_quotas if namespace(q) == config.name and name(q) == QUOTA_NAME), None)
        if quota is None:
            rows.append(failed(item, f"no ResourceQuota {QUOTA_NAME} in namespace {config.name}.", "run `pulumi up` to recreate it (SchedulingPolicies makes it)."))
            continue
        hard = quota.get("spec", {}).get("hard") or {}
        wrong = [
            f"{key} {hard.get(key, 'unset')}, the stack computes {value}"
            for key, value in expected.items()
            if key not in hard or parse_quantity(str(hard[key])) != parse_quantity(value)
        ]
        extra = sorted(set(hard) - set(expected))
        if extra:
            wrong.append(f"limits the stack does not set: {', '.join(extra)}")
        if wrong:
            rows.append(failed(item, f"{config.name}/{QUOTA_NAME}: " + "; ".join(wrong) + ".", "run `pulumi up` to restore the quota the stack computes from its pools (or change scheduling.namespaces[].quota, or the namespace's team's quotas)."))
        else:
            rows.append(passed(item, f"{config.name}/{QUOTA_NAME}: " + ", ".join(f"{k} {v}" for k, v in expected.items()) + ", as the stack computes."))
    return rows


def kueue_queues(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """Per training namespace: its ClusterQueue (its team's, or its own) Active with one flavor per
    pool, and its LocalQueues pointing at it."""
    if not args.kueue.enabled:
        return [skipped("kueue-queues", "kueue.enabled is false in the stack.")]
    if snapshot.cluster_queues is None or snapshot.local_queues is None:
        return [
            failed(
                "kueue-queues",
                "the cluster serves no kueue.x-k8s.io ClusterQueues or LocalQueues: Kueue's CRDs are not installed.",
                f"run `pulumi up` (it installs Kueue's chart and then the queues); check the release with helm -n {KUEUE_NAMESPACE} list.",
            )
        ]
    flavors = sorted(f.name for f in pool_flavors(args))
    rows = []
    for config in args.scheduling.namespaces:
        item = f"kueue-queues/{config.name}"
        team = team_of(args, config.name)
        expected = team.name if team is not None else config.name
        problems = []
        queue = next((q for q in snapshot.cluster_queues if name(q) == expected), None)
        if queue is None:
            problems.append(f"no ClusterQueue {expected}")
        else:
            active = condition(queue, "Active")
            if active is None or active.get("status") != "True":
                reason = f"{active.get('reason')}: {active.get('message')}" if active else "no Active condition yet"
                problems.append(f"ClusterQueue {expected} is not active ({reason})")
            listed = sorted(f.get("name") for g in queue.get("spec", {}).get("resourceGroups") or [] for f in g.get("flavors") or [])
            if listed != flavors:
                problems.append(f"ClusterQueue {expected} lists flavors {', '.join(listed) or 'none'}, the stack's pools make {', '.join(flavors) or 'none'}")
        for local in (LOCAL_QUEUE, HELD_LOCAL_QUEUE):
            found = next((q for q in snapshot.local_queues if namespace(q) == config.name and name(q) == local), None)
            if found is None:
                problems.append(f"no LocalQueue {config.name}/{local}")
            elif found.get("spec", {}).get("clusterQueue") != expected:
                problems.append(f"LocalQueue {config.name}/{local} points at ClusterQueue {found.get('spec', {}).get('clusterQueue')}, not {expected}")
        owner = f"team {team.name}'s ClusterQueue {expected}" if team is not None else f"ClusterQueue {expected}"
        if problems:
            rows.append(failed(item, "; ".join(problems) + ".", "run `pulumi up` to restore the queues; an inactive ClusterQueue names the cause in its Active condition (kubectl describe clusterqueue " + expected + ")."))
        else:
            rows.append(passed(item, f"{owner} active with flavors {', '.join(flavors)}; LocalQueues {LOCAL_QUEUE} and {HELD_LOCAL_QUEUE} point at it."))
    return rows


def _gpus(quantity: object) -> int:
    return int(parse_quantity(str(quantity or "0")))


def _flavor_gpus(queue: Mapping[str, Any], section: str, key: str) -> dict[str, int]:
    """GPUs per flavor of a ClusterQueue: ``spec`` quotas (``nominalQuota``) or ``status`` usage
    (``flavorsUsage``: ``total``, ``borrowed``)."""
    found: dict[str, int] = {}
    if section == "spec":
        flavors = [f for g in queue.get("spec", {}).get("resourceGroups") or [] for f in g.get("flavors") or []]
    else:
        flavors = (queue.get("status") or {}).get("flavorsUsage") or []
    for flavor in flavors:
        for resource in flavor.get("resources") or []:
            if resource.get("name") == GPU_RESOURCE:
                found[flavor["name"]] = _gpus(resource.get(key))
    return found


def teams(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """Per team: its ClusterQueue in the teams' cohort with the stack's quota on each pool, and
    what it uses, borrows and lends there now. Lent: what of its idle quota (up to its lending
    limit) the other teams' borrowing takes; with more than two teams idle, Kueue does not say
    whose idle quota a borrower holds, so it is at most that."""
    if not args.scheduling.teams:
        return [skipped("teams", "scheduling.teams is empty in the stack: each namespace has a ClusterQueue of its own.")]
    if snapshot.cluster_queues is None:
        return []  # kueue_queues reports the missing API
    queues = {name(q): q for q in snapshot.cluster_queues}
    flavors = {f.capacity.pool.name: f.name for f in pool_flavors(args)}
    cohort = [q for q in snapshot.cluster_queues if q.get("spec", {}).get("cohortName") == TEAM_COHORT]
    borrowed_in_cohort: dict[str, int] = {}
    for queue in cohort:
        for flavor, gpus in _flavor_gpus(queue, "status", "borrowed").items():
            borrowed_in_cohort[flavor] = borrowed_in_cohort.get(flavor, 0) + gpus
    rows = []
    for team in args.scheduling.teams:
        item = f"team/{team.name}"
        found = queues.get(team.name)
        if found is None or found.get("spec", {}).get("cohortName") != TEAM_COHORT:
            where = "does not exist" if found is None else f"is in cohort {found.get('spec', {}).get('cohortName') or 'none'}"
            rows.append(failed(item, f"team {team.name}'s ClusterQueue {team.name} {where}, not in {TEAM_COHORT}.",
                               "run `pulumi up` to restore the team's ClusterQueue (KueueQueues makes it)."))
            continue
        nominal = _flavor_gpus(found, "spec", "nominalQuota")
        total = _flavor_gpus(found, "status", "total")
        borrowed = _flavor_gpus(found, "status", "borrowed")
        wrong, parts = [], []
        for pool in team_pools(args, team):
            flavor = flavors[pool.capacity.pool.name]
            if nominal.get(flavor) != pool.gpus:
                wrong.append(f"{pool.capacity.pool.name}: quota {nominal.get(flavor, 'none')}, the stack declares {pool.gpus}")
                continue
            used, own_borrowed = total.get(flavor, 0), borrowed.get(flavor, 0)
            idle = max(0, pool.gpus - (used - own_borrowed))
            lent = min(idle, pool.lendable, borrowed_in_cohort.get(flavor, 0) - own_borrowed)
            parts.append(f"{pool.capacity.pool.name}: quota {pool.gpus}, using {used} ({own_borrowed} borrowed), lending {max(0, lent)}")
        if wrong:
            rows.append(failed(item, "; ".join(wrong) + ".", "run `pulumi up` to restore the quotas the stack declares (scheduling.teams)."))
        else:
            rows.append(passed(item, f"team {team.name} (weight {team.weight:g}, namespaces {', '.join(team.namespaces)}): " + "; ".join(parts) + "."))
    return rows


def _daemon_on_gpu_nodes(
    snapshot: Snapshot, nodes: list[Mapping[str, Any]], item: str, daemon_namespace: str, daemon: str, fix: str, examples: int
) -> Optional[Row]:
    """A fail row when the DaemonSet is missing or lacks a Ready pod on one of the GPU ``nodes``, else None."""
    if not any(namespace(d) == daemon_namespace and name(d) == daemon for d in snapshot.daemon_sets):
        return failed(item, f"no DaemonSet {daemon_namespace}/{daemon}.", fix)
    ready_on: dict[str, bool] = {}
    for pod in snapshot.pods:
        if namespace(pod) == daemon_namespace and owned_by(pod, "DaemonSet", daemon):
            ready_on[node_name(pod)] = ready_on.get(node_name(pod), False) or condition_true(pod, "Ready")
    lacking = group(
        "GPU node",
        (
            (name(n), f"without a pod of DaemonSet {daemon_namespace}/{daemon}" if name(n) not in ready_on else f"whose pod of DaemonSet {daemon_namespace}/{daemon} is not Ready")
            for n in nodes
            if not ready_on.get(name(n))
        ),
        examples,
    )
    if lacking:
        return failed(item, f"{described(lacking)}.", fix, lacking)
    return None


def topology_labeler_running(snapshot: Snapshot, args: GpuTrainingPlatformArgs, *, examples: int = EXAMPLES) -> Row:
    """With ``topologyLabeler.enabled``, the labeler's DaemonSet has a Ready pod on every GPU node."""
    item = "topology-labeler"
    if not args.topology_labeler.enabled:
        return skipped(item, "topologyLabeler.enabled is false in the stack.")
    nodes = gpu_nodes(snapshot.nodes)
    problem = _daemon_on_gpu_nodes(
        snapshot, nodes, item, topology_labeler.NAMESPACE, topology_labeler.NAME,
        f"check the labeler's pods (kubectl -n {topology_labeler.NAMESPACE} get pods -o wide) and their events: an image it cannot pull, "
        "or a node it does not tolerate; `pulumi up` restores a deleted DaemonSet.",
        examples,
    )
    return problem or passed(item, f"DaemonSet {topology_labeler.NAMESPACE}/{topology_labeler.NAME} has a Ready pod on each of the {len(nodes)} GPU nodes.")


def _hardware_trouble(node: Mapping[str, Any]) -> Optional[str]:
    """What the node's AcceleratedHardwareReady condition says when it is not True, naming no node."""
    found = condition(node, ACCELERATED_HARDWARE_READY)
    if found is None:
        return f"without an {ACCELERATED_HARDWARE_READY} condition"
    if found.get("status") != "True":
        return f"with {ACCELERATED_HARDWARE_READY} {found.get('status')}, reason {found.get('reason')}"
    return None


def node_monitoring_agent(snapshot: Snapshot, args: GpuTrainingPlatformArgs, *, examples: int = EXAMPLES) -> Row:
    """With ``nodeMonitoring.enabled``, the agent and its DCGM host engine have a Ready pod on every
    GPU node, and every GPU node shows ``AcceleratedHardwareReady`` True."""
    item = "node-monitoring-agent"
    if not args.node_monitoring.enabled:
        return skipped(item, "nodeMonitoring.enabled is false in the stack.")
    fix = (
        f"check the add-on (aws eks describe-addon --cluster-name <cluster> --addon-name {NODE_MONITORING_AGENT_ADDON}) and its pods in {AGENT_NAMESPACE}; "
        "a dcgm-server pod missing from a GPU node means its toleration of the GPU taint is gone (`pulumi up` restores the configuration)."
    )
    nodes = gpu_nodes(snapshot.nodes)
    problems = [row for row in (_daemon_on_gpu_nodes(snapshot, nodes, item, AGENT_NAMESPACE, d, fix, examples) for d in AGENT_DAEMONSETS) if row is not None]
    unhealthy = group("GPU node", ((name(n), reason) for n in nodes if (reason := _hardware_trouble(n)) is not None), examples)
    if problems or unhealthy:
        evidence = " ".join([*(r.evidence for r in problems), *([f"{described(unhealthy)}."] if unhealthy else [])])
        fixes = fix + (
            f" A node whose {ACCELERATED_HARDWARE_READY} is False has a GPU fault: node repair replaces it after 10 minutes (docs/health.md)."
            if unhealthy else ""
        )
        groups: list[Group] = [g for r in problems for g in r.failures]
        return failed(item, evidence, fixes, [*groups, *unhealthy])
    return passed(item, f"{' and '.join(AGENT_DAEMONSETS)} have a Ready pod on each of the {len(nodes)} GPU nodes, all {ACCELERATED_HARDWARE_READY}.")


def fsx_claims(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """With ``storage.fsx.enabled``, each training namespace's claim is Bound: ``fsx-lustre``, or in
    a team's namespace ``fsx-lustre-<team>`` (``team_data`` judges what it reaches)."""
    if not args.storage.fsx.enabled:
        return [skipped("fsx-claim", "storage.fsx.enabled is false in the stack.")]
    rows = []
    teams = {ns: team.name for team in args.scheduling.teams for ns in team.namespaces}
    for config in args.scheduling.namespaces:
        item = f"fsx-claim/{config.name}"
        wanted = claim_name(teams.get(config.name))
        claim = next((c for c in snapshot.persistent_volume_claims if namespace(c) == config.name and name(c) == wanted), None)
        phase = claim.get("status", {}).get("phase") if claim is not None else None
        if claim is not None and phase == "Bound":
            rows.append(passed(item, f"{config.name}/{wanted} is Bound to {claim['spec'].get('volumeName')}."))
        else:
            rows.append(
                failed(
                    item,
                    f"{config.name}/{wanted} " + ("does not exist." if claim is None else f"is {phase or 'without a phase'}."),
                    "run `pulumi up` (TrainingStorage makes the claim and its PersistentVolume); a Pending claim names the cause in its events (kubectl describe pvc).",
                )
            )
    return rows


def judge_stack(snapshot: Snapshot, args: GpuTrainingPlatformArgs, *, examples: int = EXAMPLES) -> list[Row]:
    """The rows of what the stack declares; each group of failing nodes names its first ``examples``."""
    return [
        *pool_nodes(snapshot, args, examples=examples),
        priority_class_values(snapshot, args),
        *resource_quotas(snapshot, args),
        *kueue_queues(snapshot, args),
        *kueue_blocks(snapshot, args),
        *teams(snapshot, args),
        *team_members(snapshot, args),
        *team_admission(snapshot, args),
        topology_labeler_running(snapshot, args, examples=examples),
        node_monitoring_agent(snapshot, args, examples=examples),
        *fsx_claims(snapshot, args),
        *team_data(snapshot, args),
    ]
