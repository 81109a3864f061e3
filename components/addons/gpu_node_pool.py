"""One Karpenter GPU pool: an EC2NodeClass and a NodePool, plus the AWS objects they select.

Karpenter selects a placement group but never creates one, so the pool creates its cluster
placement group here (or uses an existing one by name) and the EC2NodeClass selects it; the same
goes for the EFA security group. The specs are built by plain functions (``ec2_node_class_spec``,
``node_pool_spec``) that the tests check against the CRD schemas of each supported Karpenter
version; the component only wires them to Kubernetes custom resources that wait for the Karpenter
release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..config.base import Tags, tag_map
from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..aws.node_config import node_config_user_data
from ..config import (
    ConfigError,
    Problem,
    KarpenterConfig,
    KarpenterGpuNodePoolConfig,
    NetworkConfig,
    pool_subnets,
    subnet_problems,
    validate_karpenter_gpu_node_pool,
    validate_tags,
)
from ..aws.pool_network import efa_security_group, placement_group_name as pool_placement_group_name, pool_network_field, pool_network_names, pool_network_of
from ..facts.aws_names import PhysicalName
from ..aws.node_launch import IMDS_HOP_LIMIT
from ..config.image_pull import GP3_THROUGHPUT_MIBPS
from ..facts.gpu_nodes import GPU_TAINT_KEY, GPU_TAINT_VALUE, gpu_node_selector, karpenter_startup_taint
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider

EC2_NODE_CLASS_API_VERSION = "karpenter.k8s.aws/v1"
"""EC2NodeClass API version served by Karpenter 1.14 (karpenter.k8s.aws_ec2nodeclasses.yaml)."""

NODE_POOL_API_VERSION = "karpenter.sh/v1"
"""NodePool API version served by Karpenter 1.14 (karpenter.sh_nodepools.yaml)."""

AL2023_AMI_ALIAS = "al2023@v20260903"
"""The EKS-optimized AL2023 release Karpenter's nodes run (awslabs/amazon-eks-ami v20260903;
Karpenter picks its NVIDIA variant). Pinned, not ``al2023@latest``, which would drift, and so
replace, every node at each AMI release: bump it deliberately."""

ROOT_DEVICE = "/dev/xvda"
"""The AL2023 root device, which also holds the container images."""

CONSOLIDATION_POLICY = "WhenEmpty"
"""Training nodes are consolidated only once empty: never drained to repack a running job."""


def karpenter_gpu_taint() -> dict[str, str]:
    """The GPU taint in the Kubernetes spelling a NodePool uses (``NoSchedule``)."""
    return {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}


def karpenter_efa_network_interfaces(count: int) -> list[dict[str, Any]]:
    """``EC2NodeClass.spec.networkInterfaces`` for ``count`` EFA devices, one per network card.

    Karpenter's schema allows only ``interface`` and ``efa-only``, and requires an ``interface``
    at card 0 / device 0. The layout is AWS's recommendation for instances with several network
    cards (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): the primary ENA
    interface at card 0 / device 0, an ``efa-only`` interface at card 0 / device 1, and on each
    further card an ``efa-only`` interface at device 0. EFA-only interfaces take no VPC IP address.
    """
    if count == 0:
        return []
    primary = {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    return [primary] + [
        {"networkCardIndex": card, "deviceIndex": 1 if card == 0 else 0, "interfaceType": "efa-only"} for card in range(count)
    ]


def ec2_node_class_spec(
    pool: KarpenterGpuNodePoolConfig,
    *,
    node_role_name: pulumi.Input[str],
    subnet_ids: Sequence[pulumi.Input[str]],
    security_group_ids: Sequence[pulumi.Input[str]],
    placement_group_name: Optional[pulumi.Input[str]] = None,
    tags: Optional[Mapping[str, str]] = None,
    instance_store_raid0: bool = False,
) -> dict[str, Any]:
    """The EC2NodeClass spec of a pool: pinned AL2023 AMI, the node role (Karpenter makes its
    instance profile), the pool's subnets and security groups by ID, an encrypted gp3 root volume,
    IMDSv2 only, and the placement group, EFA layout and capacity reservations when the pool has them.
    With ``instance_store_raid0`` Karpenter has nodeadm make one RAID0 array of the instance-store
    disks for kubelet and containerd, and counts its size as the node's ephemeral storage
    (Karpenter 1.14 docs-nodeclasses.md, ``spec.instanceStorePolicy``). A pool with
    ``fast_image_pull`` gets ``spec.userData``: a MIME document whose NodeConfig turns on nodeadm's
    ``FastImagePull`` gate (Karpenter merges it with the NodeConfig it generates, docs-nodeclasses.md
    "AL2023"); on the array, nodeadm puts the SOCI snapshotter's data there too."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": AL2023_AMI_ALIAS}],
        "role": node_role_name,
        "subnetSelectorTerms": [{"id": subnet_id} for subnet_id in subnet_ids],
        "securityGroupSelectorTerms": [{"id": group_id} for group_id in security_group_ids],
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "ebs": {
                    "volumeSize": f"{pool.root_volume_size_gib}Gi",
                    "volumeType": "gp3",
                    "throughput": GP3_THROUGHPUT_MIBPS,
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "httpTokens": "required",
        },
    }
    if placement_group_name is not None:
        spec["placementGroupSelector"] = {"name": placement_group_name}
    if pool.efa_interfaces:
        spec["networkInterfaces"] = karpenter_efa_network_interfaces(pool.efa_interfaces)
    if pool.capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": cr} for cr in pool.capacity_reservation_ids]
    if instance_store_raid0:
        spec["instanceStorePolicy"] = "RAID0"
    if pool.fast_image_pull:
        # Only the feature gate: Karpenter writes the cluster settings and, from instanceStorePolicy,
        # the RAID0 array into the NodeConfig it generates beside this one.
        spec["userData"] = node_config_user_data(local_storage_strategy=None, fast_image_pull=True)
    if tags:
        spec["tags"] = dict(tags)
    return spec


