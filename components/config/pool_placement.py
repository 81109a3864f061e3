"""Where a GPU pool's nodes go: its cluster placement group, availability zone and subnets.

A cluster placement group lives in one AZ, so a pool with one names its AZ or subnets of one AZ;
the managed node groups and Karpenter's GPU pools share these rules (``pools``, ``karpenter``).
"""

from __future__ import annotations

from typing import Literal, Optional, Protocol, Sequence, Union

from pydantic import field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from .base import _enum_error, _Model
from .inputs import is_unknown, shown
from .network_settings import NetworkConfig, SubnetId, SubnetRef, network_zones, planned_subnets
from .problems import Problem, ProblemSink


class PlacementGroupConfig(_Model):
    """The cluster placement group that keeps a pool's nodes on one low-latency network segment."""

    mode: Literal["create", "existing", "none"] = "create"
    """create: the pool makes its own group; existing: use the group named below; none: no group. Default: create."""
    name: Optional[str] = None
    """Name of the existing placement group (mode existing only). Default: none."""
    strategy: str = "cluster"
    """Placement strategy of a created group. Default: cluster (the only one that co-locates for training)."""

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        allowed = aws_enums.ec2_placement_strategies()
        if value not in allowed:
            raise _enum_error(value, allowed, "a placement strategy", "botocore ec2 PlacementStrategy")
        if value != "cluster":
            raise PydanticCustomError(
                "strategy",
                f"'{value}' spreads instances apart; training pools need 'cluster' (low-latency, high-bandwidth placement)",
            )
        return value


class PlacedPool(Protocol):
    """What the placement rules read of a pool (``pools.GpuPoolConfig`` and Karpenter's pools)."""

    @property
    def availability_zone(self) -> Optional[str]: ...
    @property
    def subnet_ids(self) -> Optional[Sequence[SubnetId]]: ...
    @property
    def placement_group(self) -> PlacementGroupConfig: ...


def pool_subnets(pool: PlacedPool, network: Union[NetworkConfig, Sequence[SubnetRef]]) -> list[SubnetRef]:
    """The subnets a pool's nodes launch in (see ``GpuNodeGroupConfig.subnet_ids``), chosen from the
    network's planned subnets or from subnets already built (whose IDs may be Outputs): only the
    AZs are read, never an ID that may not exist yet."""
    subnets = planned_subnets(network) if isinstance(network, NetworkConfig) else list(network)
    if pool.subnet_ids is not None:
        # A subnet ID is a string or an Output (matched by identity); None is a subnet not yet built.
        by_id = {s.id: s for s in subnets if s.id is not None}
        return [by_id[i] for i in pool.subnet_ids if i in by_id]
    return [s for s in subnets if pool.availability_zone in (None, s.availability_zone)]


def subnet_problems(subnets: Sequence[SubnetRef], path: str) -> list[Problem]:
    """A component's pool must launch somewhere that exists: at least one subnet, and none of a
    network still to be created (whose subnets only ``Network(...).ref`` holds)."""
    if not subnets:
        return [Problem(f"{path}.network.subnets", "leave the pool without a subnet; list the VPC's private subnets with their AZs")]
    if any(s.id is None for s in subnets):
        return [
            Problem(
                f"{path}.network.create",
                "the subnets of a network to create exist only once Network builds them; pass a ClusterRef "
                "that holds them (EksCluster's ref, or ClusterRef.from_eks_cluster(..., subnets=network.ref.subnets))",
            )
        ]
    return []


def _check_reservation_placement(has_reservation: bool, placement: PlacementGroupConfig, problem: ProblemSink) -> None:
    if has_reservation and placement.mode == "create":
        problem(
            "placementGroup.mode",
            "a capacity reservation cannot be forced into a placement group it was not created in "
            "(launches fail with InsufficientInstanceCapacity); use 'none', or 'existing' with the group "
            "the reservation was created in",
        )


def _check_placement(pool: PlacedPool, network: NetworkConfig, problem: ProblemSink) -> None:  # noqa: C901 - one independent check per rule, each a row of the Refused-by table under this name
    """Placement group, availability zone and subnets: a cluster placement group lives in one AZ."""
    placement = pool.placement_group
    if placement.mode == "existing" and not placement.name:
        problem("placementGroup.name", "is required when placementGroup.mode is 'existing'")
    if placement.mode != "existing" and placement.name is not None:
        problem("placementGroup.name", f"is only used with mode 'existing' (mode is '{placement.mode}')")

    known_azs = sorted(network_zones(network))
    where = "network.availabilityZones" if network.create else "network.subnets"
    if pool.availability_zone is not None and pool.availability_zone not in known_azs:
        problem("availabilityZone", f"'{pool.availability_zone}' has no subnet in {where}; allowed: {', '.join(known_azs)}")

    subnet_azs = {s.id: s.availability_zone for s in network.subnets}
    if pool.subnet_ids is not None and network.create:
        problem(
            "subnetIds",
            "cannot name subnets of a network this stack creates (their IDs exist only after `pulumi up`); "
            "choose the pool's subnets by availabilityZone",
        )
    elif pool.subnet_ids is not None:
        if not pool.subnet_ids:
            problem("subnetIds", "must list at least one subnet")
        for i, subnet_id in enumerate(pool.subnet_ids):
            if not is_unknown(subnet_id) and pool.subnet_ids.index(subnet_id) != i:
                problem(f"subnetIds[{i}]", f"'{subnet_id}' is listed twice")
            elif subnet_id not in subnet_azs:
                # An Output is compared by identity: its AZ is known only through the network entry holding it.
                allowed = ", ".join(shown(s) for s in subnet_azs)
                problem(f"subnetIds[{i}]", f"{shown(subnet_id)} is not in network.subnets; allowed: {allowed}")
            elif pool.availability_zone not in (None, subnet_azs[subnet_id]):
                problem(
                    f"subnetIds[{i}]",
                    f"{shown(subnet_id)} is in {subnet_azs[subnet_id]}, not the pool's availabilityZone {pool.availability_zone}",
                )
    chosen_azs = sorted({s.availability_zone for s in pool_subnets(pool, network)})
    if placement.mode != "none":
        if pool.availability_zone is None and pool.subnet_ids is None:
            problem(
                "availabilityZone",
                "is required with a placement group: a cluster placement group lives in one AZ; "
                f"choose one of {', '.join(known_azs)} or set placementGroup.mode to 'none'",
            )
        elif len(chosen_azs) > 1:
            problem(
                "subnetIds",
                f"span {', '.join(chosen_azs)}; a placement group needs all of the pool's subnets in one AZ "
                "(multi-AZ subnets break node group updates)",
            )
