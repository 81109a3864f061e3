"""The whole GPU-training platform of one stack, composed from one typed ``GpuTrainingPlatformArgs``:
the AWS half (network, cluster, node groups, Karpenter and what else needs AWS), then the in-cluster
half ``GpuTrainingInCluster`` deploys alone, from the same ``compose_in_cluster``."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from ..facts import aws_enums
from ..aws.eks_cluster import EksCluster, EksClusterArgs
from ..aws.cluster_access import creator_tag_problems, live_admin_access, member_creator_problems
from ..aws.network import Network, NetworkArgs, adopted_network
from ..aws.lustre_storage import LustreStorage, LustreStorageArgs, subnet_in_zone
from ..config import fsx_zone, gpu_pool_zones
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.team_settings import team_gid
from ..config.arguments import as_model
from ..config.base import Tags, tag_map
from ..addons.image_mirrors import image_mirrors
from ..config.image_lock import locked_gate_images
from ..addons.efa_device_plugin import EfaDevicePlugin
from ..aws.gpu_node_group import GpuNodeGroup, GpuNodeGroupArgs
from ..addons.gpu_node_pool import GpuNodePool, GpuNodePoolArgs
from ..addons.gpu_operator import GpuOperator
from ..addons.karpenter import Karpenter, KarpenterArgs
from ..addons.job_set_controller import JobSetController
from ..addons.trainer_controller import TrainerController
from ..addons.kueue import Kueue
from ..aws.training_identity import TrainingIdentity, TrainingIdentityArgs, training_role_needed
from ..addons.topology_labeler import TopologyLabeler, TopologyLabelerArgs
from ..workloads.health_gate import HealthGate, HealthGateArgs
from ..addons.verifier_role import VerifierRole
from ..aws.node_monitoring_agent import NodeMonitoringAgent, NodeMonitoringAgentArgs
from ..workloads.preflight_checks import PreflightChecks
from ..workloads.kueue_queues import KueueQueues
from ..workloads.scheduling_policies import SchedulingPolicies
from ..workloads.gpu_smoke_test import GpuSmokeTest
from ..workloads.training_storage import TrainingStorage, TrainingStorageArgs
from ..workloads.team_access import TeamAccess
from ..workloads.team_admission import TeamAdmission
from ..workloads.multikueue_manager import MultiKueueManager
from ..workloads.multikueue_worker import MultiKueueWorker
from ..workloads.training_job import TrainingJob
from .names import (
    cluster_child_name,
    lustre_child_name,
    network_child_name,
    gpu_node_group_child_name,
    gpu_node_pool_child_name,
    karpenter_child_name,
    topology_labeler_child_name,
    health_gate_child_name,
    training_identity_child_name,
)
from .image_presence import live_image_problems
from .gpu_training_in_cluster import compose_in_cluster
from .rolls import live_roll_problems
from .validation import validate_stack
from .verified_charts import project_lock, with_verified_charts
from ..config.documented import component_args, documented_component

def checked_platform_args(
    args: GpuTrainingPlatformArgs, name: str, opts: Optional[pulumi.ResourceOptions]
) -> GpuTrainingPlatformArgs:
    """``args`` as the model, once every rule of the stack holds; otherwise a ``ConfigError`` with
    every problem. What runs now decides whether a version change rolls pools, and who created the
    cluster which admins get access entries (``EksCluster`` reads it again), and the images the stack
    names in the deployer's ECR must exist, so all are read here, before anything registers, and only
    for arguments that pass the rules; so are the chart archives, checked against ``charts.lock``
    (``verified_charts``)."""
    args = as_model(args, GpuTrainingPlatformArgs, "GpuTrainingPlatformArgs")
    problems = validate_stack(args, name)
    if args.in_cluster.enabled:
        problems.append(Problem("inCluster", "deploys the in-cluster half alone, with GpuTrainingInCluster; "
                                "GpuTrainingPlatform builds the whole stack: remove inCluster for it"))
    problems.extend(creator_tag_problems(args.tags))
    if not problems:
        problems = live_roll_problems(args)
        if args.cluster.create:
            access, access_problems = live_admin_access(args.cluster, args.tags, args.region, opts)
            problems.extend(access_problems)
            problems.extend(member_creator_problems(args.scheduling.teams, access.creator))
        problems.extend(live_image_problems(args, opts))
    if not problems:
        args, problems = with_verified_charts(args, project_lock())
    if problems:
        raise ConfigError(problems)
    return args


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
    health_gate: Optional[HealthGate]
    """The health gate; None unless ``healthGate.enabled``."""
    karpenter: Optional[Karpenter]
    """The Karpenter controller, when ``karpenter.enabled``."""
    gpu_node_pools: dict[str, GpuNodePool]
    """Karpenter GPU pools by pool name."""
    kueue: Optional[Kueue]
    """The Kueue release, when ``kueue.enabled``."""
    kueue_queues: Optional[KueueQueues]
    """Kueue's Topology, flavors and queues, when ``kueue.enabled``."""
    job_set: Optional[JobSetController]
    """The JobSet release, when a training app runs as a JobSet or TrainJob (or ``jobSet.enabled``)."""
    trainer: Optional[TrainerController]
    """The Kubeflow Trainer release, when a training app runs as a TrainJob (or ``trainer.enabled``)."""
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
    team_access: Optional[TeamAccess]
    """The team-member ClusterRole and its RoleBinding in each team namespace; None without ``scheduling.teams``."""
    team_admission: Optional[TeamAdmission]
    """The team namespaces' GPU pod policy and priority-class quotas; None without ``scheduling.teams``."""
    multikueue_manager: Optional[MultiKueueManager]
    """The MultiKueue objects that dispatch this stack's jobs to its workers; None unless ``multiKueue.manager``."""
    multikueue_worker: Optional[MultiKueueWorker]
    """The identity a MultiKueue manager uses here, and its kubeconfig; None unless ``multiKueue.worker``."""

    def __init__(self, name: str, args: Optional[GpuTrainingPlatformArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        # Checked before the component registers, so invalid arguments create nothing at all.
        args = component_args(GpuTrainingPlatformArgs, "GpuTrainingPlatform", name, args, fields)
        args = checked_platform_args(args, name, opts)
        # Every image under the platform from its registry's mirror (images.registryMirrors), by its
        # locked digest (images.lock).
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transforms=[image_mirrors(args.images.registry_mirrors, args.images)]))
        super().__init__("eks-gpu-training:index:GpuTrainingPlatform", name, None, opts)
        tags = tag_map(args.tags)  # a map, or an Output of a whole map: every AWS child takes either

        self.network = self._network(name, args, tags) if args.network.create else None
        self.cluster = self._cluster(name, args, tags)
        self.lustre = self._lustre(name, args, tags) if args.storage.fsx.enabled else None
        self.gpu_node_groups = self._gpu_node_groups(name, args, tags)
        self.node_monitoring_agent = self._node_monitoring(name, args, tags) if args.node_monitoring.enabled else None
        self.topology_labeler = self._topology_labeler(name, args, tags) if args.topology_labeler.enabled else None
        self.karpenter = self._karpenter(name, args, tags) if args.karpenter.enabled else None
        self.gpu_node_pools = self._gpu_node_pools(name, args, self.karpenter, tags) if self.karpenter else {}
        self.health_gate = self._health_gate(name, args, tags) if args.health_gate.enabled else None
        self.training_identity = (
            self._training_identity(name, args, tags)
            if training_role_needed(args.s3_buckets, args.scheduling.service_account.policy_arns)
            else None
        )
        self.training_storage = None

        def training_prerequisites(scheduling: SchedulingPolicies) -> list[pulumi.Resource]:
            # Training pods get AWS credentials only if their association exists when they start, and
            # stay Pending while their claim does not exist: jobs wait for both.
            if self.lustre is not None:
                self.training_storage = self._training_storage(name, args, scheduling, self.lustre)
            return [r for r in (self.training_identity, self.training_storage) if r is not None]

        # Releases with DaemonSets on GPU nodes, and the checks of those nodes, wait for the managed
        # GPU node groups; Karpenter pools start empty, so nothing of theirs is waited for.
        half = compose_in_cluster(self, name, args, self.cluster.ref, gpu_nodes=list(self.gpu_node_groups.values()),
                                  job_prerequisites=training_prerequisites)
        half.expose_on(self)

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

    def _network(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> Network:
        """The VPC with its subnets, endpoints and NAT gateways (``network.create``)."""
        return Network(
            network_child_name(name),
            NetworkArgs(config=args.network, region=args.region, name_prefix=args.cluster.name, tags=tags),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _cluster(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> EksCluster:
        """The created or adopted cluster with its system node group, in this stack's or the adopted network."""
        return EksCluster(
            cluster_child_name(name),
            EksClusterArgs(
                cluster=args.cluster,
                network=self.network.ref if self.network is not None else adopted_network(args.network),
                system_node_group=args.system_node_group,
                region=args.region,
                partition=aws_enums.partition_of(args.region),
                tags=tags,
                teams=list(args.scheduling.teams),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _lustre(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> LustreStorage:
        """The FSx for Lustre file system and its CSI driver, in the private subnet of its AZ."""
        zone = fsx_zone(args.storage, args.network, gpu_pool_zones(args))
        assert zone is not None, "validate_storage reports a file system without an AZ"  # noqa: S101 - an invariant of validated args
        return LustreStorage(
            lustre_child_name(name),
            LustreStorageArgs(
                config=args.storage.fsx,
                cluster=self.cluster.ref,
                subnet_id=subnet_in_zone(self.cluster.ref.subnets, zone),
                tags=tags,
                protect=args.cluster.protect,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _gpu_node_groups(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> dict[str, GpuNodeGroup]:
        """The managed node group of each GPU pool (``gpuNodeGroups``), by pool name."""
        return {
            pool.name: GpuNodeGroup(
                gpu_node_group_child_name(name, pool.name),
                GpuNodeGroupArgs(
                    cluster=self.cluster.ref,
                    pool=pool,
                    network=args.network,
                    tags=tags,
                    protect=args.cluster.protect,
                    instance_store_raid0=args.storage.instance_store == "raid0",
                    health_gate=args.health_gate.enabled,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for pool in args.gpu_node_groups
        }

    def _node_monitoring(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> NodeMonitoringAgent:
        """The EKS node monitoring agent add-on, whose node conditions node auto repair acts on."""
        return NodeMonitoringAgent(
            f"{name}-node-monitoring",
            NodeMonitoringAgentArgs(cluster=self.cluster.ref, addon_version=args.node_monitoring.addon_version, tags=tags),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _topology_labeler(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> TopologyLabeler:
        """The topology labeler with its image and role. It waits for the cluster only: its DaemonSet
        has nothing to wait for on GPU nodes, whose pods start as the nodes join."""
        return TopologyLabeler(
            topology_labeler_child_name(name),
            TopologyLabelerArgs(cluster=self.cluster.ref, config=args.topology_labeler, tags=tags, image_digests=args.images.digests),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _health_gate(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> HealthGate:
        """The health gate for every GPU pool, whose nodes join with its startup taint. It waits for the
        cluster only: nodes that join before it runs keep their taint until it does."""
        return HealthGate(
            health_gate_child_name(name),
            HealthGateArgs(cluster=self.cluster.ref, config=locked_gate_images(args.health_gate, args.images.digests),
                           gpu_node_groups=list(args.gpu_node_groups),
                           karpenter_pools=list(args.karpenter.gpu_node_pools) if args.karpenter.enabled else [], tags=tags,
                           image_mirrors=args.images.registry_mirrors, image_digests=args.images.digests),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _karpenter(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> Karpenter:
        """The Karpenter controller with its IAM role and interruption queue."""
        return Karpenter(
            karpenter_child_name(name),
            KarpenterArgs(cluster=self.cluster.ref, config=args.karpenter, tags=tags,
                          charts=args.charts.source()),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _gpu_node_pools(
        self, name: str, args: GpuTrainingPlatformArgs, karpenter: Karpenter, tags: Tags
    ) -> dict[str, GpuNodePool]:
        """The EC2NodeClass and NodePool of each Karpenter GPU pool (``karpenter.gpuNodePools``), by pool name."""
        return {
            pool.name: GpuNodePool(
                gpu_node_pool_child_name(name, pool.name),
                GpuNodePoolArgs(
                    cluster=self.cluster.ref,
                    pool=pool,
                    network=args.network,
                    node_role_name=karpenter.node_role_name,
                    karpenter_release=karpenter.release,
                    tags=tags,
                    instance_store_raid0=args.storage.instance_store == "raid0",
                    protect=args.cluster.protect,
                    retain_on_removal=args.karpenter.retain_on_removal,
                    health_gate=args.health_gate.enabled,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for pool in args.karpenter.gpu_node_pools
        }

    def _training_identity(self, name: str, args: GpuTrainingPlatformArgs, tags: Tags) -> TrainingIdentity:
        """The training pods' Pod Identity role, for ``s3Buckets`` and the ServiceAccount's ``policyArns``."""
        account = args.scheduling.service_account
        return TrainingIdentity(
            training_identity_child_name(name),
            TrainingIdentityArgs(
                cluster=self.cluster.ref,
                namespaces=[ns.name for ns in args.scheduling.namespaces],
                service_account=account.name,
                s3_buckets=list(args.s3_buckets),
                policy_arns=list(account.policy_arns),
                tags=tags,
                teams={team.name: list(team.namespaces) for team in args.scheduling.teams},
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _training_storage(
        self, name: str, args: GpuTrainingPlatformArgs, scheduling: SchedulingPolicies, lustre: LustreStorage
    ) -> TrainingStorage:
        """The file system's volume and claim in each training namespace, once the namespaces and the
        CSI driver exist."""
        return TrainingStorage(
            f"{name}-training-storage",
            TrainingStorageArgs(
                volume=lustre.volume,
                namespaces=[ns.name for ns in args.scheduling.namespaces],
                depends_on=[scheduling, lustre.csi_driver],
                teams={team.name: list(team.namespaces) for team in args.scheduling.teams},
                team_ids={team.name: team_gid(team) for team in args.scheduling.teams},
            ),
            opts=pulumi.ResourceOptions(parent=self, providers={"kubernetes": self.cluster.ref.provider}),
        )
