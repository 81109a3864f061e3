"""The whole stack's arguments and the rules that span its sections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from pydantic import field_validator, model_validator

from ..facts import aws_enums
from .access import S3BucketConfig, unique_bucket_names
from .addon_settings import (
    GpuOperatorConfig,
    TopologyLabelerConfig,
    validate_gpu_node_os,
    validate_gpu_operator,
    validate_topology_labeler,
)
from .base import NVIDIA_AMI_TYPES, _enum_error, _Model, validate_tags
from .chart_settings import ChartsConfig
from .image_references import ImagesConfig
from .problems import Problem, _collector
from .cluster_settings import ClusterConfig, SystemNodeGroupConfig, validate_admin_principals, validate_cluster_endpoint
from .inputs import InputTags
from .health_settings import HealthGateConfig, NodeMonitoringConfig, PreflightConfig, validate_health_gate
from .in_cluster_settings import InClusterConfig
from .network_settings import NetworkConfig, validate_network
from .karpenter_settings import _KARPENTER_RESTRICTED_TAG, KarpenterConfig, validate_karpenter
from .pools import GpuNodeGroupConfig, _check_sizes, validate_gpu_node_group
from .job_api_settings import JobSetConfig, TrainerConfig
from .kueue_settings import KueueConfig
from .multikueue import MultiKueueFleetConfig, validate_multikueue
from .monitoring import MonitoringConfig
from .scheduling import SchedulingConfig, SmokeTestConfig
from .storage_settings import StorageConfig, validate_storage
from .verify import VerifyConfig


class GpuTrainingPlatformArgs(_Model):
    """Everything one stack builds. Top-level keys live in the project's config namespace."""

    region: str
    """AWS region, read from the stack's `aws:region` (required)."""
    cluster: ClusterConfig
    """The EKS cluster (required)."""
    network: NetworkConfig
    """The VPC and private subnets: created by the stack or adopted (required)."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """The system node group, whose `role=system` nodes the controllers run on. Default: two m7i.xlarge nodes for a created cluster; none for an adopted one or with `inCluster` (give one to add it, or with `inCluster` to place the controllers on the nodes it describes)."""
    gpu_node_groups: list[GpuNodeGroupConfig] = []
    """GPU training pools (managed node groups). Default: none."""
    gpu_operator: GpuOperatorConfig = GpuOperatorConfig()
    """The NVIDIA GPU Operator. Default: chart v26.7.0, no ServiceMonitor."""
    topology_labeler: TopologyLabelerConfig = TopologyLabelerConfig()
    """The topology labeler DaemonSet on GPU nodes. Default: enabled, image built and pushed to ECR."""
    karpenter: KarpenterConfig = KarpenterConfig()
    """Karpenter and its GPU pools. Default: off."""
    kueue: KueueConfig = KueueConfig()
    """Kueue: all-or-nothing, topology-aware admission of training jobs. Default: off."""
    job_set: JobSetConfig = JobSetConfig()
    """The JobSet controller, which runs `kind: JobSet` and `kind: TrainJob` training apps. Default: installed when an app has either kind, chart 0.12.0."""
    trainer: TrainerConfig = TrainerConfig()
    """The Kubeflow Trainer controller, which runs `kind: TrainJob` training apps. Default: installed when an app has that kind, chart 2.3.0."""
    scheduling: SchedulingConfig = SchedulingConfig()
    """Priority classes, training namespaces with GPU quotas, training apps. Default: the seed's classes and a `training` namespace."""
    storage: StorageConfig = StorageConfig()
    """FSx for Lustre and the GPU nodes' instance-store RAID0. Default: no FSx, RAID0 on."""
    smoke_test: SmokeTestConfig = SmokeTestConfig()
    """The nvidia-smi smoke test. Default: off."""
    node_monitoring: NodeMonitoringConfig = NodeMonitoringConfig()
    """The EKS node monitoring agent add-on, whose node conditions drive node auto repair. Default: installed."""
    health_gate: HealthGateConfig = HealthGateConfig()
    """The health gate: GPU nodes join with a startup taint and get work only once their checks pass; a node whose GPUs fail is taken out of its jobs. Default: off."""
    preflight: PreflightConfig = PreflightConfig()
    """DCGM diagnostics and the NCCL all-reduce test on the GPU pools, awaited by `pulumi up`. Default: off."""
    verify: VerifyConfig = VerifyConfig()
    """Read-only access for `eks-gpu-training-verify` (a ClusterRole bound to a group). Default: none."""
    monitoring: MonitoringConfig = MonitoringConfig()
    """The cluster's monitoring namespace, the only one whose pods reach the controllers' metrics. Default: `monitoring`."""
    s3_buckets: list[S3BucketConfig] = []
    """S3 buckets of the stack's training data and checkpoints, named once: training pods get least-privilege access to exactly these through the training ServiceAccount's EKS Pod Identity role. Default: none."""
    tags: InputTags = {}
    """Tags added to every AWS resource; in a program a value, or the whole map (cost tags read from another stack), may be an Output. Default: none."""
    charts: ChartsConfig = ChartsConfig()
    """Where the Helm releases' charts come from. Default: their upstream repositories."""
    images: ImagesConfig = ImagesConfig()
    """Where the nodes pull the stack's images from: a mirror per source registry. Default: each image's own registry."""
    in_cluster: InClusterConfig = InClusterConfig()
    """Deploy only the stack's in-cluster half to the cluster a kubeconfig reaches, creating nothing in AWS (`GpuTrainingInCluster`); the other settings still describe the cluster and its pools, which another program made. Default: off (the whole stack)."""
    multi_kueue: MultiKueueFleetConfig = MultiKueueFleetConfig()
    """MultiKueue: dispatch this stack's jobs to the worker clusters it names (`manager`), or accept jobs from a manager (`worker`); docs/fleet.md. Default: neither."""

    @model_validator(mode="before")
    @classmethod
    def _foreign_cluster_keeps_its_own_nodes(cls, data: Any) -> Any:
        """An adopted cluster, and the cluster the in-cluster half is deployed to, already run nodes
        for their controllers: neither gets a system node group unless one is given. Controllers go
        on nodes labelled ``role=system`` only when a system node group is described (the whole
        stack's makes them); a cluster made elsewhere has no such label unless its maker set it, and
        a controller selecting it would stay Pending there."""
        if isinstance(data, dict) and "systemNodeGroup" not in data and "system_node_group" not in data:
            cluster = data.get("cluster")
            create = cluster.get("create", True) if isinstance(cluster, dict) else getattr(cluster, "create", True)
            in_cluster = data.get("inCluster", data.get("in_cluster"))
            in_cluster_enabled = (
                in_cluster.get("enabled", False) if isinstance(in_cluster, dict) else getattr(in_cluster, "enabled", False)
            )
            if create is False or in_cluster_enabled is True:
                return {**data, "system_node_group": {"enabled": False}}
        return data

    @field_validator("s3_buckets")
    @classmethod
    def _unique_buckets(cls, value: list[S3BucketConfig]) -> list[S3BucketConfig]:
        return unique_bucket_names(value)

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value not in aws_enums.aws_regions():
            raise _enum_error(value, aws_enums.aws_regions(), "an AWS region", "botocore endpoints")
        return value


