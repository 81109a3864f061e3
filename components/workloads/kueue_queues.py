"""Kueue's queues for the GPU fleet: one ClusterQueue per training namespace (or per team, in one
cohort) with its LocalQueues, and ``KueueQueues``, which creates them with the Topology and
ResourceFlavors of ``kueue_flavors.py``.

- **quota**: a ClusterQueue splits its namespace's ResourceQuota (``scheduling_policies.py``)
  between the flavors (``flavor_quotas``) and borrows nothing, so Kueue never admits a pod the
  ResourceQuota would refuse (kubernetes-sigs/kueue#1403): a job beyond the cap waits in Kueue;
- **admission**: Kueue admits a job whole or not at all (quota for every pod, and with a topology
  request Ready nodes for every pod in one network block), then resumes it;
- **placement**: on a topology flavor Kueue picks each pod's node; on a quota-only flavor the
  kube-scheduler places the pods and Karpenter launches the nodes;
- **priority**: the pods' PriorityClass, which Kueue reads as the workload's priority; within a
  ClusterQueue a higher priority preempts a lower one;
- **teams** (``scheduling.teams``): one ClusterQueue per team in a single cohort, with the team's
  quotas and borrowing and lending limits per flavor (``team_queues``; the arithmetic is in
  ``teams.py``): a team borrows what the others leave idle, and gets its own back by preemption.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..config import TEAM_COHORT, ConfigError, GpuNodeGroupConfig, GpuTrainingPlatformArgs, Problem
from ..facts.gpu_nodes import GPU_RESOURCE
from ..facts.quantity import cpu_quantity, memory_quantity, parse_quantity
from .fleet_capacity import PoolCapacity, ResolvedQuota, resolve_quota
from .multikueue_manager import admission_checks_strategy
from .kueue_flavors import KUEUE_API_VERSION, PoolFlavor, kueue_metadata, pool_flavors, resource_flavor, topology
# Names that lived here before the flavors had their own module, still importable from it.
from .kueue_flavors import TOPOLOGY_LEVELS as TOPOLOGY_LEVELS, app_topology as app_topology, pool_flavor as pool_flavor
from .kueue_flavors import topology_layer_of as topology_layer_of, validate_kueue as validate_kueue
from .teams import gpu_share, team_pools
from .training_job import _dependencies
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider

LOCAL_QUEUE = "gpu-queue"
"""The LocalQueue of each training namespace that jobs are submitted to."""

HELD_LOCAL_QUEUE = "gpu-queue-held"
"""A LocalQueue of each training namespace with ``stopPolicy: Hold``: jobs the stack creates with
``job.suspend`` wait here, queued but never admitted, until relabelled to ``gpu-queue``."""

QUOTA_RESOURCES = ("cpu", "memory", GPU_RESOURCE)
"""What a ClusterQueue counts: the resources the namespace ResourceQuota limits (``requests.*``)."""


def _capacity_quota(capacity: PoolCapacity) -> dict[str, str]:
    return {
        "cpu": cpu_quantity(1000 * capacity.nodes * capacity.vcpus_per_node),
        "memory": memory_quantity(capacity.nodes * capacity.memory_mib_per_node),
        GPU_RESOURCE: str(capacity.gpus),
    }


def _namespace_limits(quota: ResolvedQuota) -> dict[str, str]:
    return {"cpu": quota.cpu, "memory": quota.memory, GPU_RESOURCE: str(quota.gpus)}


def flavor_quotas(flavors: Sequence[PoolFlavor], quota: ResolvedQuota) -> dict[str, dict[str, str]]:
    """Nominal quota per flavor and resource, splitting the namespace's quota between the flavors in
    order: each gets its pool's capacity or what the flavors before it left, whichever is less. The
    first pools keep whole-pool quotas, so the largest job a pool can run stays admissible on it
    (an even split could leave no flavor with room for it), and the quotas together never exceed
    the namespace's. A flavor left with nothing gets 0, and Kueue admits nothing onto it."""
    remaining = {r: parse_quantity(v) for r, v in _namespace_limits(quota).items()}
    result = {}
    for flavor in flavors:
        own = _capacity_quota(flavor.capacity)
        nominal: dict[str, str] = {}
        for r in QUOTA_RESOURCES:
            if parse_quantity(own[r]) <= remaining[r]:
                nominal[r] = own[r]
            else:
                nominal[r] = _quantity_text(r, remaining[r])
            remaining[r] -= parse_quantity(nominal[r])
        result[flavor.name] = nominal
    return result


def _quantity_text(resource: str, amount: Fraction) -> str:
    """``amount`` of ``resource`` as a quantity, rounded down so it never exceeds what it stands for."""
    if resource == "cpu":
        return cpu_quantity(int(amount * 1000))
    if resource == "memory":
        return memory_quantity(int(amount / (1024 * 1024)))
    return str(int(amount))


