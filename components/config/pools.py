"""GPU pools: managed node groups, and the rules they share with Karpenter's GPU pools."""

from __future__ import annotations

from typing import Any, Literal, Mapping, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from ..facts.node_labels import KUBELET_LABEL_NAMESPACES, kubelet_may_set
from ..facts.catalog import FRACTIONAL_GPU_INSTANCE_TYPES, GPU_INSTANCE_TYPES, efa_interface_count, has_efa
from .gpu_sharing import GPU_SHARING_NODE_LABELS, GPU_SHARING_REFUSED, MIG_DISABLED_CONFIG
from .image_pull import check_fast_image_pull
from .base import (
    _AZ,
    _DNS_LABEL,
    _LABEL_KEY,
    _LABEL_VALUE,
    NVIDIA_AMI_TYPES,
    AmiType,
    InstanceType,
    _enum_error,
    _Model,
)
from .problems import Problem, ProblemSink, _collector
from ..facts.gpu_nodes import GPU_NODE_ROLE_LABEL, GPU_POOL_KEY
from .inputs import InputLabels, InputText, NodeCount, PositiveNodeCount, TextOrOutput, is_unknown
from .cluster_settings import RELEASE_VERSION_PATTERN
from .network_settings import NetworkConfig, SubnetId
from .node_auto_repair import NodeRepairConfig, check_node_repair
from .pool_placement import (
    PlacementGroupConfig,
    _check_placement,
    _check_reservation_placement,
    pool_subnets,
    subnet_problems as subnet_problems,
)


KARPENTER_CAPACITY_TYPES = ("on-demand", "spot", "reserved")
"""Values of Karpenter's ``karpenter.sh/capacity-type`` label (Karpenter 1.14 docs-nodepools.md,
"karpenter.sh/capacity-type"); a NodePool's requirement must spell them exactly so."""

NODE_GROUP_NAME_MAX = 63
"""Longest EKS node group name (CreateNodegroup: 1-63 characters)."""

UNIQUE_SUFFIX_LENGTH = 26
"""Characters the AWS provider appends to a name prefix (terraform-plugin-sdk ``id.PrefixedUniqueId``:
an 18-digit timestamp and an 8-digit counter); node groups are named ``<pool>-<suffix>``."""

POOL_NAME_MAX = NODE_GROUP_NAME_MAX - 1 - UNIQUE_SUFFIX_LENGTH
"""Longest managed pool name: the pool name, a dash and the suffix make the node group name."""

SPOT_REFUSAL = "a reclaimed node stops the whole distributed job"
"""Why training pools never use spot (seed: "Never use spot for training")."""


def efa_on(efa: str, instance_types: list[str]) -> bool:
    """The ``efa`` setting of a pool resolved: ``auto`` is on when every instance type has EFA."""
    if efa == "auto":
        return all(t in GPU_INSTANCE_TYPES for t in instance_types) and has_efa(instance_types)
    return efa == "enabled"


class GpuPoolConfig(_Model):
    """What every GPU pool has, managed node group or Karpenter NodePool: its instance types, where
    its nodes go (AZ, subnets, placement group), EFA, root volume and labels."""

    name: str = Field(pattern=_DNS_LABEL)
    """Pool name, a DNS label; also the name of its node group, or of its EC2NodeClass and NodePool (required)."""
    instance_types: list[InstanceType] = Field(default=["p5.48xlarge"], min_length=1)
    """EC2 instance types of the pool (NVIDIA GPU types). Default: p5.48xlarge only: one EFA layout (launch template or EC2NodeClass) serves every type, so adding p4de would cut a p5 node to p4de's 4 EFA devices (of 32), and one job would mix GPU generations."""
    availability_zone: Optional[str] = Field(default=None, pattern=_AZ)
    """The pool's single AZ; required with a placement group. Default: none (all subnets' AZs)."""
    subnet_ids: Optional[list[SubnetId]] = None
    """Subnets of the pool, among `network.subnets` (an Output must be the very one `network.subnets` holds). Default: the network's subnets in the pool's AZ (all of them without one)."""
    placement_group: PlacementGroupConfig = PlacementGroupConfig()
    """Cluster placement group of the pool, made by the stack (Karpenter only selects it). Default: a group created for the pool."""
    efa: Literal["auto", "enabled", "disabled"] = "auto"
    """EFA network interfaces: auto turns them on when every instance type has EFA. Default: auto."""
    root_volume_size_gib: int = Field(default=500, ge=100, le=16384)
    """Encrypted gp3 root volume in GiB, sized for multi-GB CUDA/PyTorch images. Default: 500."""
    labels: InputLabels = {}
    """Node labels added to `role=gpu-training`; GPU-sharing labels (`nvidia.com/mig.config`, `nvidia.com/device-plugin.config`) are refused. A program may pass an Output of the whole map to a `GpuNodeGroup` (not to the platform, which reads the labels before deployment). Default: none."""
    fast_image_pull: bool = False
    """Pull images with the SOCI snapshotter's parallel pull and unpack (nodeadm's experimental `FastImagePull` gate): large images start sooner, at a cost in CPU, memory and disk I/O. AL2023 only, and only with images on the instance-store RAID0 array (the root volume is too slow for it). Default: false."""

    @property
    def efa_enabled(self) -> bool:
        """Whether the pool's nodes get EFA interfaces."""
        return efa_on(self.efa, self.instance_types)

    @property
    def efa_interfaces(self) -> int:
        """EFA interfaces per node (0 when EFA is off, or an instance type is not in the catalog, which validation refuses)."""
        if not self.efa_enabled or not all(t in GPU_INSTANCE_TYPES for t in self.instance_types):
            return 0
        return efa_interface_count(self.instance_types)

    @property
    def gpus_per_node(self) -> int:
        """GPUs of the largest node the pool may launch (0 when an instance type is not in the catalog)."""
        if not all(t in GPU_INSTANCE_TYPES for t in self.instance_types):
            return 0
        return max(GPU_INSTANCE_TYPES[t].gpus for t in self.instance_types)


