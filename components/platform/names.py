"""The AWS names a ``GpuTrainingPlatform`` generates, checked against AWS's limits before anything
is registered.

Nothing here repeats a naming rule: the platform names its children with the functions below, and
each component lists its AWS names with the same functions it names its resources with
(``gpu_node_group_physical_names`` and its kin). ``tests/unit/platform/test_names.py`` compares the result with what
the program registers under the mock engine.
"""

from __future__ import annotations

from ..addons.gpu_node_pool import gpu_node_pool_physical_names
from ..addons.karpenter import karpenter_physical_names
from ..addons.topology_labeler import topology_labeler_physical_names
from ..aws.eks_cluster import eks_cluster_physical_names
from ..aws.gpu_node_group import gpu_node_group_physical_names
from ..aws.network import network_physical_names
from ..aws.lustre_storage import lustre_storage_physical_names
from ..aws.training_identity import training_identity_physical_names, training_role_needed
from ..workloads.health_gate import health_gate_physical_names
from ..config import GpuTrainingPlatformArgs, Problem
from ..config.inputs import is_unknown
from ..facts.aws_names import NAME_LIMITS, PhysicalName

PLATFORM_NAME = "gpu-training"
"""The name the stack program gives its ``GpuTrainingPlatform``; the prefix of every child's name."""


def cluster_child_name(name: str) -> str:
    """Name of the platform's ``EksCluster``."""
    return f"{name}-cluster"


def gpu_node_group_child_name(name: str, pool_name: str) -> str:
    """Name of the platform's ``GpuNodeGroup`` of a managed pool."""
    return f"{name}-{pool_name}"


def karpenter_child_name(name: str) -> str:
    """Name of the platform's ``Karpenter``."""
    return f"{name}-karpenter"


def gpu_node_pool_child_name(name: str, pool_name: str) -> str:
    """Name of the platform's ``GpuNodePool`` of a Karpenter pool."""
    return f"{name}-karpenter-{pool_name}"


def topology_labeler_child_name(name: str) -> str:
    """Name of the platform's ``TopologyLabeler``."""
    return f"{name}-topology-labeler"


def health_gate_child_name(name: str) -> str:
    """Name of the platform's ``HealthGate``."""
    return f"{name}-health-gate"


def training_identity_child_name(name: str) -> str:
    """Name of the platform's ``TrainingIdentity``."""
    return f"{name}-training-identity"


def network_child_name(name: str) -> str:
    """Name of the platform's ``Network`` (a created network only)."""
    return f"{name}-network"


def lustre_child_name(name: str) -> str:
    """Name of the platform's ``LustreStorage`` (with ``storage.fsx.enabled``)."""
    return f"{name}-lustre"


def generated_names(args: GpuTrainingPlatformArgs, name: str = PLATFORM_NAME) -> list[tuple[str, PhysicalName]]:
    """Every length-limited AWS name ``GpuTrainingPlatform(name, args)`` generates, with the key path
    of the setting that shapes it (the platform's own name where no setting does)."""
    own = f"GpuTrainingPlatform({name})"
    # A cluster name given as an Output is known only at deployment, and so are the names made from it.
    cluster_name = None if is_unknown(args.cluster.name) else args.cluster.name
    names = [(own, n) for n in eks_cluster_physical_names(cluster_child_name(name), args.system_node_group, args.cluster)]
    if args.network.create:
        names += [(own, n) for n in network_physical_names(network_child_name(name), args.network)]
    if args.storage.fsx.enabled:
        names += [(own, n) for n in lustre_storage_physical_names(lustre_child_name(name))]
    for i, pool in enumerate(args.gpu_node_groups):
        child = gpu_node_group_child_name(name, pool.name)
        names += [(f"gpuNodeGroups[{i}].name", n) for n in gpu_node_group_physical_names(child, pool, cluster_name)]
    if args.topology_labeler.enabled:
        child = topology_labeler_child_name(name)
        names += [
            ("cluster.name" if n.resource_type == "aws:ecr/repository:Repository" else own, n)
            for n in topology_labeler_physical_names(child, args.topology_labeler, cluster_name)
        ]
    if args.health_gate.enabled:
        names += [("cluster.name", n) for n in health_gate_physical_names(args.health_gate, cluster_name)]
    if training_role_needed(args.s3_buckets, args.scheduling.service_account.policy_arns):
        child = training_identity_child_name(name)
        teams = args.scheduling.teams
        teamed = {namespace for team in teams for namespace in team.namespaces}
        shared = not teams or any(ns.name not in teamed for ns in args.scheduling.namespaces)
        names += [(own, n) for n in training_identity_physical_names(child, args.s3_buckets, [t.name for t in teams], shared)]
    if args.karpenter.enabled:
        names += [(own, n) for n in karpenter_physical_names(karpenter_child_name(name))]
        for i, karpenter_pool in enumerate(args.karpenter.gpu_node_pools):
            child = gpu_node_pool_child_name(name, karpenter_pool.name)
            names += [(f"karpenter.gpuNodePools[{i}].name", n) for n in gpu_node_pool_physical_names(child, karpenter_pool, cluster_name)]
    return names


def validate_names(args: GpuTrainingPlatformArgs, name: str = PLATFORM_NAME) -> list[Problem]:
    """Every generated name over its AWS limit, under the key that shapes it, with how much to cut."""
    problems = []
    for path, physical in generated_names(args, name):
        reason = physical.problem()
        if reason is None:
            continue
        excess = physical.length - NAME_LIMITS[physical.resource_type][0]
        problems.append(Problem(path, f"{reason}; shorten it by {excess} characters"))
    # One key can make several names too long; report it once, with the longest.
    problems = list({p.path: p for p in sorted(problems, key=lambda p: len(p.message))}.values())
    return problems + _name_collisions(generated_names(args, name))


def _name_collisions(names: list[tuple[str, PhysicalName]]) -> list[Problem]:
    """Two resources of one kind with the same explicit name: AWS refuses to create the second
    (e.g. a managed pool ``karpenter-<x>`` whose placement group is Karpenter pool ``<x>``'s).
    Names made from a prefix get a unique suffix and never collide."""
    first: dict[tuple[str, str], str] = {}
    problems = []
    for path, physical in names:
        if physical.autonamed or physical.prefix:
            continue
        key = (NAME_LIMITS[physical.resource_type][1], physical.name)
        if key in first:
            what = key[0].split(" (")[0]
            problems.append(
                Problem(path, f"gives the {what} '{physical.name}' that {first[key]} gives too; AWS refuses to create the second; rename one")
            )
        else:
            first[key] = path
    return problems
