"""``GpuTrainingInCluster``: the stack's in-cluster half deployed alone, through a kubeconfig, for a
cluster whose AWS half another program or team runs. It builds the same composition as
``GpuTrainingPlatform`` (``composition.compose_in_cluster``, re-exported here), so what runs in the
cluster cannot drift between the two modes.

What the half alone leaves out is what needs AWS to exist: the network, the cluster and its node
groups, the topology labeler and the node monitoring add-on. What the stack's workloads would
depend on is refused instead (``validation.validate_in_cluster_settings``): Karpenter, FSx for
Lustre and the training pods' Pod Identity role. The pool settings still describe the cluster's GPU
nodes: the quotas, Kueue's flavors and the training jobs derive from them. Controllers go on
``role=system`` nodes only when ``systemNodeGroup`` is given: by default a cluster made elsewhere has
no system node group of this stack's.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..addons.image_mirrors import image_mirrors
from ..addons.efa_device_plugin import EfaDevicePlugin
from ..addons.gpu_operator import GpuOperator
from ..addons.job_set_controller import JobSetController
from ..addons.trainer_controller import TrainerController
from ..addons.kueue import Kueue
from ..addons.verifier_role import VerifierRole
from ..aws.eks_cluster import ClusterRef, system_node_labels
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import as_model
from ..config.documented import component_args, documented_component
from ..facts import aws_enums
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.kueue_queues import KueueQueues
from ..workloads.scheduling_policies import SchedulingPolicies
from ..workloads.gpu_smoke_test import GpuSmokeTest
from ..workloads.team_access import TeamAccess, entry_less_members
from ..workloads.team_admission import TeamAdmission
from ..workloads.multikueue_manager import MultiKueueManager
from ..workloads.multikueue_worker import MultiKueueWorker
from ..workloads.training_job import TrainingJob
from .composition import InClusterHalf, WorkloadWaits, compose_in_cluster, workload_waits
from .validation import validate_stack
from .verified_charts import project_lock, with_verified_charts

__all__ = [
    "GpuTrainingInCluster", "GpuTrainingInClusterArgs", "InClusterHalf", "WorkloadWaits", "compose_in_cluster",
    "kubeconfig_cluster_ref", "validate_in_cluster", "workload_waits",
]


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
    multikueue_manager: Optional[MultiKueueManager]
    """The MultiKueue objects that dispatch this stack's jobs to its workers; None unless ``multiKueue.manager``."""
    multikueue_worker: Optional[MultiKueueWorker]
    """The identity a MultiKueue manager uses here, and its kubeconfig; None unless ``multiKueue.worker``."""
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
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transforms=[image_mirrors(args.images.registry_mirrors, args.images)]))
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
        half.expose_on(self)
        self.gpu_operator_status = self.gpu_operator.release_status
        self.register_outputs({"gpuOperatorStatus": self.gpu_operator_status})
