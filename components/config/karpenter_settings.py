"""Karpenter's configuration: the controller and its GPU NodePools, with their own rules."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from ..facts.catalog import GPU_INSTANCE_TYPES
from .base import _Model, supported_version
from .problems import Problem, _collector
from .image_pull import check_fast_image_pull
from .network_settings import NetworkConfig
from .pools import (
    KARPENTER_CAPACITY_TYPES,
    SPOT_REFUSAL,
    GpuPoolConfig,
    _check_efa,
    _check_gpu_instance_types,
    _check_node_labels,
    _check_placement,
    _check_reservation_placement,
)

KARPENTER_NODE_AMI_TYPE = "AL2023_x86_64_NVIDIA"
"""The node OS of every Karpenter GPU pool: its EC2NodeClass selects the AL2023 alias, which
Karpenter resolves to the AL2023 NVIDIA AMI for NVIDIA instance types."""


KARPENTER_CHART_VERSIONS = ("1.14.3", "1.14.1")
"""Karpenter chart (and controller) versions this library is tested with. The first is the default,
the newest patch of the 1.14 line; 1.14.1 stays accepted, so a stack on it moves when its team
chooses. Charts before 1.0 serve no ``karpenter.sh/v1`` NodePools."""

KARPENTER_CHART_VERSION = KARPENTER_CHART_VERSIONS[0]
"""The default Karpenter chart version."""

_KARPENTER_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"
"""Pattern of NodePool ``consolidateAfter`` and ``expireAfter`` (karpenter.sh_nodepools.yaml)."""


class DisruptionBudgetConfig(_Model):
    """A NodePool disruption budget: how many nodes Karpenter may disrupt at once, for which reasons, when."""

    nodes: str = Field(pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$")
    """Nodes that may be disrupted at once: a count (``"1"``) or a percentage (``"10%"``) (required)."""
    reasons: Optional[list[Literal["Empty", "Drifted", "Underutilized"]]] = None
    """Disruption reasons the budget applies to. Default: all reasons."""
    schedule: Optional[str] = Field(default=None, pattern=r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$")
    """Cron schedule (UTC) from which the budget is active, together with `duration`. Default: always active."""
    duration: Optional[str] = Field(default=None, pattern=r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
    """How long the budget is active after each `schedule` start, e.g. ``8h``. Default: none."""


DEFAULT_DISRUPTION_BUDGETS = [
    DisruptionBudgetConfig(nodes="0", reasons=["Drifted"]),
    DisruptionBudgetConfig(nodes="1"),
]
"""Never replace a drifted node that is still running (a busy training node is replaced only once
it is empty and removed as such), and disrupt at most one node at a time otherwise."""


class KarpenterDisruptionConfig(_Model):
    """When Karpenter may take nodes of a GPU pool away. Consolidation is always ``WhenEmpty``: a
    training node is never drained to pack its pods elsewhere."""

    consolidate_after: str = Field(default="30m", pattern=_KARPENTER_DURATION)
    """How long a node must be empty before it is removed. Default: 30m (a failed job's restart or the next queued job still finds the node)."""
    budgets: list[DisruptionBudgetConfig] = Field(default=DEFAULT_DISRUPTION_BUDGETS, max_length=50)
    """Disruption budgets. Default: no replacement of drifted nodes while they run, one node at a time otherwise."""
    expire_after: str = Field(default="Never", pattern=_KARPENTER_DURATION)
    """Maximum node lifetime; expiry drains a node even mid-job. Default: Never."""


class KarpenterGpuNodePoolConfig(GpuPoolConfig):
    """One Karpenter GPU pool: an EC2NodeClass and a NodePool that launch tainted GPU nodes on demand."""

    capacity_types: list[str] = Field(default=["on-demand"], min_length=1)
    """Values of `karpenter.sh/capacity-type`: on-demand, and reserved with capacityReservationIds (spot is refused for training). Default: on-demand."""
    capacity_reservation_ids: list[str] = []
    """ODCRs or Capacity Blocks (cr- ids) the pool launches into first; needs `reserved` in capacityTypes. Default: none."""
    gpu_limit: int = Field(default=16, ge=1)
    """Most GPUs (`nvidia.com/gpu`) the pool's nodes may have in total; at least one node's. Default: 16 (two p5.48xlarge nodes)."""
    disruption: KarpenterDisruptionConfig = KarpenterDisruptionConfig()
    """Consolidation delay, disruption budgets and node expiry. Default: see its keys."""
    adopt_retained: bool = False
    """Set when adding back a pool `retainOnRemoval` left behind: take over its placement group (mode create), EC2NodeClass and NodePool where they are (Pulumi `import`, by name) instead of creating them, which AWS and the API server refuse; its nodes keep running. No-op once in the stack. Default: false."""

    @field_validator("capacity_reservation_ids")
    @classmethod
    def _reservation_ids(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.match(r"^cr-[0-9a-f]{17}$", value):
                raise PydanticCustomError("reservation", f"'{value}' is not a capacity reservation id (cr- and 17 hex digits)")
        return values


class KarpenterConfig(_Model):
    """Karpenter: the controller, and the GPU pools it provisions."""

    enabled: bool = False
    """Install Karpenter (controller IAM, interruption queue, Helm release) and its GPU pools. Default: false."""
    chart_version: Annotated[str, supported_version(KARPENTER_CHART_VERSIONS)] = KARPENTER_CHART_VERSION
    """Version of the `karpenter` and `karpenter-crd` charts (oci://public.ecr.aws/karpenter), one this library is tested with: 1.14.3 or 1.14.1. Default: 1.14.3."""
    gpu_node_pools: list[KarpenterGpuNodePoolConfig] = []
    """GPU pools Karpenter provisions (one EC2NodeClass and one NodePool each). Default: none."""
    node_repair: bool = False
    """Karpenter's NodeRepair feature gate (alpha in Karpenter 1.14, off upstream; chart value `settings.featureGates.nodeRepair`): force-terminate, without a drain, a node whose AcceleratedHardwareReady is False for 10 minutes (other conditions: 30), and replace it. Default: false."""
    retain_on_removal: bool = True
    """Leave the NodePools, EC2NodeClasses and Karpenter's CRDs, and so their nodes, in the cluster when a pool, Karpenter or the stack is removed; false: Karpenter drains and terminates them (apply false before removing). Must be false on a stack creating its VPC without `cluster.protect`. Default: true."""


_KARPENTER_RESTRICTED_LABEL = re.compile(r"^([^/]*\.)?(karpenter\.sh|karpenter\.k8s\.aws)/|^kubernetes\.io/hostname$")
"""Label keys a NodePool template may not set (the CEL rules of karpenter.sh_nodepools.yaml); the
few well-known Karpenter labels it may set are not node labels a pool needs to add."""


def validate_karpenter_gpu_node_pool(  # noqa: C901 - one independent check per rule, each a row of the Refused-by table under this name
    pool: KarpenterGpuNodePoolConfig, network: NetworkConfig, path: str, *, instance_store_raid0: bool = True
) -> list[Problem]:
    """Rules of one Karpenter GPU pool that involve more than one key. ``path`` prefixes every key
    path; ``instance_store_raid0`` is whether its EC2NodeClass asks for the RAID0 instance-store
    policy (``storage.instanceStore``)."""
    problems, problem = _collector(path)
    known_types = _check_gpu_instance_types(pool.instance_types, problem)

    for i, capacity_type in enumerate(pool.capacity_types):
        if capacity_type == "spot":
            problem(
                f"capacityTypes[{i}]",
                f"spot is refused for training pools: {SPOT_REFUSAL}; use on-demand, and reserved with capacityReservationIds",
            )
        elif capacity_type not in KARPENTER_CAPACITY_TYPES:
            hint = aws_enums.suggestion(capacity_type, frozenset(KARPENTER_CAPACITY_TYPES))
            problem(
                f"capacityTypes[{i}]",
                f"'{capacity_type}' is not a karpenter.sh/capacity-type value; allowed: on-demand, reserved{hint}",
            )
    if len(set(pool.capacity_types)) != len(pool.capacity_types):
        problem("capacityTypes", "lists a capacity type twice")
    if "reserved" in pool.capacity_types and not pool.capacity_reservation_ids:
        problem("capacityTypes", "'reserved' needs the reservations to launch into: set capacityReservationIds")
    if pool.capacity_reservation_ids and "reserved" not in pool.capacity_types:
        problem(
            "capacityReservationIds",
            "Karpenter launches into a reservation only for a NodePool that allows 'reserved'; add it to capacityTypes",
        )
    if len(set(pool.capacity_reservation_ids)) != len(pool.capacity_reservation_ids):
        problem("capacityReservationIds", "lists a reservation twice")
    _check_reservation_placement(bool(pool.capacity_reservation_ids), pool.placement_group, problem)

    if known_types and pool.gpu_limit < pool.gpus_per_node:
        largest = max(pool.instance_types, key=lambda t: GPU_INSTANCE_TYPES[t].gpus)
        problem(
            "gpuLimit",
            f"{pool.gpu_limit} is less than one {largest} node's {pool.gpus_per_node} GPUs, so Karpenter could never "
            f"launch it; use at least {pool.gpus_per_node}",
        )

    _check_placement(pool, network, problem)
    _check_efa(pool, network, known_types, problem)
    _check_node_labels(pool.labels, problem)
    check_fast_image_pull(pool.fast_image_pull, KARPENTER_NODE_AMI_TYPE, pool.instance_types, instance_store_raid0, problem)
    for key in pool.labels:
        if _KARPENTER_RESTRICTED_LABEL.match(key):
            problem(f"labels.{key}", "is restricted by Karpenter (karpenter.sh, karpenter.k8s.aws and kubernetes.io/hostname)")

    for i, budget in enumerate(pool.disruption.budgets):
        if (budget.schedule is None) != (budget.duration is None):
            problem(f"disruption.budgets[{i}]", "schedule and duration are set together or not at all")
    return problems


_KARPENTER_RESTRICTED_TAG = re.compile(r"^(kubernetes\.io/cluster|eks:eks-cluster-name$|karpenter\.sh/nodepool$|karpenter\.sh/nodeclaim$|karpenter\.k8s\.aws/ec2nodeclass$)")
"""AWS tag keys an EC2NodeClass may not carry (the CEL rules on ``spec.tags`` of its CRD)."""


def validate_karpenter(
    karpenter: KarpenterConfig, network: NetworkConfig, *, instance_store_raid0: bool = True, protect: bool = False
) -> list[Problem]:
    """Rules of the ``karpenter`` section (names shared with managed pools: ``platform.validate_names``);
    ``protect`` is ``cluster.protect``."""
    problems: list[Problem] = []
    if karpenter.enabled and karpenter.retain_on_removal and network.create and not protect:
        # `pulumi destroy` runs no program, so this is the last point the stack can refuse it.
        problems.append(
            Problem(
                "karpenter.retainOnRemoval",
                "is true (the default) on a stack that creates its VPC (network.create) and is not protected "
                "(cluster.protect false): `pulumi destroy` would leave the NodePools' GPU instances running in that VPC "
                "and then fail to delete it; set retainOnRemoval: false (destroy then deletes the NodePools first, and "
                "Karpenter drains and terminates their nodes), or cluster.protect: true (destroy is refused)",
            )
        )
    if karpenter.gpu_node_pools and not karpenter.enabled:
        problems.append(
            Problem(
                "karpenter.enabled",
                f"is false but gpuNodePools lists {len(karpenter.gpu_node_pools)} pool(s), which would be ignored; "
                "set enabled: true or remove them",
            )
        )
    names = [pool.name for pool in karpenter.gpu_node_pools]
    for i, pool in enumerate(karpenter.gpu_node_pools):
        path = f"karpenter.gpuNodePools[{i}]"
        if names.index(pool.name) != i:
            problems.append(Problem(f"{path}.name", f"'{pool.name}' is used by karpenter.gpuNodePools[{names.index(pool.name)}] too"))
        problems.extend(validate_karpenter_gpu_node_pool(pool, network, path, instance_store_raid0=instance_store_raid0))
    return problems