def _resource_groups(flavors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Without a GPU pool there is no flavor, and the queue admits nothing until one is added.
    return [{"coveredResources": list(QUOTA_RESOURCES), "flavors": flavors}] if flavors else []


def cluster_queue(namespace: str, quotas: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The namespace's ClusterQueue: only its own namespace's LocalQueues, every pool's flavor, and
    preemption of lower-priority workloads (the seed's classes: training-critical over
    evaluation-normal over data-prep-low)."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": kueue_metadata(namespace),
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"},
            "resourceGroups": _resource_groups([
                {"name": name, "resources": [{"name": r, "nominalQuota": q[r]} for r in QUOTA_RESOURCES]}
                for name, q in quotas.items()
            ]),
        },
    }


def team_cluster_queue(team: "TeamQueues") -> dict[str, Any]:
    """A team's ClusterQueue: its namespaces' LocalQueues, its quota and limits per pool's flavor, in
    the teams' cohort. A pending job of the team reclaims the team's own quota from workloads of
    other teams borrowing it (``reclaimWithinCohort: Any``; with fair sharing on, only from teams
    above their fair share), and within the team preempts lower priorities."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": kueue_metadata(team.name),
        "spec": {
            "cohortName": TEAM_COHORT,
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(team.namespaces)}]},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "fairSharing": {"weight": team.weight},
            "resourceGroups": _resource_groups([
                {"name": name, "resources": [{"name": r, **limits[r]} for r in QUOTA_RESOURCES]}
                for name, limits in team.quotas.items()
            ]),
        },
    }


def with_admission_checks(queue: dict[str, Any], checks: Sequence[str]) -> dict[str, Any]:
    """The ClusterQueue ``queue`` running ``checks`` on every flavor (none: as it is)."""
    if checks:
        queue["spec"]["admissionChecksStrategy"] = admission_checks_strategy(checks)
    return queue


def local_queue(namespace: str, name: str, held: bool = False, cluster_queue: Optional[str] = None) -> dict[str, Any]:
    """A LocalQueue of ``namespace`` onto ``cluster_queue`` (default: the namespace's own)."""
    spec: dict[str, Any] = {"clusterQueue": cluster_queue or namespace}
    if held:
        spec["stopPolicy"] = "Hold"
    return {"apiVersion": KUEUE_API_VERSION, "kind": "LocalQueue", "metadata": kueue_metadata(name, namespace), "spec": spec}


@dataclass(frozen=True)
class TeamQueues:
    """A team's ClusterQueue (``team_queues``)."""

    name: str
    """The team (also the ClusterQueue's name)."""
    namespaces: tuple[str, ...]
    """Its namespaces, each with the team's LocalQueues."""
    quotas: dict[str, dict[str, dict[str, str]]]
    """Per flavor name and resource: ``nominalQuota`` and, where set, ``borrowingLimit`` and ``lendingLimit``."""
    weight: str = "1"
    """Fair-sharing weight, a quantity."""


def _weight(weight: float) -> str:
    return format(Decimal(repr(weight)).normalize(), "f")


def team_queues(args: GpuTrainingPlatformArgs, flavors: Sequence[PoolFlavor]) -> list[TeamQueues]:
    """Each team's quotas on every pool's flavor, with the CPU and memory of its GPUs (``teams.py``)."""
    by_pool = {f.capacity.pool.name: f for f in flavors}
    result = []
    for team in args.scheduling.teams:
        quotas: dict[str, dict[str, dict[str, str]]] = {}
        for pool in team_pools(args, team):
            limits: dict[str, dict[str, str]] = {r: {"nominalQuota": q} for r, q in gpu_share(pool.capacity, pool.gpus).items()}
            for key, gpus in (("borrowingLimit", pool.borrowing_limit), ("lendingLimit", pool.lending_limit)):
                if gpus is not None:
                    for r, q in gpu_share(pool.capacity, gpus).items():
                        limits[r][key] = q
            quotas[by_pool[pool.capacity.pool.name].name] = limits
        result.append(TeamQueues(team.name, tuple(team.namespaces), quotas, _weight(team.weight)))
    return result


@dataclass(frozen=True)
class NamespaceQueues:
    """A training namespace's ClusterQueue quotas (``flavor_quotas``)."""

    namespace: str
    """The namespace (also the ClusterQueue's name)."""
    quotas: dict[str, dict[str, str]]
    """Nominal quota per flavor name and resource."""


@documented_args
@dataclass
class KueueQueuesArgs:
    """Arguments of ``KueueQueues``."""

    flavors: Sequence[PoolFlavor]
    """One flavor per GPU pool (``pool_flavors``)."""
    namespaces: Sequence[NamespaceQueues]
    """The training namespaces with their own ClusterQueues and quotas (none when teams share the fleet)."""
    teams: Sequence[TeamQueues] = ()
    """Teams sharing the fleet in one cohort, each a ClusterQueue for its namespaces. Default: none."""
    namespace_resources: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    """The Namespace resources by name, which the LocalQueues in them wait for. Default: none (the namespaces exist)."""
    admission_checks: Sequence[str] = ()
    """AdmissionChecks every ClusterQueue runs on every flavor: a MultiKueue manager's (``multikueue_manager``), whose jobs then run on its workers. Default: none."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


def kueue_queues_args(args: GpuTrainingPlatformArgs, namespace_resources: Optional[Mapping[str, pulumi.Resource]] = None) -> KueueQueuesArgs:
    """The stack's flavors and queues; call it on arguments that passed ``validate_kueue``."""
    flavors = pool_flavors(args)
    teams = team_queues(args, flavors)
    return KueueQueuesArgs(
        flavors=flavors,
        namespaces=[] if teams else [NamespaceQueues(ns.name, flavor_quotas(flavors, resolve_quota(ns.quota, args)))
                                     for ns in args.scheduling.namespaces],
        teams=teams,
        namespace_resources=dict(namespace_resources or {}),
    )


@documented_component(KueueQueuesArgs)
class KueueQueues(pulumi.ComponentResource):
    """Kueue's Topology, a ResourceFlavor per GPU pool, and per training namespace a ClusterQueue with
    its LocalQueues. Give it the ``cluster`` (or its Kubernetes provider in ``opts``) and make it depend on the
    Kueue release (its CRDs and webhooks); the LocalQueues also wait for ``namespace_resources``."""

    cluster_queue_names: pulumi.Output[list[str]]
    """The ClusterQueues: one per namespace of its own, one per team."""

    def __init__(self, name: str, args: Optional[KueueQueuesArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(KueueQueuesArgs, "KueueQueues", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"KueueQueues({name})")
        known = {f.name for f in args.flavors}
        problems = [
            Problem(f"KueueQueues({name}).{key}[{i}].quotas.{flavor}", "names no flavor of `flavors`")
            for key, queues in (("namespaces", args.namespaces), ("teams", args.teams))
            for i, queue in enumerate(queues)
            for flavor in queue.quotas
            if flavor not in known
        ]
        queue_names: dict[str, str] = {}
        namespace_owner: dict[str, str] = {}
        for key, queues in (("namespaces", args.namespaces), ("teams", args.teams)):
            for i, queue in enumerate(queues):
                path = f"KueueQueues({name}).{key}[{i}]"
                queue_name = queue.namespace if isinstance(queue, NamespaceQueues) else queue.name
                if queue_name in queue_names:
                    problems.append(Problem(path, f"makes the ClusterQueue '{queue_name}' that {queue_names[queue_name]} makes too"))
                queue_names.setdefault(queue_name, path)
                for namespace in (queue.namespace,) if isinstance(queue, NamespaceQueues) else queue.namespaces:
                    if namespace in namespace_owner:
                        problems.append(Problem(path, f"gives namespace '{namespace}' LocalQueues that {namespace_owner[namespace]} gives it too"))
                    namespace_owner.setdefault(namespace, path)
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:KueueQueues", name, None, opts)
        # Children do not inherit the component's dependencies: each waits for the Kueue release (its
        # CRDs and webhooks) and the namespaces itself.
        after = _dependencies(opts)

        def create(role: str, body: dict[str, Any], depends_on: Sequence[pulumi.Resource] = (),
                   options: Optional[dict[str, Any]] = None) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{role}",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*after, *depends_on], **(options or {})),
            )

        created = [create("topology", topology())]
        created += [create(f"flavor-{f.capacity.pool.name}-{'managed' if isinstance(f.capacity.pool, GpuNodeGroupConfig) else 'karpenter'}", resource_flavor(f), created[:1]) for f in args.flavors]
        # A LocalQueue's clusterQueue is immutable (a CEL rule of its CRD): a namespace that moves to
        # a team, or to another team, gets its LocalQueues replaced, deleted first since the new ones
        # have the same names. Admitted workloads keep running; pending ones wait for the new queue.
        requeued = {"replace_on_changes": ["spec.clusterQueue"], "delete_before_replace": True}

        def local_queues(namespace: str, cluster_queue_name: str, queue: pulumi.Resource) -> None:
            home = [queue, *([args.namespace_resources[namespace]] if namespace in args.namespace_resources else [])]
            create(f"{namespace}-local-queue", local_queue(namespace, LOCAL_QUEUE, cluster_queue=cluster_queue_name), home, requeued)
            create(f"{namespace}-held-local-queue", local_queue(namespace, HELD_LOCAL_QUEUE, held=True, cluster_queue=cluster_queue_name),
                   home, requeued)

        for ns in args.namespaces:
            local_queues(ns.namespace, ns.namespace, create(f"{ns.namespace}-cluster-queue",
                                                            with_admission_checks(cluster_queue(ns.namespace, ns.quotas), args.admission_checks), created))
        for team in args.teams:
            queue = create(f"team-{team.name}-cluster-queue", with_admission_checks(team_cluster_queue(team), args.admission_checks), created)
            for namespace in team.namespaces:
                local_queues(namespace, team.name, queue)

        self.cluster_queue_names = pulumi.Output.from_input([ns.namespace for ns in args.namespaces] + [t.name for t in args.teams])
        self.register_outputs({"clusterQueueNames": self.cluster_queue_names})