def node_pool_spec(pool: KarpenterGpuNodePoolConfig, *, node_class_name: str, zones: Sequence[str],
                   health_gate: bool = False) -> dict[str, Any]:
    """The NodePool spec of a pool: the seed's GPU NodePool (instance types, on-demand or reserved
    capacity, GPU taint, ``role=gpu-training``, a GPU limit) with disruption tuned for training.
    With ``health_gate`` its nodes join with the gate's startup taint as a Karpenter startup taint:
    Karpenter launches nodes for pods that do not tolerate it, and counts a node initialized only
    once it is gone (docs-nodepools.md, ``startupTaints``). It is part of the NodeClaim template
    Karpenter hashes, so adding or removing it makes the pool's running nodes drifted
    (docs-disruption.md, "Drift"), which the pools' default budget never replaces while they run."""
    disruption = pool.disruption
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(pool.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(pool.capacity_types)},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": sorted(zones)},
    ]
    return {
        "template": {
            "metadata": {"labels": {**pool.labels, **gpu_node_selector()}},
            "spec": {
                "nodeClassRef": {"group": EC2_NODE_CLASS_API_VERSION.split("/")[0], "kind": "EC2NodeClass", "name": node_class_name},
                "requirements": requirements,
                "taints": [karpenter_gpu_taint()],
                **({"startupTaints": [karpenter_startup_taint()]} if health_gate else {}),
                "expireAfter": disruption.expire_after,
            },
        },
        "limits": {"nvidia.com/gpu": pool.gpu_limit},
        "disruption": {
            "consolidationPolicy": CONSOLIDATION_POLICY,
            "consolidateAfter": disruption.consolidate_after,
            "budgets": [budget.model_dump(exclude_none=True) for budget in disruption.budgets],
        },
    }


