"""One GPU training pool: node role, placement group, launch template, EFA security group and the
EKS managed node group (pulumi-eks) that runs tainted, labelled GPU nodes.

The launch template is built here rather than by pulumi-eks because pulumi-eks only makes a
placement group together with EFA, while a training pool wants the placement group on its own
terms (created, existing, or none) and an EFA layout for the instance types it actually runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from .cluster import ClusterRef
from ..config import (
    GPU_NODE_ROLE_LABEL,
    ConfigError,
    GpuNodeGroupConfig,
    NetworkConfig,
    pool_subnets,
    validate_gpu_node_group,
)
from ..facts.gpu_nodes import GPU_TAINT_EFFECT, GPU_TAINT_KEY, GPU_TAINT_VALUE, gpu_node_selector, gpu_taint, gpu_toleration
from .pool_network import efa_security_group, placement_group_name as pool_placement_group_name
from .iam import create_node_role, node_group_update_transform

IMDS_HOP_LIMIT = 1
"""IMDSv2 response hop limit 1 keeps instance credentials away from pods (they get AWS access
through EKS Pod Identity instead); host-network daemons still reach IMDS."""

GP3_THROUGHPUT_MIBPS = 250
"""gp3 throughput for the root volume: twice the 125 MiB/s baseline, so pulling and unpacking
multi-GB CUDA images does not stall node start-up."""


def gpu_node_labels(pool: GpuNodeGroupConfig) -> dict[str, str]:
    """Labels of a pool's nodes: ``role=gpu-training`` plus the pool's own."""
    key, value = GPU_NODE_ROLE_LABEL
    return {**pool.labels, key: value}


def image_volume_device(ami_type: str) -> str:
    """The block device that holds container images: Bottlerocket keeps them on its data volume
    (``/dev/xvdb``), Amazon Linux on the root volume (``/dev/xvda``)."""
    return "/dev/xvdb" if ami_type.startswith("BOTTLEROCKET") else "/dev/xvda"


def efa_network_interfaces(count: int, security_group_ids: list[Any]) -> list[dict[str, Any]]:
    """Launch-template network interfaces for ``count`` EFA devices, one per network card.

    The primary interface (card 0, device 0) is ``efa`` (EFA with IP networking); every other card
    gets an ``efa-only`` interface at device index 0, as AWS recommends for each additional network
    card (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html). EFA-only interfaces
    carry RDMA traffic without taking a VPC IP address each.
    """
    return [
        {
            "network_card_index": card,
            "device_index": 0,
            "interface_type": "efa" if card == 0 else "efa-only",
            "delete_on_termination": "true",
            "security_groups": security_group_ids,
        }
        for card in range(count)
    ]


def capacity_options(pool: GpuNodeGroupConfig) -> dict[str, Any]:
    """Launch-template settings that target the pool's capacity reservation, if any."""
    if pool.capacity_reservation_id is None:
        return {}
    options: dict[str, Any] = {
        "capacity_reservation_specification": {
            "capacity_reservation_target": {"capacity_reservation_id": pool.capacity_reservation_id}
        }
    }
    if pool.capacity_type == "CAPACITY_BLOCK":
        # EKS takes a Capacity Block node group only from a launch template that names the block's
        # market, the reservation and the instance type (docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html).
        options["instance_market_options"] = {"market_type": "capacity-block"}
        options["instance_type"] = pool.instance_types[0]
    return options


def node_group_instance_types(pool: GpuNodeGroupConfig) -> Optional[list[str]]:
    """Instance types the node group itself names: none when the launch template names the type
    (a Capacity Block), since EKS refuses a type in both."""
    return None if pool.capacity_type == "CAPACITY_BLOCK" else list(pool.instance_types)


@dataclass
class GpuNodeGroupArgs:
    """Arguments of ``GpuNodeGroup``."""

    cluster: ClusterRef
    """The cluster the nodes join."""
    pool: GpuNodeGroupConfig
    """The pool's settings (instance types, capacity, placement, EFA, sizes, labels)."""
    network: NetworkConfig
    """The cluster's network; the pool takes its subnets from it."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags for every AWS resource. Default: none."""


class GpuNodeGroup(pulumi.ComponentResource):
    """A tainted GPU managed node group in a cluster placement group, with EFA where it applies."""

    node_group_name: pulumi.Output[str]
    """EKS node group name (the pool name)."""
    placement_group_name: pulumi.Output[Optional[str]]
    """Name of the pool's placement group; None without one."""
    efa_interfaces: int
    """EFA interfaces per node; 0 when EFA is off."""

    def __init__(self, name: str, args: GpuNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None):
        pool, ref = args.pool, args.cluster
        problems = validate_gpu_node_group(pool, args.network, path=f"GpuNodeGroup({name})")
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:GpuNodeGroup", name, None, opts)
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        role = create_node_role(name, ref.partition, tags, parent=self, ssm_access=ref.node_ssm_access)

        placement_group_name = pool_placement_group_name(
            name, pool.placement_group, f"{ref.name}-{pool.name}", tags, parent=self
        )

        self.efa_interfaces = pool.efa_interfaces
        network_settings: dict[str, Any] = {}
        if self.efa_interfaces:
            efa_group = efa_security_group(name, ref, tags, parent=self)
            network_settings["network_interfaces"] = efa_network_interfaces(
                self.efa_interfaces, [ref.cluster_security_group_id, efa_group.id]
            )

        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-launch-template",
            description=f"GPU training pool {pool.name} of EKS cluster {ref.name}",
            block_device_mappings=[
                {
                    "device_name": image_volume_device(pool.ami_type),
                    "ebs": {
                        "volume_size": pool.root_volume_size_gib,
                        "volume_type": "gp3",
                        "throughput": GP3_THROUGHPUT_MIBPS,
                        "encrypted": "true",
                        "delete_on_termination": "true",
                    },
                }
            ],
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                "http_put_response_hop_limit": IMDS_HOP_LIMIT,
            },
            placement={"group_name": placement_group_name} if placement_group_name is not None else None,
            tag_specifications=[
                {"resource_type": "instance", "tags": {**tags, "Name": f"{ref.name}-{pool.name}"}},
                {"resource_type": "volume", "tags": tags},
            ],
            update_default_version=True,
            tags=tags,
            **network_settings,
            **capacity_options(pool),
            opts=child,
        )

        self.node_group = eks.ManagedNodeGroup(
            f"{name}-node-group",
            eks.ManagedNodeGroupArgs(
                cluster=ref.node_group_cluster,
                cluster_name=ref.name,
                node_group_name=pool.name,
                node_role_arn=role.arn,
                subnet_ids=[s.id for s in pool_subnets(pool, args.network)],
                instance_types=node_group_instance_types(pool),
                ami_type=pool.ami_type,
                capacity_type=pool.capacity_type,
                labels=gpu_node_labels(pool),
                taints=[aws.eks.NodeGroupTaintArgs(**gpu_taint())],
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=pool.min_size, desired_size=pool.initial_size, max_size=pool.max_size
                ),
                launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                    id=launch_template.id, version=launch_template.latest_version.apply(str)
                ),
                # An autoscaler (or a person) owns the node count after creation; `pulumi up` must not reset it.
                ignore_scaling_changes=True,
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(
                parent=self, transforms=[node_group_update_transform(pool.update_max_unavailable)]
            ),
        )

        self.node_group_name = pulumi.Output.from_input(pool.name)
        self.placement_group_name = pulumi.Output.from_input(placement_group_name)
        self.register_outputs(
            {"nodeGroupName": self.node_group_name, "placementGroupName": self.placement_group_name}
        )
