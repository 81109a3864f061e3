"""The stack's in-cluster half as one composition, which both entry points build.

``compose_in_cluster`` makes the in-cluster children (GPU Operator, EFA device plugin, scheduling
policies, Kueue and its queues, JobSet and Trainer, training jobs, checks, team access) under the
same names, with the same inputs, waiting for the same things (``workload_waits``), whether
``GpuTrainingPlatform`` builds it after its AWS half or ``GpuTrainingInCluster`` alone through a
kubeconfig; so what runs in the cluster cannot drift between the two modes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Callable, Mapping, Optional, Sequence

import pulumi

from ..addons.controller_ingress import ControllerIngress
from ..addons.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_needed
from ..addons.gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os
from ..addons.job_apis import jobset_needed, trainer_needed
from ..addons.job_set_controller import JobSetController, JobSetControllerArgs
from ..addons.kueue import Kueue, KueueArgs, integrations
from ..addons.trainer_controller import TrainerController, TrainerControllerArgs
from ..addons.verifier_role import VerifierRole, VerifierRoleArgs
from ..aws.eks_cluster import ClusterRef
from ..aws.network import cluster_subnet_cidrs
from ..config import GpuTrainingPlatformArgs
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.kueue_queues import KueueQueues, kueue_queues_args
from ..workloads.multikueue_manager import ADMISSION_CHECK, MultiKueueManager
from ..workloads.multikueue_worker import MultiKueueWorker
from ..workloads.scheduling_policies import (
    SchedulingPolicies,
    scheduling_policies_args,
    training_job_spec,
)
from ..workloads.gpu_smoke_test import GpuSmokeTest
from ..workloads.team_access import TeamAccess, TeamAccessArgs
from ..workloads.team_admission import TeamAdmission, TeamAdmissionArgs, team_admission_namespaces
from ..workloads.training_job import TrainingJob, TrainingJobArgs
from ..workloads.training_spec import TrainingJobSpec
from . import multikueue_fleet
from .checks import preflight_checks_args, smoke_test_args


@dataclass(frozen=True)
class InClusterHalf:
    """The components ``compose_in_cluster`` made; both entry points expose them under these names."""

    gpu_operator: GpuOperator
    efa_device_plugin: Optional[EfaDevicePlugin]
    scheduling: SchedulingPolicies
    kueue: Optional[Kueue]
    kueue_queues: Optional[KueueQueues]
    job_set: Optional[JobSetController]
    trainer: Optional[TrainerController]
    training_jobs: dict[str, TrainingJob]
    smoke_test: Optional[GpuSmokeTest]
    preflight: Optional[PreflightChecks]
    verifier_role: Optional[VerifierRole]
    team_access: Optional[TeamAccess] = None
    team_admission: Optional[TeamAdmission] = None
    multikueue_manager: Optional[MultiKueueManager] = None
    multikueue_worker: Optional[MultiKueueWorker] = None

    def expose_on(self, component: pulumi.ComponentResource) -> None:
        """Each component of the half as ``component``'s attribute of the same name: the entry point
        that built it declares them (with their docstrings), this sets them."""
        for half_field in fields(self):
            setattr(component, half_field.name, getattr(self, half_field.name))


@dataclass(frozen=True)
class WorkloadWaits:
    """What the half's workloads wait for, besides what their inputs already order."""

    training_jobs: list[pulumi.Resource]
    smoke_test: list[pulumi.Resource]
    preflight: list[pulumi.Resource]


def workload_waits(
    *,
    scheduling: SchedulingPolicies,
    gpu_operator: GpuOperator,
    efa_device_plugin: Optional[EfaDevicePlugin],
    kueue: Optional[Kueue],
    kueue_queues: Optional[KueueQueues],
    gpu_nodes: Sequence[pulumi.Resource],
    job_prerequisites: Sequence[pulumi.Resource],
    job_controllers: Sequence[pulumi.Resource] = (),
) -> WorkloadWaits:
    """The one rule for what the training jobs and the checks of the GPU nodes wait for.

    Pods naming a PriorityClass, namespace or ServiceAccount that does not exist yet are refused, so
    every workload waits for the policy. Queued jobs wait for their queues, so that Kueue's webhook
    sees them created; ``job_prerequisites`` are what training pods need from the AWS half before
    they start (a Pod Identity association, a volume claim); ``job_controllers`` the JobSet and
    Trainer releases, whose CRDs and webhooks a JobSet or TrainJob needs. A check (smoke test, pre-flight) needs
    GPUs advertised, so it waits for the GPU nodes and the GPU Operator (the device plugin runs on
    them), and, with Kueue, for Kueue's release: its webhook watches Jobs in the training namespaces
    and must answer before a Job there can be created. The NCCL test also needs the EFA devices the
    EFA device plugin advertises."""
    kueue_webhook = [kueue.release] if kueue is not None else []
    queues = [kueue_queues] if kueue_queues is not None else []
    efa = [efa_device_plugin] if efa_device_plugin is not None else []
    gpu_checks = [scheduling, gpu_operator, *gpu_nodes, *kueue_webhook]
    return WorkloadWaits(
        training_jobs=[scheduling, *job_prerequisites, *queues, *job_controllers],
        smoke_test=gpu_checks,
        preflight=[*gpu_checks, *efa],
    )