def gpu_pool_zones(args: GpuTrainingPlatformArgs) -> list[Optional[str]]:
    """The AZ of every GPU pool, managed and Karpenter's (None for a pool without one)."""
    pools = list(args.gpu_node_groups) + (list(args.karpenter.gpu_node_pools) if args.karpenter.enabled else [])
    return [pool.availability_zone for pool in pools]


def gpu_pool_ami_types(args: GpuTrainingPlatformArgs) -> dict[str, str]:
    """The AMI type of every GPU pool, by the key path that sets it. Every kind of GPU pool the
    platform runs belongs here, since the GPU Operator serves them all."""
    managed = {f"gpuNodeGroups[{i}].amiType": pool.ami_type for i, pool in enumerate(args.gpu_node_groups)}
    # A Karpenter pool's EC2NodeClass selects the AL2023 alias; for NVIDIA instance types Karpenter
    # resolves it to the AL2023 NVIDIA AMI, the same node OS as AL2023_x86_64_NVIDIA.
    karpenter = {
        f"karpenter.gpuNodePools[{i}]": "AL2023_x86_64_NVIDIA"
        for i, _ in enumerate(args.karpenter.gpu_node_pools if args.karpenter.enabled else [])
    }
    return {**managed, **karpenter}


def validate_platform(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Rules of the whole stack that involve more than one key, below the scheduling layer (the
    scheduling rules build on the workload templates; ``platform.validate_stack`` adds them)."""
    problems: list[Problem] = []
    problems.extend(validate_network(args.network, args.region, args.cluster.create))
    problems.extend(validate_cluster_endpoint(args.cluster))

    system = args.system_node_group
    if system.enabled:
        system_problems, size_problem = _collector("systemNodeGroup")
        _check_sizes(system.min_size, system.desired_size, system.max_size, size_problem)
        problems.extend(system_problems)
        if system.ami_type in NVIDIA_AMI_TYPES or "NVIDIA" in system.ami_type or "NEURON" in system.ami_type:
            problems.append(Problem("systemNodeGroup.amiType", f"'{system.ami_type}' is an accelerator AMI; system nodes use a STANDARD or Bottlerocket AMI"))

    if args.cluster.create:
        releases = [("systemNodeGroup", system.ami_type, system.release_version)] + [
            (f"gpuNodeGroups[{i}]", pool.ami_type, pool.release_version) for i, pool in enumerate(args.gpu_node_groups)
        ]
        for path, ami_type, release in releases:
            # Amazon Linux release versions start with the Kubernetes version they are built for
            # (1.34.2-20251120); EKS refuses one of another minor version.
            if release and ami_type.startswith("AL2023") and not release.startswith(f"{args.cluster.kubernetes_version}."):
                problems.append(
                    Problem(
                        f"{path}.releaseVersion",
                        f"'{release}' is an AMI for another Kubernetes version than cluster.kubernetesVersion "
                        f"{args.cluster.kubernetes_version}; use a {args.cluster.kubernetes_version}.x release",
                    )
                )

    names = [pool.name for pool in args.gpu_node_groups]
    for i, pool in enumerate(args.gpu_node_groups):
        path = f"gpuNodeGroups[{i}]"
        if names.index(pool.name) != i:
            problems.append(Problem(f"{path}.name", f"'{pool.name}' is used by gpuNodeGroups[{names.index(pool.name)}] too"))
        problems.extend(validate_gpu_node_group(pool, args.network, path, instance_store_raid0=args.storage.instance_store == "raid0"))
    problems.extend(validate_gpu_node_os(gpu_pool_ami_types(args)))
    problems.extend(validate_gpu_operator(args.gpu_operator))
    problems.extend(validate_topology_labeler(args.topology_labeler, "topologyLabeler"))
    problems.extend(validate_health_gate(args.health_gate))
    problems.extend(validate_multikueue(args.multi_kueue, kueue_enabled=args.kueue.enabled))
    problems.extend(validate_karpenter(args.karpenter, args.network, instance_store_raid0=args.storage.instance_store == "raid0",
                                       protect=args.cluster.protect))
    problems.extend(validate_storage(args.storage, args.network, gpu_pool_zones(args), args.s3_buckets, protect=args.cluster.protect))

    problems.extend(validate_tags(args.tags))
    # An Output of a whole map has no keys before deployment: AWS checks them as it tags.
    for key in args.tags if isinstance(args.tags, Mapping) else ():
        if args.karpenter.enabled and _KARPENTER_RESTRICTED_TAG.match(key):
            problems.append(
                Problem(f"tags.{key}", "is a tag Karpenter sets itself and its EC2NodeClass refuses (kubernetes.io/cluster/, eks:eks-cluster-name, karpenter.*)")
            )
    if args.cluster.create and not args.in_cluster.enabled and not system.enabled:
        problems.append(
            Problem(
                "systemNodeGroup.enabled",
                "is false on a cluster this stack creates: every other node is a tainted GPU node, so Karpenter, "
                "the GPU Operator's operator and CoreDNS would have nowhere to run; keep the system node group "
                "(turning it off is for adopted clusters that run their controllers elsewhere)",
            )
        )
    problems.extend(validate_admin_principals(args.cluster))

    return problems
