"""The stack-wide rules of ``scheduling`` and ``smokeTest``: those that involve other keys (the
fleet's pools, the namespaces' quotas, the priority classes), checked before anything is created.

A namespace's explicit GPU quota above the fleet's capacity (``fleet_capacity.py``), or below one
node's GPUs, is refused, naming the quota and the pool limits it disagrees with; so is an app that
names what does not exist, needs more nodes than its pools can have, or whose pods together exceed
its namespace's quota.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import (
    RESERVED_NAMESPACES,
    GpuTrainingPlatformArgs,
    KarpenterGpuNodePoolConfig,
    Problem,
    TrainingAppConfig,
    TrainingNamespaceConfig,
)
from ..facts.quantity import parse_quantity
from .fleet_capacity import ResolvedQuota, fleet_capacity
from .team_admission import admission_problems
from .teams import namespace_quota, team_fit_problems, validate_teams
from ..config.team_settings import team_id_problems
from .scheduling_policies import app_pool, duplicate_indices, smoke_test_pools, training_job_spec, validate_priority_classes
from .training_spec import TrainingJobSpec, validate_training_job

EFA_ON_KARPENTER_REFUSED = (
    "EFA training pods request hugepages-2Mi, and Karpenter launches nodes only for resources it knows an "
    "instance type has, which hugepages are not (aws/karpenter-provider-aws#3315): the pods would stay "
    "Pending; run EFA apps on a managed node group, or set efa to false"
)
"""Why an EFA training app may not rely on Karpenter nodes."""


@dataclass(frozen=True)
class _Namespace:
    """A configured namespace as the app rules see it."""

    path: str
    config: TrainingNamespaceConfig
    quota: ResolvedQuota


NO_NAMESPACE = (
    "has nowhere to run: scheduling.namespaces is empty, and pods run in the first of them by default; "
    "add a namespace there (e.g. {name: training}) or name one here"
)


def validate_scheduling(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Rules of ``scheduling`` and ``smokeTest`` that involve other keys."""
    scheduling = args.scheduling
    problems = validate_priority_classes(scheduling.priority_classes, "scheduling.priorityClasses")
    problems += _validate_namespaces(args)
    team_problems = validate_teams(args) + team_id_problems(scheduling.teams)
    problems += team_problems
    if team_problems:
        # A namespace's quota comes from its team: without valid teams there is none to judge apps by.
        return problems
    # What the team namespaces admit: the teams' classes, the apps' classes, the checks' Jobs.
    problems += admission_problems(args)
    namespaces: dict[str, _Namespace] = {}
    for i, namespace in enumerate(scheduling.namespaces):
        namespaces.setdefault(namespace.name, _Namespace(f"scheduling.namespaces[{i}]", namespace, namespace_quota(namespace, args)))
    app_names = [a.name for a in scheduling.training_apps]
    for i, first in duplicate_indices(app_names).items():
        problems.append(Problem(f"scheduling.trainingApps[{i}].name", f"'{app_names[i]}' is used by scheduling.trainingApps[{first}] too"))
    for i, app in enumerate(scheduling.training_apps):
        problems += _validate_app(app, f"scheduling.trainingApps[{i}]", args, namespaces)
    problems += _validate_smoke_test(args, namespaces)
    return problems


