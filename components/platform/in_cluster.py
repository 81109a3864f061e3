"""The stack's in-cluster half alone, for a cluster whose AWS half another program or team runs:
``GpuTrainingInCluster`` deploys through a kubeconfig what needs only Kubernetes, and nothing in AWS.

What it leaves out is what needs AWS to exist: the network, the cluster and its node groups, the
topology labeler (an IAM role and an ECR image) and the node monitoring add-on. What the stack's
workloads would depend on is refused instead of left out (``validation.validate_in_cluster_settings``):
Karpenter (an IAM role, an SQS queue and EC2NodeClasses naming subnets and security groups), whose
pools' jobs would wait for nodes no one launches, FSx for Lustre and the training pods' Pod Identity
role. The pool settings still describe the cluster's GPU nodes: the quotas, Kueue's flavors and the
training jobs are derived from them, as in the whole stack. Controllers go on ``role=system`` nodes
only when ``systemNodeGroup`` is given: the cluster was made elsewhere, so by default it has no
system node group of this stack's (``GpuTrainingPlatformArgs``).
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from ..addons.image_mirrors import image_mirrors
from ..addons.efa_device_plugin import EfaDevicePlugin, EfaDevicePluginArgs, efa_needed
from ..addons.gpu_operator import GpuOperator, GpuOperatorArgs, gpu_node_os
from ..addons.kueue import Kueue, KueueArgs
from ..addons.verifier_role import VerifierRole, VerifierRoleArgs
from ..aws.cluster import ClusterRef, system_node_labels
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import as_model
from ..config.documented import documented_component
from ..facts import aws_enums
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.queues import KueueQueues, kueue_queues_args
from ..workloads.scheduling_policies import (
    SchedulingPolicies,
    scheduling_policies_args,
    training_job_spec,
)
from ..workloads.smoke_test import GpuSmokeTest
from ..workloads.training_job import TrainingJob, TrainingJobArgs
from .checks import preflight_checks_args, smoke_test_args
from .validation import validate_stack


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
    gpu_operator_status: pulumi.Output[Optional[str]]
    """Helm's status of the GPU Operator release (``deployed`` once installed)."""

    def __init__(self, name: str, args: GpuTrainingPlatformArgs, opts: Optional[pulumi.ResourceOptions] = None):
        # Checked before the component registers, so invalid arguments create nothing at all.
        args = as_model(args, GpuTrainingPlatformArgs, "GpuTrainingPlatformArgs")
        problems = [*validate_stack(args, name), *validate_in_cluster(args)]
        if problems:
            raise ConfigError(problems)
        # Every image under the platform from its registry's mirror (images.registryMirrors).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[image_mirrors(args.images.registry_mirrors)]))
        super().__init__("eks-gpu-training:index:GpuTrainingInCluster", name, None, opts)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.in_cluster.kubeconfig,
            context=args.in_cluster.context,
            opts=pulumi.ResourceOptions(parent=self),
        )
        ref = kubeconfig_cluster_ref(args, self.provider)
        on_cluster = pulumi.ResourceOptions(parent=self, providers={"kubernetes": self.provider})
        charts, mirror = args.charts.directory, args.charts.mirror
        namespaces = [ns.name for ns in args.scheduling.namespaces]

        self.gpu_operator = GpuOperator(
            f"{name}-gpu-operator",
            GpuOperatorArgs(cluster=ref, config=args.gpu_operator, node_os=gpu_node_os(args), chart_directory=charts,
                            chart_mirror=mirror),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.efa_device_plugin = (
            EfaDevicePlugin(f"{name}-efa-device-plugin", EfaDevicePluginArgs(cluster=ref, chart_directory=charts, chart_mirror=mirror),
                            opts=pulumi.ResourceOptions(parent=self))
            if efa_needed(args)
            else None
        )
        self.scheduling = SchedulingPolicies(f"{name}-scheduling", scheduling_policies_args(args), opts=on_cluster)
        job_dependencies: list[pulumi.Resource] = [self.scheduling]
        self.kueue = None
        self.kueue_queues = None
        if args.kueue.enabled:
            self.kueue = Kueue(
                f"{name}-kueue",
                KueueArgs(cluster=ref, config=args.kueue, namespaces=namespaces, chart_directory=charts,
                          chart_mirror=mirror),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.kueue_queues = KueueQueues(
                f"{name}-kueue-queues",
                kueue_queues_args(args, self.scheduling.namespaces),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[self.kueue.release])),
            )
            job_dependencies.append(self.kueue_queues)
        self.training_jobs = {
            app.name: TrainingJob(
                f"{name}-training-{app.name}",
                TrainingJobArgs(job=training_job_spec(app, args)),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=job_dependencies)),
            )
            for app in args.scheduling.training_apps
            if app.job is not None
        }
        # Checks of the GPU nodes wait for their namespace, the device plugin (the GPU Operator) and
        # Kueue's webhook, as in the whole stack; the nodes themselves are already there.
        gpu_checks = [self.scheduling, self.gpu_operator, *([self.kueue.release] if self.kueue is not None else [])]
        self.smoke_test = None
        if args.smoke_test.enabled:
            self.smoke_test = GpuSmokeTest(
                f"{name}-smoke-test",
                smoke_test_args(args),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=gpu_checks)),
            )
        self.preflight = None
        if args.preflight.enabled:
            efa = [self.efa_device_plugin] if self.efa_device_plugin is not None else []
            self.preflight = PreflightChecks(
                f"{name}-preflight",
                preflight_checks_args(args),
                opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[*gpu_checks, *efa])),
            )
        self.verifier_role = (
            VerifierRole(f"{name}-verifier-role", VerifierRoleArgs(group=args.verify.group), opts=on_cluster)
            if args.verify.cluster_role
            else None
        )
        self.gpu_operator_status = self.gpu_operator.release_status
        self.register_outputs({"gpuOperatorStatus": self.gpu_operator_status})