class GpuNodeGroupConfig(GpuPoolConfig):
    """One pool of GPU training nodes: an EKS managed node group with its launch template."""

    ami_type: AmiType = "AL2023_x86_64_NVIDIA"
    """EKS AMI type. Default: AL2023_x86_64_NVIDIA (driver, toolkit, fabric manager, EFA included)."""
    capacity_type: str = "ON_DEMAND"
    """ON_DEMAND or CAPACITY_BLOCK (SPOT is refused for training). Default: ON_DEMAND."""
    capacity_reservation_id: Optional[str] = Field(default=None, pattern=r"^cr-[0-9a-f]{17}$")
    """Capacity reservation (ODCR or Capacity Block) the pool launches into; required for CAPACITY_BLOCK. Default: none."""
    min_size: NodeCount = 0
    """Minimum number of nodes. Default: 0."""
    desired_size: Optional[NodeCount] = None
    """Number of nodes at creation; later the size is left to autoscalers and people, and `pulumi up` keeps the running size. Default: min size."""
    max_size: PositiveNodeCount = 2
    """Maximum number of nodes. Default: 2 (the seed's two-node training job)."""
    update_max_unavailable: int = Field(default=1, ge=1, le=100)
    """Nodes replaced at once during a node group update. Default: 1."""
    update_strategy: str = "MINIMAL"
    """EKS update strategy of a roll: MINIMAL terminates an old node before launching its replacement (no surge instance), which the EKS API suggests when hardware accelerators such as GPUs constrain capacity; DEFAULT launches first. Default: MINIMAL."""
    release_version: Optional[str] = Field(default=None, pattern=RELEASE_VERSION_PATTERN)
    """EKS AMI release version to pin, e.g. 1.34.2-20251120; changing it rolls the nodes. Default: none (the latest AMI for the cluster version at creation)."""
    instance_tags: dict[str, InputText] = {}
    """Tags put on the pool's instances and volumes through its launch template; changing them rolls every node (stack `tags` never reach instances, so a cost tag does not). Default: none."""
    node_repair: NodeRepairConfig = NodeRepairConfig()
    """EKS node auto repair of the pool. Default: on, one node at a time, halting above 50% unhealthy."""
    protect: Optional[bool] = None
    """Protect the pool's node group and created placement group from deletion (Pulumi `protect`). Set false on a protected stack to let a change that replaces the pool (a Capacity Block switch) through while the cluster and FSx stay protected. Default: `cluster.protect`."""
    force_update_version: bool = False
    """Let a roll (a version or launch-template change) evict pods a PodDisruptionBudget protects, ending the pool's running job, instead of EKS failing with PodEvictionFailure after 15 minutes (UpdateNodegroupVersion `force`); without it such a roll of a running pool is refused. Default: false."""

    @field_validator("update_strategy")
    @classmethod
    def _update_strategy(cls, value: str) -> str:
        allowed = aws_enums.eks_update_strategies()
        if value not in allowed:
            raise _enum_error(value, allowed, "an EKS update strategy", "botocore eks NodegroupUpdateStrategies")
        return value

    @field_validator("capacity_type")
    @classmethod
    def _capacity_type(cls, value: str) -> str:
        allowed = aws_enums.eks_capacity_types()
        if value not in allowed:
            raise _enum_error(value, allowed, "an EKS capacity type", "botocore eks CapacityTypes")
        if value == "SPOT":
            raise PydanticCustomError(
                "spot",
                f"SPOT is refused for training pools: {SPOT_REFUSAL}; use ON_DEMAND or CAPACITY_BLOCK",
            )
        return value

    @property
    def computed_sizes(self) -> list[str]:
        """The size keys a program gave as Outputs (``GpuNodeGroup`` takes them; the platform, which
        derives quotas and Kueue's flavors from the sizes, does not)."""
        sizes = {"minSize": self.min_size, "desiredSize": self.desired_size, "maxSize": self.max_size}
        return [key for key, size in sizes.items() if is_unknown(size)]

    @property
    def initial_size(self) -> Any:
        """Nodes at creation: ``desired_size`` when set, else ``min_size``."""
        return self.min_size if self.desired_size is None else self.desired_size