def after_gpu_nodes(cluster: ClusterRef, gpu_nodes: Sequence[pulumi.Resource]) -> ClusterRef:
    """``cluster`` whose in-cluster objects also wait for ``gpu_nodes``: what the releases with
    DaemonSets on GPU nodes take, since Helm cannot see those ready while the nodes are still joining
    (a p5 takes minutes to boot) and two slow boots would outlast the release timeout and roll it
    back."""
    return replace(cluster, ready=(*cluster.ready, *gpu_nodes))


def controller_ingress(args: GpuTrainingPlatformArgs, cluster: ClusterRef) -> ControllerIngress:
    """Who may reach the controllers: the API server from the cluster's subnets, and the monitoring
    namespace. The in-cluster half alone reads nothing from AWS: there the subnets are
    ``inCluster.apiServerCidrs``, and without them the webhook ports are open to every source, with
    a warning."""
    cidrs: Optional[list[pulumi.Input[str]]]
    if not args.in_cluster.enabled:
        cidrs = cluster_subnet_cidrs(args.network, cluster.region)
    elif args.in_cluster.api_server_cidrs:
        cidrs = list(args.in_cluster.api_server_cidrs)
    else:
        pulumi.log.warn("inCluster.apiServerCidrs is empty: the Kueue, JobSet and Trainer webhooks admit every source "
                        "(the in-cluster half reads no subnet from AWS); give the cluster's subnets' CIDRs")
        cidrs = None
    return ControllerIngress(api_server_cidrs=cidrs, monitoring_namespace=args.monitoring.namespace)


def _training_job(name: str, spec: TrainingJobSpec, scheduling: SchedulingPolicies, trainer: Optional[TrainerController],
                  waits: WorkloadWaits, *, parent: pulumi.Resource, kubernetes: Mapping[str, pulumi.ProviderResource]) -> TrainingJob:
    """A training app's job, waiting for ``waits.training_jobs``; a TrainJob's runtime only for its
    namespace and Trainer (``TrainingJobArgs.job_after``)."""
    if spec.kind == "TrainJob" and trainer is not None:
        return TrainingJob(name, TrainingJobArgs(job=spec, job_after=waits.training_jobs),
                           opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes,
                                                       depends_on=[scheduling.namespaces[spec.namespace], trainer.release]))
    return TrainingJob(name, TrainingJobArgs(job=spec),
                       opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes, depends_on=waits.training_jobs))