@documented_args
@dataclass
class GpuNodePoolArgs:
    """Arguments of ``GpuNodePool``."""

    cluster: ClusterInput
    """The cluster the nodes join: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    pool: KarpenterGpuNodePoolConfig
    """The pool's settings (instance types, capacity, GPU limit, placement, EFA, disruption)."""
    network: Optional[NetworkConfig] = field(default=None, kw_only=True)
    """The network, whose subnets the pool chooses from (a dict may leave out ``vpcId``). Default: the cluster ref's subnets."""
    node_role_name: pulumi.Input[str]
    """The Karpenter node role (``Karpenter.node_role_name``)."""
    karpenter_release: pulumi.Resource
    """The Karpenter Helm release; the custom resources wait for it (and so for its CRDs)."""
    tags: Tags = field(default_factory=dict)
    """Tags for the pool's AWS resources (placement group, EFA security group; values, or the whole map, may be Outputs); never the nodes Karpenter launches, whose EC2NodeClass a tag change would drift. Default: none."""
    instance_store_raid0: bool = True
    """Make the nodes' instance-store NVMe one RAID0 array for ephemeral storage. Default: true."""
    protect: bool = False
    """Protect the placement group the pool creates from deletion, unless ``retain_on_removal`` keeps it in AWS anyway (protected and retained, it could never leave the stack). Default: false."""
    health_gate: bool = False
    """Nodes join with the health gate's startup taint (the NodePool's ``startupTaints``), which a ``HealthGate`` lifts once they pass their checks. Default: false."""
    retain_on_removal: bool = KarpenterConfig.model_fields["retain_on_removal"].default
    """Leave the EC2NodeClass and NodePool (and so the pool's nodes) in the cluster when the pool is
    removed from the program (``karpenter.retainOnRemoval``). Default: true."""

    def __post_init__(self) -> None:
        problems = cluster_field(self)
        check_model_fields(self, problems + pool_network_field(self))

def karpenter_placement_group_name(cluster_name: str, pool: KarpenterGpuNodePoolConfig) -> str:
    """Name of the placement group a Karpenter pool with ``placementGroup.mode: create`` gets;
    "karpenter" keeps it apart from a managed node group's group of the same pool name."""
    return f"{cluster_name}-karpenter-{pool.name}"


def gpu_node_pool_physical_names(name: str, pool: KarpenterGpuNodePoolConfig, cluster_name: Optional[str]) -> list[PhysicalName]:
    """Every AWS name ``GpuNodePool(name, ...)`` generates (its Kubernetes objects are named after the
    pool); a ``cluster_name`` of None, an Output's, leaves out the names made from it."""
    group_name = karpenter_placement_group_name(cluster_name, pool) if cluster_name is not None else None
    return pool_network_names(name, pool.placement_group, group_name, pool.efa_enabled)