def _validate_namespaces(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Unique, not Kubernetes' own, and an explicit GPU quota between one node and the whole fleet."""
    problems = []
    fleet = fleet_capacity(args)
    capacity = sum(c.gpus for c in fleet)
    smallest_node = min((c.smallest_node_gpus for c in fleet), default=0)
    names = [ns.name for ns in args.scheduling.namespaces]
    for i, namespace in enumerate(args.scheduling.namespaces):
        path = f"scheduling.namespaces[{i}]"
        if i in duplicate_indices(names):
            problems.append(Problem(f"{path}.name", f"'{namespace.name}' is listed twice"))
        if namespace.name in RESERVED_NAMESPACES:
            problems.append(Problem(f"{path}.name", f"'{namespace.name}' belongs to Kubernetes; choose another namespace"))
        gpus = namespace.quota.gpus
        if gpus is not None and gpus > capacity:
            bounds = "; ".join(map(str, fleet)) or "no GPU pool"
            problems.append(
                Problem(f"{path}.quota.gpus", f"{gpus} exceeds the {capacity} GPUs the fleet can provide ({bounds}); raise the pool limits or lower the quota")
            )
        elif gpus is not None and gpus < smallest_node:
            problems.append(
                Problem(f"{path}.quota.gpus", f"{gpus} is below one node's GPUs ({smallest_node}): no whole-node training pod could ever be admitted")
            )
    return problems


def _validate_app(app: TrainingAppConfig, path: str, args: GpuTrainingPlatformArgs, namespaces: dict[str, _Namespace]) -> list[Problem]:  # noqa: C901 - one independent check per rule, each a row of the Refused-by table under this name
    """The app's references (namespace, pool, priority class) and what they allow; then the job's own
    rules and whether the namespace's quota can hold all of its pods at once."""
    problems = []
    namespace_name = app.namespace if app.namespace is not None else next(iter(namespaces), None)
    namespace = namespaces.get(namespace_name) if namespace_name is not None else None
    if namespace_name is None:
        problems.append(Problem(f"{path}.namespace", NO_NAMESPACE))
    elif namespace is None:
        problems.append(Problem(f"{path}.namespace", f"'{namespace_name}' is not in scheduling.namespaces; allowed: {', '.join(namespaces) or 'none'}"))
    elif app.host_network and namespace.config.pod_security != "privileged":
        problems.append(
            Problem(
                f"{path}.hostNetwork",
                f"needs {namespace.path}.podSecurity 'privileged' (it is '{namespace.config.pod_security}', which refuses host networking)",
            )
        )

    if app.job is not None and app.kind == "Job" and "max_restarts" in app.job.model_fields_set:
        problems.append(Problem(f"{path}.job.maxRestarts", "restarts the whole group of a JobSet or TrainJob; a Job "
                                "retries single pods (job.backoffLimit): set kind: JobSet or TrainJob, or remove it"))
    if app.kind != "Job" and app.job is None:
        problems.append(Problem(f"{path}.kind", f"'{app.kind}' says what runs the app's job, and the app has none: add job, or remove kind"))
    for key, config, wanted in (("jobSet", args.job_set, ("JobSet", "TrainJob")), ("trainer", args.trainer, ("TrainJob",))):
        if app.kind in wanted and config.enabled is False:
            problems.append(Problem(f"{path}.kind", f"'{app.kind}' needs the {key} controller, which {key}.enabled: false leaves out"))

    fleet = fleet_capacity(args)
    pools = [c.pool.name for c in fleet]
    capacity = app_pool(app, args)
    if capacity is None and app.pool is None:
        problems.append(Problem(f"{path}.pool", f"is required: the stack has {len(pools)} GPU pools ({', '.join(pools) or 'none'})"))
    elif capacity is None and app.pool is not None and pools.count(app.pool) > 1:
        paths = " and ".join(c.path for c in fleet if c.pool.name == app.pool)
        problems.append(Problem(f"{path}.pool", f"'{app.pool}' names {paths}; rename one of them"))
    elif capacity is None:
        problems.append(Problem(f"{path}.pool", f"'{app.pool}' is not the name of a GPU pool; allowed: {', '.join(pools) or 'none'}"))
    else:
        pool = capacity.pool
        for j, instance_type in enumerate(app.instance_types or []):
            if instance_type not in pool.instance_types:
                problems.append(
                    Problem(f"{path}.instanceTypes[{j}]", f"'{instance_type}' is not among {capacity.path}.instanceTypes ({', '.join(pool.instance_types)})")
                )
        if app.efa and not pool.efa_enabled:
            problems.append(Problem(f"{path}.efa", f"is true but {capacity.path}.efa leaves the pool's nodes without EFA interfaces"))
        efa = app.efa if app.efa is not None else pool.efa_enabled
        if efa and isinstance(pool, KarpenterGpuNodePoolConfig):
            problems.append(Problem(f"{path}.pool", f"'{pool.name}' is a Karpenter pool; {EFA_ON_KARPENTER_REFUSED}"))
        # One pod per node on any GPU node of the app's types: the pools that have those types together
        # (for EFA pods, the managed ones only).
        types = set(app.instance_types or pool.instance_types) & set(pool.instance_types)
        hosts = [
            c
            for c in fleet
            if types & set(c.pool.instance_types) and not (efa and isinstance(c.pool, KarpenterGpuNodePoolConfig))
        ]
        if args.kueue.enabled:
            # Pinned to its own pool, so that Kueue gives the job that pool's flavor.
            hosts = [capacity]
        if types and app.nodes > sum(c.nodes for c in hosts):
            bounds = "; ".join(f"{c.bound}: {c.nodes} nodes" for c in hosts)
            problems.append(Problem(f"{path}.nodes", f"{app.nodes} pods, one per node, need more nodes of {', '.join(sorted(types))} than the fleet can have ({bounds})"))

    classes = [c.name for c in args.scheduling.priority_classes]
    if app.priority_class is not None and app.priority_class not in classes:
        problems.append(Problem(f"{path}.priorityClass", f"'{app.priority_class}' is not in scheduling.priorityClasses; allowed: {', '.join(classes)}"))
    elif not classes:
        problems.append(Problem(f"{path}.priorityClass", "has no default: scheduling.priorityClasses is empty"))

    if problems or namespace is None:
        return problems
    spec = training_job_spec(app, args)
    return (validate_training_job(spec, path) or _quota_fits(spec, path, namespace)
            or team_fit_problems(args, namespace.config.name, _pool_name(app, args), spec.nodes * spec.node_gpus,
                                 f"{path}.nodes", f"the app's {spec.nodes} × {spec.node_gpus} GPUs"))


def _pool_name(app: TrainingAppConfig, args: GpuTrainingPlatformArgs) -> str:
    capacity = app_pool(app, args)
    assert capacity is not None, "the app's pool was checked before its job"  # noqa: S101 - checked above in _validate_app
    return capacity.pool.name


def _quota_fits(spec: TrainingJobSpec, path: str, namespace: _Namespace) -> list[Problem]:
    """An app whose pods together exceed the quota could never run all its ranks at once."""
    quota = namespace.quota
    demands = (
        ("gpus", spec.nodes * spec.node_gpus, quota.gpus, str(quota.gpus), f"{spec.nodes} × {spec.node_gpus} GPUs"),
        ("cpu", spec.nodes * parse_quantity(spec.pod_cpu), parse_quantity(quota.cpu), quota.cpu, f"{spec.nodes} × {spec.pod_cpu} CPU"),
        ("memory", spec.nodes * parse_quantity(spec.pod_memory), parse_quantity(quota.memory), quota.memory, f"{spec.nodes} × {spec.pod_memory} memory"),
    )
    return [
        Problem(f"{path}.nodes", f"the app needs {what} but {namespace.path}.quota.{key} is {shown}: its pods could never all be admitted")
        for key, needed, allowed, shown, what in demands
        if needed > allowed
    ]


def _validate_smoke_test(args: GpuTrainingPlatformArgs, namespaces: dict[str, _Namespace]) -> list[Problem]:
    smoke = args.smoke_test
    if not smoke.enabled:
        return []
    namespace_name = smoke.namespace if smoke.namespace is not None else next(iter(namespaces), None)
    namespace = namespaces.get(namespace_name) if namespace_name is not None else None
    if namespace_name is None:
        return [Problem("smokeTest.namespace", NO_NAMESPACE)]
    if namespace is None:
        return [Problem("smokeTest.namespace", f"'{namespace_name}' is not in scheduling.namespaces; allowed: {', '.join(namespaces) or 'none'}")]
    pools = smoke_test_pools(args)
    if not pools:
        return [Problem("smokeTest.enabled", "no GPU pool starts with nodes (every initial size is 0), so there is nothing to check")]
    needed = sum(pool.nodes * pool.gpus for pool in pools)
    if needed > namespace.quota.gpus:
        return [Problem("smokeTest.namespace", f"the smoke test needs {needed} GPUs at once but {namespace.path}.quota.gpus is {namespace.quota.gpus}")]
    return []
