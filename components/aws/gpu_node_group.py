"""One GPU training pool: node role, placement group, launch template, EFA security group and the
EKS managed node group (``aws.eks.NodeGroup``) that runs tainted, labelled GPU nodes.

The node group is built from pulumi-aws directly rather than pulumi-eks's ManagedNodeGroup: every
setting sent to EKS (version, release version, name prefix, update strategy, node repair) is then an
ordinary input that `render` shows and a reviewer reads, with no transform applied out of sight. The
cluster's authentication mode is API, so EKS creates the access entry of a managed node group's
node role itself (docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html: "Amazon EKS
automatically creates access entries" for managed node groups); no aws-auth ConfigMap is involved.

The launch template is built here because a training pool wants the placement group on its own
terms (created, existing, or none) and an EFA layout for the instance types it actually runs.

Before it registers anything, the component reads its running node group (when the cluster name is
a string; an Output's cannot be read, and a warning says what goes unchecked) and refuses an update that would roll its nodes without ``pool.forceUpdateVersion``
(``node_group_rolls``): a launch-template change, a node group behind the ref's version, a new
pinned release. ``GpuTrainingPlatform`` makes the same check for all its pools at once, adopted
clusters' live versions included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from .eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import (
    GPU_NODE_ROLE_LABEL,
    ConfigError,
    GpuNodeGroupConfig,
    NetworkConfig,
    Problem,
    pool_subnets,
    subnet_problems,
    validate_gpu_node_group,
    validate_tags,
)
from ..config import node_repair_settings
from ..facts.gpu_nodes import GPU_POOL_KEY, gpu_taint, startup_taint
from .iam import create_node_role, node_role_resource_name
from .node_group_rolls import PlannedNodeGroup, RunningNodeGroup, roll_problem, roll_reasons, running_state
from .node_group_sizes import desired_size_for, running_node_group, running_size, warn_unread
from .region import aws_provider_of
from ..facts.aws_names import PhysicalName
from .node_launch import launch_template_data, launch_template_ref, node_launch_template
from .pool_network import (
    efa_security_group,
    launched_placement_group,
    placement_group_name as pool_placement_group_name,
    pool_network_field,
    pool_network_names,
    pool_network_of,
)
from .node_config import node_config_launch_settings
from ..config.arguments import check_model_fields
from ..config.inputs import is_unknown, joined
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider


UNREAD_NODE_GROUP = (
    "neither is a roll of its running nodes refused without pool.forceUpdateVersion nor is its running desired size "
    "sent: an update that changes minSize or maxSize sends the size in Pulumi's state, which sets a pool resized since "
    "back to it"
)
"""What a pool whose cluster name is an Output goes without (``node_group_sizes.warn_unread``)."""


def gpu_node_labels(pool: GpuNodeGroupConfig) -> pulumi.Input[Mapping[str, pulumi.Input[str]]]:
    """Labels of a pool's nodes: ``role=gpu-training`` and the pool's name (``GPU_POOL_KEY``, which
    Kueue's ResourceFlavor selects the pool by), plus the pool's own (an Output of them, when a
    program passed an Output)."""
    key, value = GPU_NODE_ROLE_LABEL
    if is_unknown(pool.labels):
        return pool.labels.apply(lambda labels: {**(labels or {}), GPU_POOL_KEY: pool.name, key: value})
    return {**pool.labels, GPU_POOL_KEY: pool.name, key: value}


def node_group_taints(health_gate: bool) -> list[dict[str, str]]:
    """The node group's taints (EKS spelling): the GPU taint, and with the health gate its startup
    taint. Taints are an UpdateNodegroupConfig field, so turning the gate on or off changes them in
    place and rolls no node; EKS never puts back a taint that was removed from a node (the gate
    lifts it), "even if the taints are specified in the managed node group configuration"
    (docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html)."""
    return [gpu_taint(), *([startup_taint()] if health_gate else [])]


def node_group_name_prefix(pool_name: str) -> str:
    """Prefix of the pool's EKS node group name; EKS gets the prefix plus a unique suffix, so a
    replacement group is created before the old one is deleted instead of clashing with its name."""
    return f"{pool_name}-"


def update_settings(pool: GpuNodeGroupConfig) -> dict[str, Any]:
    """The node group's ``updateConfig``: how many nodes a roll takes down at once, and the
    strategy. MINIMAL "terminates the old instances before launching the new instances"; the EKS
    API calls it "useful in scenarios where you are constrained to resources or costs (for example,
    with hardware accelerators such as GPUs)": a surge p5 rarely exists in a full reservation
    (docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html)."""
    return {"max_unavailable": pool.update_max_unavailable, "update_strategy": pool.update_strategy}


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


def replaces_old_first(pool: GpuNodeGroupConfig) -> bool:
    """Whether replacing the pool's node group deletes the old group first: for a pool that launches
    into a capacity reservation (ODCR or Capacity Block), whose nodes the reservation holds. Any
    other pool gets its new group first, so its capacity is there before the old nodes go."""
    return pool.capacity_reservation_id is not None


def pool_protected(pool: GpuNodeGroupConfig, default: bool) -> bool:
    """Whether the pool's node group and created placement group are protected: the pool's own
    ``protect`` when it sets one, else ``default`` (the platform's ``cluster.protect``). A pool set
    false can be replaced (a Capacity Block switch) while the cluster and the file system stay
    protected."""
    return default if pool.protect is None else pool.protect


def placement_group_physical_name(cluster_name: str, pool: GpuNodeGroupConfig) -> str:
    """Name of the placement group a pool with ``placementGroup.mode: create`` gets."""
    return f"{cluster_name}-{pool.name}"


def gpu_launch_template_data(
    pool: GpuNodeGroupConfig,
    cluster_name: pulumi.Input[str],
    instance_store_raid0: bool,
    placement_group_name: Optional[pulumi.Input[str]],
    security_group_ids: list[Any],
) -> dict[str, Any]:
    """The pool's launch template data (``node_launch.launch_template_data``): root volume, EFA
    interfaces with ``security_group_ids``, placement group, instance tags, capacity reservation and
    the nodeadm user data. ``GpuNodeGroup`` creates the template from it and the roll check compares
    it with the running template, so both read the same settings."""
    network_settings: dict[str, Any] = {}
    if pool.efa_interfaces:
        network_settings["network_interfaces"] = efa_network_interfaces(pool.efa_interfaces, security_group_ids)
    return launch_template_data(
        description=joined(f"GPU training pool {pool.name} of EKS cluster ", cluster_name),
        ami_type=pool.ami_type,
        volume_size_gib=pool.root_volume_size_gib,
        instance_name=joined(cluster_name, f"-{pool.name}"),
        instance_tags=pool.instance_tags,
        placement_group_name=placement_group_name,
        **network_settings,
        **capacity_options(pool),
        **node_config_launch_settings(pool.ami_type, instance_store_raid0, pool.fast_image_pull),
    )


def planned_launch_template(pool: GpuNodeGroupConfig, cluster_name: str, instance_store_raid0: bool) -> dict[str, Any]:
    """``gpu_launch_template_data`` as far as it is known before deployment, for the roll check: the
    placement group by the name the pool gives it, and no security groups (their IDs are Outputs)."""
    placement = launched_placement_group(pool.placement_group, placement_group_physical_name(cluster_name, pool))
    return gpu_launch_template_data(pool, cluster_name, instance_store_raid0, placement, security_group_ids=[])


def pool_roll_problems(
    name: str, pool: GpuNodeGroupConfig, cluster_name: str, kubernetes_version: pulumi.Input[str], instance_store_raid0: bool,
    running: RunningNodeGroup,
) -> list[Problem]:
    """The refusal of ``GpuNodeGroup(name)`` rolling its running node group (``node_group_rolls``)
    without ``pool.forceUpdateVersion``, in the cluster ``cluster_name``. The version is compared
    only when the ref holds it as a plain value (``EksCluster.ref`` of a created cluster); an adopted
    cluster's or a ``pulumi_eks.Cluster``'s is an Output, which ``GpuTrainingPlatform`` compares with
    the cluster it reads instead."""
    version = kubernetes_version if isinstance(kubernetes_version, str) else None
    planned = PlannedNodeGroup(
        version=version,
        version_source=f"the cluster ref's kubernetes_version is {version}",
        release_version=pool.release_version,
        launch_template=planned_launch_template(pool, cluster_name, instance_store_raid0),
    )
    reasons = roll_reasons(planned, running)
    return [roll_problem(f"GpuNodeGroup({name}).pool.forceUpdateVersion", reasons)] if reasons else []


def launch_template_resource_name(name: str) -> str:
    """Logical name of a pool's launch template (auto-named by Pulumi)."""
    return f"{name}-launch-template"


def gpu_node_group_physical_names(name: str, pool: GpuNodeGroupConfig, cluster_name: Optional[str]) -> list[PhysicalName]:
    """Every AWS name ``GpuNodeGroup(name, ...)`` generates for the pool, from the functions it names them with
    (a ``cluster_name`` of None, an Output's, leaves out the names made from it)."""
    return [
        PhysicalName("aws:iam/role:Role", node_role_resource_name(name), autonamed=True),
        PhysicalName("aws:ec2/launchTemplate:LaunchTemplate", launch_template_resource_name(name), autonamed=True),
        PhysicalName("aws:eks/nodeGroup:NodeGroup", node_group_name_prefix(pool.name), autonamed=False, prefix=True),
        *pool_network_names(
            name,
            pool.placement_group,
            placement_group_physical_name(cluster_name, pool) if cluster_name is not None else None,
            pool.efa_interfaces > 0,
        ),
    ]


@documented_args
@dataclass
class GpuNodeGroupArgs:
    """Arguments of ``GpuNodeGroup``."""

    cluster: ClusterInput
    """The cluster the nodes join: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    pool: GpuNodeGroupConfig
    """The pool's settings (instance types, capacity, placement, EFA, sizes, labels)."""
    network: Optional[NetworkConfig] = None
    """The cluster's network; the pool takes its subnets from it (a dict may leave out ``vpcId``). Default: the cluster ref's subnets."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs); they never reach instances (see ``pool.instance_tags``). Default: none."""
    protect: bool = False
    """Protect the node group and the placement group it creates from deletion, unless ``pool.protect`` says otherwise. Default: false."""
    instance_store_raid0: bool = True
    """Make the nodes' instance-store NVMe one RAID0 array for kubelet and containerd (AL2023 AMIs). Default: true."""
    health_gate: bool = False
    """Nodes join with the health gate's startup taint (``eks-gpu-training/unverified:NoSchedule``), which a ``HealthGate`` lifts once they pass their checks. Default: false."""

    def __post_init__(self) -> None:
        problems = cluster_field(self)
        check_model_fields(self, problems + pool_network_field(self))


@documented_component(GpuNodeGroupArgs)
class GpuNodeGroup(pulumi.ComponentResource):
    """A tainted GPU managed node group in a cluster placement group, with EFA where it applies."""

    node_group_name: pulumi.Output[str]
    """EKS node group name: the pool name, a dash and a suffix EKS-unique per node group."""
    placement_group_name: pulumi.Output[Optional[str]]
    """Name of the pool's placement group; None without one."""
    efa_interfaces: int
    """EFA interfaces per node; 0 when EFA is off."""
    node_role: aws.iam.Role
    """The nodes' IAM role: attach policies to it for the access training needs (S3, FSx)."""
    launch_template: aws.ec2.LaunchTemplate
    """The launch template of the nodes (volumes, IMDS, placement, EFA interfaces)."""
    efa_security_group: Optional[aws.ec2.SecurityGroup]
    """The security group that passes EFA traffic between the pool's nodes; None without EFA."""
    node_group: aws.eks.NodeGroup
    """The EKS managed node group."""

    def __init__(self, name: str, args: Optional[GpuNodeGroupArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(GpuNodeGroupArgs, "GpuNodeGroup", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"GpuNodeGroup({name})")
        pool, ref, network = args.pool, cluster_ref_of(args), pool_network_of(args)
        problems = validate_gpu_node_group(pool, network, path=f"GpuNodeGroup({name})", instance_store_raid0=args.instance_store_raid0)
        problems += validate_tags(args.tags, path=f"GpuNodeGroup({name}).tags")
        if not problems:
            problems = subnet_problems(pool_subnets(pool, ref.subnets or network), f"GpuNodeGroup({name})")
        running = None
        if not problems:
            # Read before registering, so a refused roll creates nothing; the provider is the one opts give.
            invoke = pulumi.InvokeOptions(parent=opts.parent if opts else None, provider=aws_provider_of(opts))
            running = running_node_group(ref.name, node_group_name_prefix(pool.name), ref.region, invoke)
            if running is not None and isinstance(ref.name, str) and not pool.force_update_version:
                problems = pool_roll_problems(
                    name, pool, ref.name, ref.kubernetes_version, args.instance_store_raid0, running_state(running, ref.region, invoke)
                )
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:GpuNodeGroup", name, None, opts)
        warn_unread(ref.name, f"GpuNodeGroup({name})", UNREAD_NODE_GROUP, self)
        tags = tag_map(args.tags)
        protect = pool_protected(pool, args.protect)

        node_role = create_node_role(name, ref.partition, tags, parent=self, ssm_access=ref.node_ssm_access)
        self.node_role = role = node_role.role

        placement_group_name = pool_placement_group_name(
            name, pool.placement_group, pulumi.Output.from_input(ref.name).apply(lambda cluster: placement_group_physical_name(cluster, pool)), tags, parent=self, region=ref.region, protect=protect
        )

        self.efa_interfaces = pool.efa_interfaces
        self.efa_security_group = None
        security_group_ids: list[Any] = []
        if self.efa_interfaces:
            self.efa_security_group = efa_group = efa_security_group(name, ref, tags, parent=self)
            security_group_ids = [ref.cluster_security_group_id, efa_group.id]

        self.launch_template = launch_template = node_launch_template(
            launch_template_resource_name(name),
            gpu_launch_template_data(pool, ref.name, args.instance_store_raid0, placement_group_name, security_group_ids),
            tags=tags,
            parent=self,
            region=ref.region,
        )

        desired_size, ignored = desired_size_for(running_size(running), pool.initial_size, pool.min_size, pool.max_size)
        # The cluster name may be a plain string, so the node group waits for a created cluster explicitly.
        self.node_group = aws.eks.NodeGroup(
            f"{name}-node-group",
            cluster_name=ref.name,
            node_group_name_prefix=node_group_name_prefix(pool.name),
            version=ref.kubernetes_version,
            release_version=pool.release_version,
            node_role_arn=role.arn,
            subnet_ids=[s.id for s in pool_subnets(pool, ref.subnets or network)],
            instance_types=node_group_instance_types(pool),
            ami_type=pool.ami_type,
            capacity_type=pool.capacity_type,
            labels=gpu_node_labels(pool),
            taints=[aws.eks.NodeGroupTaintArgs(**taint) for taint in node_group_taints(args.health_gate)],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_size, desired_size=desired_size, max_size=pool.max_size
            ),
            launch_template=launch_template_ref(launch_template),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(**update_settings(pool)),
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(**node_repair_settings(pool.node_repair)),
            force_update_version=pool.force_update_version,
            tags=tags,
            region=ref.region,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes join only with the role's policies attached (EKS user guide, "Amazon EKS node IAM role").
                depends_on=[*ref.control_plane, *node_role.policy_attachments],
                protect=protect,
                # A reserved pool's capacity is exactly its reservation, so a replacement made before the
                # old group is deleted would need the reservation twice and never get its nodes.
                delete_before_replace=replaces_old_first(pool),
                # An autoscaler (or a person) owns the node count after creation: ignored while the bounds
                # stay, the running count (inside new bounds) when they move, never the state's (node_group_sizes).
                ignore_changes=ignored,
            ),
        )

        self.node_group_name = self.node_group.node_group_name
        self.placement_group_name = pulumi.Output.from_input(placement_group_name)
        self.register_outputs(
            {
                "nodeGroupName": self.node_group_name,
                "placementGroupName": self.placement_group_name,
                "efaInterfaces": self.efa_interfaces,
                "nodeRole": self.node_role,
                "launchTemplate": self.launch_template,
                "efaSecurityGroup": self.efa_security_group,
                "nodeGroup": self.node_group,
            }
        )