@documented_component(GpuNodePoolArgs)
class GpuNodePool(pulumi.ComponentResource):
    """One Karpenter GPU pool: placement group, EFA security group, EC2NodeClass and NodePool."""

    node_pool_name: pulumi.Output[str]
    """Name of the NodePool and its EC2NodeClass (the pool name)."""
    placement_group_name: pulumi.Output[Optional[str]]
    """Name of the pool's placement group; None without one."""

    def __init__(self, name: str, args: Optional[GpuNodePoolArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(GpuNodePoolArgs, "GpuNodePool", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"GpuNodePool({name})")
        pool, ref, network = args.pool, cluster_ref_of(args), pool_network_of(args)
        problems = validate_karpenter_gpu_node_pool(
            pool, network, path=f"GpuNodePool({name})", instance_store_raid0=args.instance_store_raid0
        )
        problems += validate_tags(args.tags, path=f"GpuNodePool({name}).tags")
        if pool.adopt_retained and pool.placement_group.mode == "create" and not isinstance(ref.name, str):
            problems.append(Problem(
                f"GpuNodePool({name}).pool.adoptRetained",
                "takes over the placement group by its name, made from the cluster's, which is known only at deployment "
                "here; give a ClusterRef whose name is a string, or point placementGroup at the group (mode existing)",
            ))
        if not problems:
            problems = subnet_problems(pool_subnets(pool, ref.subnets or network), f"GpuNodePool({name})")
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:GpuNodePool", name, None, opts)
        tags = tag_map(args.tags)

        # Retained pools keep their nodes, and the nodes keep what they run on: their placement group
        # and EFA security group (with its rules) stay in AWS with the NodePool and EC2NodeClass. A
        # retained group is not protected as well (`deletion_options`): the pool could not be removed.
        retain = args.retain_on_removal
        # A pool added back after a retained removal takes over what it left, by the IDs Pulumi gave
        # them (a placement group's is its name, a cluster-scoped object's its name). Pulumi imports
        # only a resource that the stack does not hold with that ID (pulumi/pulumi
        # pkg/resource/deploy/step_generator.go, continueStepsFromRefresh: `isImport`), so the
        # setting changes nothing once they are back.
        adopt = pool.adopt_retained
        # The check above already refused adoptRetained with a created group unless the name is a string.
        group_import = (karpenter_placement_group_name(ref.name, pool)
                        if adopt and pool.placement_group.mode == "create" and isinstance(ref.name, str) else None)
        placement_group_name = pool_placement_group_name(
            name, pool.placement_group, pulumi.Output.from_input(ref.name).apply(lambda cluster: karpenter_placement_group_name(cluster, pool)), tags, parent=self, region=ref.region, protect=args.protect,
            retain_on_delete=retain, import_id=group_import,
        )

        security_group_ids: list[pulumi.Input[str]] = [ref.cluster_security_group_id]
        if pool.efa_enabled:
            security_group_ids.append(efa_security_group(name, ref, tags, parent=self, retain_on_delete=retain).id)

        subnets = pool_subnets(pool, ref.subnets or network)
        # Custom resources are cluster-scoped and named after the pool, so `kubectl get nodepool` shows its name.
        # Deleting a NodePool makes Karpenter drain and terminate every node of it, running jobs
        # included; retained, a removed pool's objects stay in the cluster (Pulumi forgets them).
        def custom(*depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self, retain_on_delete=args.retain_on_removal, import_=pool.name if adopt else None,
                depends_on=list(depends_on),
            )

        node_class = k8s.apiextensions.CustomResource(
            f"{name}-node-class",
            api_version=EC2_NODE_CLASS_API_VERSION,
            kind="EC2NodeClass",
            metadata={"name": pool.name},
            spec=ec2_node_class_spec(
                pool,
                node_role_name=args.node_role_name,
                subnet_ids=[s.id for s in subnets],
                security_group_ids=security_group_ids,
                placement_group_name=placement_group_name,
                # No stack tags: Karpenter hashes the EC2NodeClass spec, tags included, and replaces
                # every node of a changed class as drifted (docs-disruption.md, "Drift"), so a cost
                # tag change would roll the pool's GPU nodes under running jobs.
                instance_store_raid0=args.instance_store_raid0,
            ),
            opts=custom(args.karpenter_release),
        )
        k8s.apiextensions.CustomResource(
            f"{name}-node-pool",
            api_version=NODE_POOL_API_VERSION,
            kind="NodePool",
            metadata={"name": pool.name},
            spec=node_pool_spec(pool, node_class_name=pool.name, zones=sorted({s.availability_zone for s in subnets}),
                                health_gate=args.health_gate),
            opts=custom(args.karpenter_release, node_class),
        )

        self.node_pool_name = pulumi.Output.from_input(pool.name)
        self.placement_group_name = pulumi.Output.from_input(placement_group_name)
        self.register_outputs({"nodePoolName": self.node_pool_name, "placementGroupName": self.placement_group_name})
