"""The stack's in-cluster half: ``compose_in_cluster`` builds it, the same for both entry points, and
``GpuTrainingInCluster`` deploys it alone, through a kubeconfig, for a cluster whose AWS half another
program or team runs. ``GpuTrainingPlatform`` builds its AWS half and then the same composition, so
what runs in the cluster, and what each part of it waits for, cannot drift between the two modes.

What the half alone leaves out is what needs AWS to exist: the network, the cluster and its node
groups, the topology labeler (an IAM role and an ECR image) and the node monitoring add-on. What the
stack's workloads would depend on is refused instead of left out
(``validation.validate_in_cluster_settings``): Karpenter (an IAM role, an SQS queue and
EC2NodeClasses naming subnets and security groups), whose pools' jobs would wait for nodes no one
launches, FSx for Lustre and the training pods' Pod Identity role. The pool settings still describe
the cluster's GPU nodes: the quotas, Kueue's flavors and the training jobs are derived from them, as
in the whole stack. Controllers go on ``role=system`` nodes only when ``systemNodeGroup`` is given:
the cluster was made elsewhere, so by default it has no system node group of this stack's
(``GpuTrainingPlatformArgs``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..addons.controller_ingress import ControllerIngress
from ..addons.image_mirrors import image_mirrors
from ..addons.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_needed
from ..addons.gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os
from ..addons.job_apis import (
    JobSetController,
    JobSetControllerArgs,
    TrainerController,
    TrainerControllerArgs,
    jobset_needed,
    trainer_needed,
)
from ..addons.kueue import Kueue, KueueArgs, integrations
from ..addons.verifier_role import VerifierRole, VerifierRoleArgs
from ..aws.cluster import ClusterRef, system_node_labels
from ..aws.network import cluster_subnet_cidrs
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import as_model
from ..config.documented import component_args, documented_component
from ..facts import aws_enums
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.queues import KueueQueues, kueue_queues_args
from ..workloads.scheduling_policies import (
    SchedulingPolicies,
    scheduling_policies_args,
    training_job_spec,
)
from ..workloads.smoke_test import GpuSmokeTest
from ..workloads.team_access import TeamAccess, TeamAccessArgs, entry_less_members
from ..workloads.team_admission import TeamAdmission, TeamAdmissionArgs, team_admission_namespaces
from ..workloads.training_job import TrainingJob, TrainingJobArgs
from ..workloads.training_spec import TrainingJobSpec
from .checks import preflight_checks_args, smoke_test_args
from .validation import validate_stack
from .verified_charts import project_lock, with_verified_charts


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
    charts, mirror = args.charts.directory, args.charts.mirror
    training_namespaces = [ns.name for ns in args.scheduling.namespaces]
    ingress = controller_ingress(args, cluster)

    gpu_operator = GpuOperator(
        f"{name}-gpu-operator",
        GpuOperatorArgs(cluster=gpu_cluster, config=args.gpu_operator, node_os=gpu_node_os(args), chart_directory=charts,
                        chart_mirror=mirror),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    efa_device_plugin = (
        EfaDevicePlugin(
            f"{name}-efa-device-plugin",
            EfaDevicePluginArgs(cluster=gpu_cluster, chart_directory=charts, chart_mirror=mirror),
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
        JobSetController(f"{name}-jobset", JobSetControllerArgs(cluster=cluster, config=args.job_set, chart_directory=charts,
                                                                chart_mirror=mirror, training_namespaces=training_namespaces, ingress=ingress),
                         opts=pulumi.ResourceOptions(parent=parent))
        if jobset_needed(args) or trainer_needed(args)
        else None
    )
    trainer = (
        TrainerController(f"{name}-trainer", TrainerControllerArgs(cluster=cluster, config=args.trainer, chart_directory=charts,
                                                                   chart_mirror=mirror, training_namespaces=training_namespaces, ingress=ingress),
                          # Trainer creates JobSets: JobSet's CRD and webhooks come first.
                          opts=pulumi.ResourceOptions(parent=parent, depends_on=[job_set.release] if job_set else []))
        if trainer_needed(args)
        else None
    )
    job_controllers = [c.release for c in (job_set, trainer) if c is not None]
    kueue = None
    kueue_queues = None
    if args.kueue.enabled:
        kueue = Kueue(
            f"{name}-kueue",
            KueueArgs(cluster=cluster, config=args.kueue, namespaces=training_namespaces,
                      frameworks=integrations(job_set is not None, trainer is not None), fair_sharing=bool(args.scheduling.teams),
                      queue_required=bool(args.scheduling.teams), chart_directory=charts, chart_mirror=mirror, ingress=ingress),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        # Kueue's CRDs and webhooks come with the release; LocalQueues live in the training namespaces.
        kueue_queues = KueueQueues(
            f"{name}-kueue-queues",
            kueue_queues_args(args, scheduling.namespaces),
            opts=pulumi.ResourceOptions(parent=parent, providers=kubernetes, depends_on=[kueue.release]),
        )
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
    )


def validate_in_cluster(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """What ``GpuTrainingInCluster`` needs beyond the stack's rules (which check ``inCluster``'s own
    settings with the rest, ``validation.validate_in_cluster_settings``): the mode turned on."""
    if not args.in_cluster.enabled:
        return [Problem("inCluster.enabled", "is false: GpuTrainingInCluster deploys the in-cluster half only when "
                        "inCluster.enabled is true, with inCluster.kubeconfig")]
    return []


def kubeconfig_cluster_ref(args: GpuTrainingPlatformArgs, provider: k8s.Provider) -> ClusterRef:
    """The ref in-cluster components take, of a cluster reached through ``provider`` only: its
    controllers go on the ``role=system`` nodes when the stack describes a system node group (given
    explicitly in this mode), as the whole stack places them, and wherever the cluster's scheduler
    puts them otherwise. The AWS fields are never read by the components this mode deploys."""
    return ClusterRef(
        name=args.cluster.name,
        region=args.region,
        partition=aws_enums.partition_of(args.region),
        vpc_id="",
        kubernetes_version=args.cluster.kubernetes_version,
        cluster_security_group_id="",
        kubeconfig=args.in_cluster.kubeconfig if args.in_cluster.kubeconfig is not None else "",
        provider=provider,
        system_node_selector=system_node_labels() if args.system_node_group.enabled else {},
    )


GpuTrainingInClusterArgs = GpuTrainingPlatformArgs
"""The arguments of ``GpuTrainingInCluster``: a stack's arguments, with ``in_cluster.enabled``."""