def _check_gpu_instance_types(instance_types: list[str], problem: ProblemSink) -> bool:
    """GPU types from the catalog, each once; True when every type is known to the catalog."""
    families = sorted({t.split(".")[0] for t in GPU_INSTANCE_TYPES})
    for i, instance_type in enumerate(instance_types):
        if instance_type in FRACTIONAL_GPU_INSTANCE_TYPES:
            problem(f"instanceTypes[{i}]", f"'{instance_type}' {FRACTIONAL_GPU_INSTANCE_TYPES[instance_type]}; {GPU_SHARING_REFUSED}")
        elif instance_type not in GPU_INSTANCE_TYPES:
            problem(
                f"instanceTypes[{i}]",
                f"'{instance_type}' is not an x86_64 NVIDIA GPU instance type; allowed: the sizes of "
                f"{', '.join(families)} (components/facts/catalog.py lists each)",
            )
    if len(set(instance_types)) != len(instance_types):
        problem("instanceTypes", "lists an instance type twice")
    return all(t in GPU_INSTANCE_TYPES for t in instance_types)


def _check_sizes(min_size: int, desired_size: Optional[int], max_size: int, problem: ProblemSink) -> None:
    """minSize <= desiredSize <= maxSize, each problem under the key the user set; a program's Output
    size is known only at deployment, so EKS checks it."""
    if any(is_unknown(size) for size in (min_size, desired_size, max_size)):
        return
    if min_size > max_size:
        problem("minSize", f"must not exceed maxSize ({max_size})")
    elif desired_size is not None and not min_size <= desired_size <= max_size:
        problem("desiredSize", f"must lie between minSize ({min_size}) and maxSize ({max_size})")


def _check_efa(pool: GpuPoolConfig, network: NetworkConfig, known_types: bool, problem: ProblemSink) -> None:
    if pool.efa == "enabled" and known_types and not has_efa(pool.instance_types):
        lacking = [t for t in pool.instance_types if GPU_INSTANCE_TYPES[t].efa_interfaces == 0]
        problem("efa", f"is 'enabled' but {', '.join(lacking)} has no EFA; use 'auto' or 'disabled', or EFA instance types")
    # With a placement group, _check_placement already holds the pool to one AZ.
    if known_types and pool.efa_enabled and pool.placement_group.mode == "none":
        zones = sorted({s.availability_zone for s in pool_subnets(pool, network)})
        if len(zones) > 1:
            problem(
                "availabilityZone",
                f"is required with EFA: the pool's subnets span {', '.join(zones)}, and EFA traffic does not "
                "cross availability zones; choose one AZ, or set efa to 'disabled'",
            )


def _check_node_labels(labels: Mapping[str, TextOrOutput], problem: ProblemSink) -> None:
    for key, value in labels.items():
        if key in GPU_SHARING_NODE_LABELS and not (key == "nvidia.com/mig.config" and value == MIG_DISABLED_CONFIG):
            problem(f"labels.{key}", f"is refused: it {GPU_SHARING_NODE_LABELS[key]}; {GPU_SHARING_REFUSED}")
        elif key == GPU_NODE_ROLE_LABEL[0]:
            problem(f"labels.{key}", f"is reserved: every GPU node carries {GPU_NODE_ROLE_LABEL[0]}={GPU_NODE_ROLE_LABEL[1]}")
        elif key == GPU_POOL_KEY:
            problem(f"labels.{key}", "is reserved: the stack sets it to the pool's name, which Kueue's ResourceFlavor selects")
        elif not _LABEL_KEY.match(key) or len(key) > 317:
            problem(f"labels.{key}", "is not a valid Kubernetes label key")
        elif not kubelet_may_set(key):
            problem(
                f"labels.{key}",
                "is in the kubernetes.io/k8s.io namespaces, where a kubelet may set only "
                f"{', '.join(sorted(KUBELET_LABEL_NAMESPACES))} (and subdomains) and the well-known labels; "
                "the node would never join (NodeRestriction); use a label under your own domain, e.g. example.com/role",
            )
        if not is_unknown(value) and not _LABEL_VALUE.match(value):
            problem(f"labels.{key}", f"'{value}' is not a valid Kubernetes label value (63 characters, alphanumerics, '-', '_', '.')")