def compose_in_cluster(
    parent: pulumi.Resource,
    name: str,
    args: GpuTrainingPlatformArgs,
    cluster: ClusterRef,
    *,
    gpu_nodes: Sequence[pulumi.Resource] = (),
    job_prerequisites: Callable[[SchedulingPolicies], Sequence[pulumi.Resource]] = lambda _scheduling: (),
) -> InClusterHalf:
    """The in-cluster half of the stack ``args`` describes, as children ``<name>-<role>`` of ``parent``,
    on ``cluster`` and its Kubernetes provider.

    ``gpu_nodes`` are the GPU node groups the GPU Operator, the EFA device plugin and the checks wait
    for: the platform's managed node groups, which EKS reports active once their nodes joined; none
    for a cluster made elsewhere, whose nodes are already there. Karpenter pools start empty, so
    nothing of theirs is waited for. ``job_prerequisites`` makes what the training jobs also wait
    for, once the policy (and so the training namespaces) exists; none by default."""
    gpu_cluster = after_gpu_nodes(cluster, gpu_nodes)
    kubernetes = {"kubernetes": cluster.provider}
    charts = args.charts.source()
    training_namespaces = [ns.name for ns in args.scheduling.namespaces]
    ingress = controller_ingress(args, cluster)

    gpu_operator = GpuOperator(
        f"{name}-gpu-operator",
        GpuOperatorArgs(cluster=gpu_cluster, config=args.gpu_operator, node_os=gpu_node_os(args), charts=charts),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    efa_device_plugin = (
        EfaDevicePlugin(
            f"{name}-efa-device-plugin",
            EfaDevicePluginArgs(cluster=gpu_cluster, charts=charts),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        if efa_needed(args)
        else None
    )
    scheduling = SchedulingPolicies(
        f"{name}-scheduling",
        scheduling_policies_args(args),
        opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes),
    )
    prerequisites = job_prerequisites(scheduling)
    job_set = (
        JobSetController(f"{name}-jobset", JobSetControllerArgs(cluster=cluster, config=args.job_set, charts=charts,
                                                                training_namespaces=training_namespaces, ingress=ingress),
                         opts=pulumi.ResourceOptions(parent=parent))
        if jobset_needed(args) or trainer_needed(args)
        else None
    )
    trainer = (
        TrainerController(f"{name}-trainer", TrainerControllerArgs(cluster=cluster, config=args.trainer, charts=charts,
                                                                   training_namespaces=training_namespaces, ingress=ingress),
                          # Trainer creates JobSets: JobSet's CRD and webhooks come first.
                          opts=pulumi.ResourceOptions(parent=parent, depends_on=[job_set.release] if job_set else []))
        if trainer_needed(args)
        else None
    )
    job_controllers = [c.release for c in (job_set, trainer) if c is not None]
    kueue = None
    kueue_queues = None
    multikueue_manager = multikueue_worker = None
    if args.kueue.enabled:
        kueue = Kueue(
            f"{name}-kueue",
            KueueArgs(cluster=cluster, config=args.kueue, namespaces=training_namespaces,
                      frameworks=integrations(job_set is not None, trainer is not None), fair_sharing=bool(args.scheduling.teams),
                      queue_required=bool(args.scheduling.teams), charts=charts, ingress=ingress,
                      worker_lost_timeout_minutes=args.multi_kueue.worker_lost_timeout_minutes if args.multi_kueue.manager else None),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        # A manager's ClusterQueues dispatch through MultiKueue's AdmissionCheck, made first.
        if args.multi_kueue.manager:
            multikueue_manager = multikueue_fleet.manager(parent, name, args, cluster, [kueue.release])
        # Kueue's CRDs and webhooks come with the release; LocalQueues live in the training namespaces.
        kueue_queues = KueueQueues(
            f"{name}-kueue-queues",
            replace(kueue_queues_args(args, scheduling.namespaces), admission_checks=[ADMISSION_CHECK] if multikueue_manager else []),
            opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes,
                                        depends_on=[kueue.release, *([multikueue_manager] if multikueue_manager else [])]),
        )
        if args.multi_kueue.worker:
            multikueue_worker = multikueue_fleet.worker(parent, name, args, cluster, [kueue.release, *scheduling.namespaces.values()])
    waits = workload_waits(scheduling=scheduling, gpu_operator=gpu_operator, efa_device_plugin=efa_device_plugin,
                           kueue=kueue, kueue_queues=kueue_queues, gpu_nodes=gpu_nodes, job_prerequisites=prerequisites,
                           job_controllers=job_controllers)
    training_jobs = {
        app.name: _training_job(f"{name}-training-{app.name}", training_job_spec(app, args), scheduling, trainer, waits,
                                parent=parent, kubernetes=kubernetes)
        for app in args.scheduling.training_apps
        if app.job is not None
    }
    smoke_test = (
        GpuSmokeTest(
            f"{name}-smoke-test",
            smoke_test_args(args),
            opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes, depends_on=waits.smoke_test),
        )
        if args.smoke_test.enabled
        else None
    )
    preflight = (
        PreflightChecks(
            f"{name}-preflight",
            preflight_checks_args(args),
            opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes, depends_on=waits.preflight),
        )
        if args.preflight.enabled
        else None
    )
    verifier_role = (
        VerifierRole(
            f"{name}-verifier-role",
            VerifierRoleArgs(group=args.verify.group),
            opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes),
        )
        if args.verify.cluster_role
        else None
    )
    # Members reach their team's namespaces once those exist: the RoleBindings wait for them.
    team_access = (
        TeamAccess(f"{name}-team-access", TeamAccessArgs(teams=args.scheduling.teams, namespaces=scheduling.namespaces),
                   opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes))
        if args.scheduling.teams
        else None
    )
    # The quotas live in the team namespaces; the policy's binding names them.
    team_admission = (
        TeamAdmission(f"{name}-team-admission", TeamAdmissionArgs(namespaces=team_admission_namespaces(args),
                                                                   namespace_resources=scheduling.namespaces),
                      opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes))
        if args.scheduling.teams
        else None
    )
    return InClusterHalf(
        gpu_operator=gpu_operator,
        efa_device_plugin=efa_device_plugin,
        scheduling=scheduling,
        kueue=kueue,
        kueue_queues=kueue_queues,
        job_set=job_set,
        trainer=trainer,
        training_jobs=training_jobs,
        smoke_test=smoke_test,
        preflight=preflight,
        verifier_role=verifier_role,
        team_access=team_access,
        team_admission=team_admission,
        multikueue_manager=multikueue_manager,
        multikueue_worker=multikueue_worker,
    )
