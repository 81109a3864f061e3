"""The rules of a whole stack: the configuration's own cross-key rules plus the scheduling rules,
which build on the workload templates (quota arithmetic, the training Job each app becomes)."""

from __future__ import annotations

from ..addons import gpu_operator, kueue, topology_labeler
from ..addons.chart_source import chart_problems
from ..config import GpuTrainingPlatformArgs, Problem, validate_platform
from ..config.chart_settings import chart_mirror_problems
from ..config.inputs import is_unknown
from ..workloads import health_gate
from ..workloads.preflight_checks import validate_preflight
from ..workloads.kueue_flavors import validate_kueue
from ..workloads.scheduling_validation import validate_scheduling
from .image_sources import validate_image_digests, validate_image_mirrors
from .names import PLATFORM_NAME, validate_names
from .releases import stack_charts
from .system_capacity import validate_system_capacity


def validate_stack(args: GpuTrainingPlatformArgs, name: str = PLATFORM_NAME) -> list[Problem]:
    """Every rule of the stack that involves more than one key, each problem with its key path, and
    the AWS names ``GpuTrainingPlatform(name, args)`` would generate."""
    computed = [
        Problem(
            f"gpuNodeGroups[{i}].{key}",
            "is an Output: GpuNodeGroup takes one, but the platform derives the fleet's capacity, the namespace "
            "quotas and Kueue's flavors from the pools' sizes before anything is created; give a number",
        )
        for i, pool in enumerate(args.gpu_node_groups)
        for key in pool.computed_sizes
    ] + [
        Problem(
            f"gpuNodeGroups[{i}].labels",
            "is an Output: GpuNodeGroup takes one, but the platform checks the pools' labels and places Kueue's "
            "flavors, the training pods and the GPU daemons by them before anything is created; give a map",
        )
        for i, pool in enumerate(args.gpu_node_groups)
        if is_unknown(pool.labels)
    ]
    if computed:
        return computed  # the rules below compute with the sizes
    return [
        *validate_platform(args),
        *validate_scheduling(args),
        *validate_preflight(args),
        *validate_kueue(args),
        *validate_addon_namespaces(args),
        *validate_addon_priority_classes(args),
        *validate_system_capacity(args),
        *validate_names(args, name),
        *chart_problems(args.charts.directory, stack_charts(args), "charts.directory"),
        *chart_mirror_problems(args.charts),
        *validate_in_cluster_settings(args),
        *validate_image_mirrors(args),
        *validate_image_digests(args),
    ]


def validate_in_cluster_settings(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """With ``inCluster.enabled``: a kubeconfig to reach the cluster with, and none of the settings
    whose objects need an AWS resource the in-cluster half does not create."""
    if not args.in_cluster.enabled:
        return []
    problems = []
    if args.in_cluster.kubeconfig is None or args.in_cluster.kubeconfig == "":
        problems.append(Problem("inCluster.kubeconfig", "is required when inCluster.enabled: a kubeconfig file's path or its content"))
    if args.karpenter.enabled:
        problems.append(Problem("karpenter.enabled", "Karpenter needs its controller's IAM role, an SQS interruption queue "
                                "and EC2NodeClasses naming the cluster's node role, subnets and security groups, which "
                                "inCluster does not create; turn it off, or deploy the whole stack"))
    if args.storage.fsx.enabled:
        problems.append(Problem("storage.fsx.enabled", "the training volumes need the FSx for Lustre file system, "
                                "which inCluster does not create; turn it off, or deploy the whole stack"))
    if args.health_gate.enabled:
        problems.append(Problem("healthGate.enabled", "the gate lifts a startup taint that the GPU node groups carry, and "
                                "inCluster makes no node group (nor the gate's image); turn it off, or deploy the whole stack"))
    if args.s3_buckets:
        problems.append(Problem("s3Buckets", "training pods reach the buckets through a Pod Identity role, which "
                                "inCluster does not create; leave it empty, or deploy the whole stack"))
    if args.scheduling.service_account.policy_arns:
        problems.append(Problem("scheduling.serviceAccount.policyArns", "need the training pods' Pod Identity role, "
                                "which inCluster does not create; leave it empty, or deploy the whole stack"))
    return problems


def addon_namespaces(args: GpuTrainingPlatformArgs) -> dict[str, str]:
    """Namespaces the stack's add-ons create, with the add-on that creates each."""
    namespaces = {gpu_operator.NAMESPACE: "the GPU Operator"}
    if args.topology_labeler.enabled:
        namespaces[topology_labeler.NAMESPACE] = "the topology labeler"
    if args.health_gate.enabled:
        namespaces[health_gate.NAMESPACE] = "the health gate"
    if args.kueue.enabled:
        namespaces[kueue.KUEUE_NAMESPACE] = "Kueue"
    return namespaces


def validate_addon_namespaces(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """A training namespace may not be one an add-on creates: the second create of a Namespace
    fails with AlreadyExists, halfway through `pulumi up`."""
    taken = addon_namespaces(args)
    return [
        Problem(
            f"scheduling.namespaces[{i}].name",
            f"'{namespace.name}' is the namespace {taken[namespace.name]} creates; choose another name",
        )
        for i, namespace in enumerate(args.scheduling.namespaces)
        if namespace.name in taken
    ]


def validate_addon_priority_classes(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """A stack priority class may not be one an add-on creates (the health gate's check class): the
    second create of a PriorityClass fails with AlreadyExists, halfway through `pulumi up`."""
    if not args.health_gate.enabled:
        return []
    return [
        Problem(f"scheduling.priorityClasses[{i}].name",
                f"'{pc.name}' is the PriorityClass the health gate creates for its checks; choose another name")
        for i, pc in enumerate(args.scheduling.priority_classes)
        if pc.name == health_gate.CHECK_PRIORITY_CLASS
    ]