def _check_eks_labels(labels: Mapping[str, TextOrOutput], problem: ProblemSink) -> None:
    """EKS takes narrower node group labels than Kubernetes (botocore eks ``labelKey``/``labelValue``:
    1-63 characters each, so no prefixed key over 63 and no empty value)."""
    key_min, key_max, _ = aws_enums.string_limits("eks", "labelKey")
    value_min, value_max, _ = aws_enums.string_limits("eks", "labelValue")
    for key, value in labels.items():
        if not key_min <= len(key) <= key_max:
            problem(f"labels.{key}", f"EKS node group label keys have {key_min}-{key_max} characters, prefix included ({len(key)} here)")
        if not is_unknown(value) and not value_min <= len(value) <= value_max:
            problem(f"labels.{key}", f"EKS node group label values have {value_min}-{value_max} characters ({len(value)} here)")


def validate_gpu_node_group(
    pool: GpuNodeGroupConfig, network: NetworkConfig, path: str, *, instance_store_raid0: bool = True
) -> list[Problem]:
    """Rules of one GPU pool that involve more than one key. ``path`` prefixes every key path;
    ``instance_store_raid0`` is whether the pool's nodes make their instance store one array
    (``storage.instanceStore``)."""
    problems, problem = _collector(path)
    known_types = _check_gpu_instance_types(pool.instance_types, problem)
    if len(pool.name) > POOL_NAME_MAX:
        problem(
            "name",
            f"has {len(pool.name)} characters; a managed pool's node group is named '<name>-' plus a "
            f"{UNIQUE_SUFFIX_LENGTH}-character unique suffix, and EKS allows {NODE_GROUP_NAME_MAX}, so at most {POOL_NAME_MAX}",
        )

    if pool.ami_type not in NVIDIA_AMI_TYPES and ("ARM" in pool.ami_type or "arm64" in pool.ami_type.lower()):
        problem(
            "amiType",
            f"'{pool.ami_type}' is an ARM (arm64) AMI but the GPU catalog's instance types are x86_64; "
            f"allowed: {', '.join(NVIDIA_AMI_TYPES)}",
        )
    elif pool.ami_type not in NVIDIA_AMI_TYPES:
        problem("amiType", f"'{pool.ami_type}' has no NVIDIA driver; allowed: {', '.join(NVIDIA_AMI_TYPES)}")

    if pool.capacity_type == "CAPACITY_BLOCK":
        if pool.capacity_reservation_id is None:
            problem("capacityReservationId", "is required with capacityType CAPACITY_BLOCK (the block's cr- id)")
        if len(pool.instance_types) != 1:
            problem("instanceTypes", "a Capacity Block is for exactly one instance type; list only that type")
    _check_reservation_placement(pool.capacity_reservation_id is not None, pool.placement_group, problem)

    _check_sizes(pool.min_size, pool.desired_size, pool.max_size, problem)

    _check_placement(pool, network, problem)
    _check_efa(pool, network, known_types, problem)
    if not is_unknown(pool.labels):
        _check_node_labels(pool.labels, problem)
        _check_eks_labels(pool.labels, problem)
    check_node_repair(pool.node_repair, problem)
    check_fast_image_pull(pool.fast_image_pull, pool.ami_type, pool.instance_types, instance_store_raid0, problem)
    # Instance tags reach EC2 only (never IAM), so EC2's rules apply, not the stack tags' IAM alphabet.
    for key, value in pool.instance_tags.items():
        if not 1 <= len(key) <= 128 or key.lower().startswith("aws:") or (not is_unknown(value) and len(value) > 256):
            problem(f"instanceTags.{key}", "tag keys have 1-128 characters and must not start with 'aws:'; values at most 256")
        if key == "Name":
            problem("instanceTags.Name", "is set by the pool (cluster and pool name)")
    return problems
