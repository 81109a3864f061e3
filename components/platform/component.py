"""The whole GPU-training platform of one stack, composed from one typed ``GpuTrainingPlatformArgs``:
the AWS half (network, cluster, node groups, Karpenter and what else needs AWS), then the in-cluster
half ``GpuTrainingInCluster`` deploys alone, from the same ``compose_in_cluster``."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_aws as aws

from ..facts import aws_enums
from ..aws.cluster import EksCluster, EksClusterArgs
from ..aws.cluster_access import creator_tag_problems, live_admin_access
from ..aws.network import Network, NetworkArgs, adopted_network
from ..aws.storage import LustreStorage, LustreStorageArgs, subnet_in_zone
from ..config import fsx_zone, gpu_pool_zones
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import as_model
from ..addons.image_mirrors import image_mirrors
from ..addons.efa_device_plugin import EfaDevicePlugin
from ..aws.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from ..addons.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from ..addons.gpu_operator import GpuOperator
from ..addons.karpenter import Karpenter, KarpenterArgs
from ..addons.kueue import Kueue
from ..aws.training_identity import TrainingIdentity, TrainingIdentityArgs, training_role_needed
from ..addons.topology_labeler import TopologyLabeler, TopologyLabelerArgs
from ..addons.verifier_role import VerifierRole
from ..aws.node_monitoring import NodeMonitoringAgent, NodeMonitoringAgentArgs
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.queues import KueueQueues
from ..workloads.scheduling_policies import SchedulingPolicies
from ..workloads.smoke_test import GpuSmokeTest
from ..workloads.storage import TrainingStorage, TrainingStorageArgs
from ..workloads.training_job import TrainingJob
from .names import (
    cluster_child_name,
    lustre_child_name,
    network_child_name,
    gpu_node_group_child_name,
    gpu_node_pool_child_name,
    karpenter_child_name,
    topology_labeler_child_name,
    training_identity_child_name,
)
from .in_cluster import compose_in_cluster
from .rolls import live_roll_problems
from .validation import validate_stack
from ..config.documented import documented_component


@documented_component(GpuTrainingPlatformArgs)
class GpuTrainingPlatform(pulumi.ComponentResource):
    """VPC (when created), EKS cluster, system node group, GPU training pools, GPU Operator, EFA device
    plugin, topology labeler, node monitoring agent, Karpenter, Kueue, storage, scheduling policy,
    training jobs, the checks (smoke test, pre-flight) and the verify command's read-only role, in
    one stack graph."""

    network: Optional[Network]
    """The VPC this stack created; None when it adopts one (``network.create`` false)."""
    cluster: EksCluster
    """The created or adopted cluster."""
    gpu_node_groups: dict[str, GpuNodeGroup]
    """GPU pools by pool name."""
    gpu_operator: GpuOperator
    """The NVIDIA GPU Operator release."""
    efa_device_plugin: Optional[EfaDevicePlugin]
    """The EFA device plugin release; None when no GPU pool has EFA."""
    topology_labeler: Optional[TopologyLabeler]
    """The topology labeler; None when ``topologyLabeler.enabled`` is false."""
    karpenter: Optional[Karpenter]
    """The Karpenter controller, when ``karpenter.enabled``."""
    gpu_node_pools: dict[str, GpuNodePool]
    """Karpenter GPU pools by pool name."""
    kueue: Optional[Kueue]
    """The Kueue release, when ``kueue.enabled``."""
    kueue_queues: Optional[KueueQueues]
    """Kueue's Topology, flavors and queues, when ``kueue.enabled``."""
    scheduling: SchedulingPolicies
    """Priority classes, training namespaces with quotas, PDBs of apps deployed elsewhere."""
    training_identity: Optional[TrainingIdentity]
    """The training pods' Pod Identity role; None unless ``s3Buckets`` or the ServiceAccount's ``policyArns`` are set."""
    training_jobs: dict[str, TrainingJob]
    """Training apps the stack runs, by app name."""
    smoke_test: Optional[GpuSmokeTest]
    """The nvidia-smi smoke test; None unless enabled."""
    lustre: Optional[LustreStorage]
    """The FSx for Lustre file system and its CSI driver; None unless ``storage.fsx.enabled``."""
    training_storage: Optional[TrainingStorage]
    """The file system's volume and claim in each training namespace; None without FSx."""
    cluster_name: pulumi.Output[str]
    """EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON, secret) that authenticates with ``aws eks get-token``."""
    gpu_node_group_names: pulumi.Output[list[str]]
    """EKS node group names of the GPU pools."""
    placement_group_names: pulumi.Output[dict[str, Optional[str]]]
    """Placement group of each managed GPU pool, by pool name (None without one)."""
    karpenter_node_pool_names: pulumi.Output[list[str]]
    """NodePool names of the Karpenter GPU pools."""
    karpenter_placement_group_names: pulumi.Output[dict[str, Optional[str]]]
    """Placement group of each Karpenter GPU pool, by pool name (None without one)."""
    node_monitoring_agent: Optional[NodeMonitoringAgent]
    """The EKS node monitoring agent add-on; None when ``nodeMonitoring.enabled`` is false."""
    preflight: Optional[PreflightChecks]
    """DCGM diagnostics and the NCCL test; None unless ``preflight.enabled``."""
    verifier_role: Optional[VerifierRole]
    """The read-only ClusterRole of ``eks-gpu-training-verify``; None unless ``verify.clusterRole``."""

    def __init__(self, name: str, args: GpuTrainingPlatformArgs, opts: Optional[pulumi.ResourceOptions] = None):
        # Checked before the component registers, so invalid arguments create nothing at all.
        args = as_model(args, GpuTrainingPlatformArgs, "GpuTrainingPlatformArgs")
        problems = validate_stack(args, name)
        if args.in_cluster.enabled:
            problems.append(Problem("inCluster", "deploys the in-cluster half alone, with GpuTrainingInCluster; "
                                    "GpuTrainingPlatform builds the whole stack: remove inCluster for it"))
        problems.extend(creator_tag_problems(args.tags))
        if not problems:
            # What runs now decides whether a version change rolls pools, and who created the cluster
            # which admins get access entries (EksCluster reads it again): read before registering.
            problems = live_roll_problems(args)
            if args.cluster.create:
                problems.extend(live_admin_access(args.cluster, args.tags, args.region, opts)[1])
        if problems:
            raise ConfigError(problems)
        # Every image under the platform from its registry's mirror (images.registryMirrors).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[image_mirrors(args.images.registry_mirrors)]))
        super().__init__("eks-gpu-training:index:GpuTrainingPlatform", name, None, opts)
        partition = aws_enums.partition_of(args.region)
        tags = dict(args.tags)

        self.network = (
            Network(
                network_child_name(name),
                NetworkArgs(config=args.network, region=args.region, name_prefix=args.cluster.name, tags=tags),
                opts=pulumi.ResourceOptions(parent=self),
            )
            if args.network.create
            else None
        )
        self.cluster = EksCluster(
            cluster_child_name(name),
            EksClusterArgs(
                cluster=args.cluster,
                network=self.network.ref if self.network is not None else adopted_network(args.network),
                system_node_group=args.system_node_group,
                region=args.region,
                partition=partition,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.lustre = None
        if args.storage.fsx.enabled:
            zone = fsx_zone(args.storage, args.network, gpu_pool_zones(args))
            assert zone is not None, "validate_storage reports a file system without an AZ"
            self.lustre = LustreStorage(
                lustre_child_name(name),
                LustreStorageArgs(
                    config=args.storage.fsx,
                    cluster=self.cluster.ref,
                    subnet_id=subnet_in_zone(self.cluster.ref.subnets, zone),
                    account_id=aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id,
                    tags=tags,
                    protect=args.cluster.protect,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.gpu_node_groups = {
            pool.name: GpuNodeGroup(
                gpu_node_group_child_name(name, pool.name),
                GpuNodeGroupArgs(
                    cluster=self.cluster.ref,
                    pool=pool,
                    network=args.network,
                    tags=tags,
                    protect=args.cluster.protect,
                    instance_store_raid0=args.storage.instance_store == "raid0",
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for pool in args.gpu_node_groups
        }
        self.node_monitoring_agent = None
        if args.node_monitoring.enabled:
            self.node_monitoring_agent = NodeMonitoringAgent(
                f"{name}-node-monitoring",
                NodeMonitoringAgentArgs(cluster=self.cluster.ref, addon_version=args.node_monitoring.addon_version, tags=tags),
                opts=pulumi.ResourceOptions(parent=self),
            )
        # The labeler waits for the cluster only: its DaemonSet has nothing to wait for on GPU nodes,
        # whose pods start as the nodes join.
        self.topology_labeler = (
            TopologyLabeler(
                topology_labeler_child_name(name),
                TopologyLabelerArgs(cluster=self.cluster.ref, config=args.topology_labeler, tags=tags),
                opts=pulumi.ResourceOptions(parent=self),
            )
            if args.topology_labeler.enabled
            else None
        )
        self.karpenter = None
        self.gpu_node_pools = {}
        if args.karpenter.enabled:
            self.karpenter = Karpenter(
                karpenter_child_name(name),
                KarpenterArgs(cluster=self.cluster.ref, config=args.karpenter, tags=tags,
                              chart_directory=args.charts.directory, chart_mirror=args.charts.mirror),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.gpu_node_pools = {
                pool.name: GpuNodePool(
                    gpu_node_pool_child_name(name, pool.name),
                    GpuNodePoolArgs(
                        cluster=self.cluster.ref,
                        pool=pool,
                        network=args.network,
                        node_role_name=self.karpenter.node_role_name,
                        karpenter_release=self.karpenter.release,
                        tags=tags,
                        instance_store_raid0=args.storage.instance_store == "raid0",
                        protect=args.cluster.protect,
                        retain_on_removal=args.karpenter.retain_on_removal,
                    ),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                for pool in args.karpenter.gpu_node_pools
            }

        account = args.scheduling.service_account
        self.training_identity = None
        if training_role_needed(args.s3_buckets, account.policy_arns):
            self.training_identity = TrainingIdentity(
                training_identity_child_name(name),
                TrainingIdentityArgs(
                    cluster=self.cluster.ref,
                    namespaces=[ns.name for ns in args.scheduling.namespaces],
                    service_account=account.name,
                    s3_buckets=list(args.s3_buckets),
                    policy_arns=list(account.policy_arns),
                    tags=tags,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.training_storage = None

        def training_prerequisites(scheduling: SchedulingPolicies) -> list[pulumi.Resource]:
            # Training pods get AWS credentials only if their association exists when they start, and
            # stay Pending while their claim does not exist: jobs wait for both.
            if self.lustre is not None:
                self.training_storage = TrainingStorage(
                    f"{name}-training-storage",
                    TrainingStorageArgs(
                        volume=self.lustre.volume,
                        namespaces=[ns.name for ns in args.scheduling.namespaces],
                        depends_on=[scheduling, self.lustre.csi_driver],
                    ),
                    opts=pulumi.ResourceOptions(parent=self, providers={"kubernetes": self.cluster.ref.provider}),
                )
            return [r for r in (self.training_identity, self.training_storage) if r is not None]

        # Releases with DaemonSets on GPU nodes, and the checks of those nodes, wait for the managed
        # GPU node groups; Karpenter pools start empty, so nothing of theirs is waited for.
        half = compose_in_cluster(self, name, args, self.cluster.ref, gpu_nodes=list(self.gpu_node_groups.values()),
                                  job_prerequisites=training_prerequisites)
        self.gpu_operator = half.gpu_operator
        self.efa_device_plugin = half.efa_device_plugin
        self.scheduling = half.scheduling
        self.kueue = half.kueue
        self.kueue_queues = half.kueue_queues
        self.training_jobs = half.training_jobs
        self.smoke_test = half.smoke_test
        self.preflight = half.preflight
        self.verifier_role = half.verifier_role

        self.cluster_name = self.cluster.cluster_name
        self.kubeconfig = self.cluster.kubeconfig
        self.gpu_node_group_names = pulumi.Output.all(*(g.node_group_name for g in self.gpu_node_groups.values()))
        self.placement_group_names = pulumi.Output.all(
            **{pool: group.placement_group_name for pool, group in self.gpu_node_groups.items()}
        )
        self.karpenter_node_pool_names = pulumi.Output.all(*(p.node_pool_name for p in self.gpu_node_pools.values()))
        self.karpenter_placement_group_names = pulumi.Output.all(
            **{pool: p.placement_group_name for pool, p in self.gpu_node_pools.items()}
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "gpuNodeGroupNames": self.gpu_node_group_names,
                "placementGroupNames": self.placement_group_names,
                "karpenterNodePoolNames": self.karpenter_node_pool_names,
                "karpenterPlacementGroupNames": self.karpenter_placement_group_names,
            }
        )