@documented_component(GpuTrainingPlatformArgs)
class GpuTrainingInCluster(pulumi.ComponentResource):
    """The in-cluster half of a stack (``inCluster.enabled``): GPU Operator, EFA device plugin, Kueue and its
    queues, scheduling policies, training jobs, smoke test, pre-flight checks and the verify
    command's role, on the cluster ``inCluster.kubeconfig`` reaches; nothing in AWS."""

    provider: k8s.Provider
    """The Kubernetes provider every object is created with."""
    gpu_operator: GpuOperator
    """The NVIDIA GPU Operator release."""
    efa_device_plugin: Optional[EfaDevicePlugin]
    """The EFA device plugin release; None when no GPU pool has EFA."""
    kueue: Optional[Kueue]
    """The Kueue release, when ``kueue.enabled``."""
    kueue_queues: Optional[KueueQueues]
    """Kueue's Topology, flavors and queues, when ``kueue.enabled``."""
    job_set: Optional[JobSetController]
    """The JobSet release, when a training app runs as a JobSet or TrainJob (or ``jobSet.enabled``)."""
    trainer: Optional[TrainerController]
    """The Kubeflow Trainer release, when a training app runs as a TrainJob (or ``trainer.enabled``)."""
    scheduling: SchedulingPolicies
    """Priority classes, training namespaces with quotas, PDBs."""
    training_jobs: dict[str, TrainingJob]
    """Training apps the stack runs, by app name."""
    smoke_test: Optional[GpuSmokeTest]
    """The nvidia-smi smoke test; None unless enabled."""
    preflight: Optional[PreflightChecks]
    """DCGM diagnostics and the NCCL test; None unless ``preflight.enabled``."""
    verifier_role: Optional[VerifierRole]
    """The verify command's read-only ClusterRole; None unless ``verify.clusterRole``."""
    team_access: Optional[TeamAccess]
    """The team-member ClusterRole and its RoleBinding in each team namespace; None without ``scheduling.teams``."""
    team_admission: Optional[TeamAdmission]
    """The team namespaces' GPU pod policy and priority-class quotas; None without ``scheduling.teams``."""
    gpu_operator_status: pulumi.Output[Optional[str]]
    """Helm's status of the GPU Operator release (``deployed`` once installed)."""

    def __init__(self, name: str, args: Optional[GpuTrainingPlatformArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        # Checked before the component registers, so invalid arguments create nothing at all.
        args = component_args(GpuTrainingPlatformArgs, "GpuTrainingInCluster", name, args, fields)
        args = as_model(args, GpuTrainingPlatformArgs, "GpuTrainingPlatformArgs")
        problems = [*validate_stack(args, name), *validate_in_cluster(args)]
        if not problems:
            # The chart archives, checked against charts.lock before anything registers.
            args, problems = with_verified_charts(args, project_lock())
        if problems:
            raise ConfigError(problems)
        # Every image under the platform from its registry's mirror (images.registryMirrors), by its
        # locked digest (images.lock).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[image_mirrors(args.images.registry_mirrors, args.images)]))
        super().__init__("eks-gpu-training:index:GpuTrainingInCluster", name, None, opts)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.in_cluster.kubeconfig,
            context=args.in_cluster.context,
            opts=pulumi.ResourceOptions(parent=self),
        )
        half = compose_in_cluster(self, name, args, kubeconfig_cluster_ref(args, self.provider))
        entry_less = entry_less_members(args)
        if entry_less:
            pulumi.log.warn("the in-cluster half makes no EKS access entry: give each of these team members an entry with its "
                            f"group where the AWS half is managed: {', '.join(entry_less)}", resource=self)
        self.gpu_operator = half.gpu_operator
        self.efa_device_plugin = half.efa_device_plugin
        self.scheduling = half.scheduling
        self.kueue = half.kueue
        self.kueue_queues = half.kueue_queues
        self.job_set = half.job_set
        self.trainer = half.trainer
        self.training_jobs = half.training_jobs
        self.smoke_test = half.smoke_test
        self.preflight = half.preflight
        self.verifier_role = half.verifier_role
        self.team_access = half.team_access
        self.team_admission = half.team_admission
        self.gpu_operator_status = self.gpu_operator.release_status
        self.register_outputs({"gpuOperatorStatus": self.gpu_operator_status})
