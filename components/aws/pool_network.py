"""What a GPU pool's nodes need on the network, managed node group or Karpenter pool alike: their
cluster placement group and, with EFA, a security group that passes EFA traffic."""

from __future__ import annotations

from typing import Any, Optional, Protocol, TypedDict

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from .eks_cluster import ArgsWithCluster, ClusterRef
from ..config import NetworkConfig, PlacementGroupConfig, Problem, SubnetConfig
from ..facts.aws_names import PhysicalName


def efa_security_group_resource_name(name: str) -> str:
    """Logical name of the EFA security group ``efa_security_group(name, ...)`` makes (auto-named)."""
    return f"{name}-efa"


def pool_network_names(name: str, placement: PlacementGroupConfig, group_name: Optional[str], efa: bool) -> list[PhysicalName]:
    """The AWS names ``placement_group_name`` and ``efa_security_group`` give a pool's resources; a
    ``group_name`` of None (made from an Output, known only at deployment) is left out."""
    names = []
    if placement.mode == "create" and group_name is not None:
        names.append(PhysicalName("aws:ec2/placementGroup:PlacementGroup", group_name, autonamed=False))
    if efa:
        names.append(PhysicalName("aws:ec2/securityGroup:SecurityGroup", efa_security_group_resource_name(name), autonamed=True))
    return names


class DeletionOptions(TypedDict):
    """The two resource options ``deletion_options`` settles, to pass as ``**`` to ``ResourceOptions``."""

    protect: bool
    retain_on_delete: bool


def deletion_options(protect: bool, retain_on_delete: bool) -> DeletionOptions:
    """``protect`` and ``retain_on_delete`` of a resource that may be both: a retained resource is
    never protected. Pulumi refuses to delete a protected resource before it looks at
    ``retainOnDelete`` (pulumi/pulumi ``pkg/resource/deploy/step.go``, ``DeleteStep.Apply``: the
    ``deleteProtectedError`` check comes before the ``s.old.RetainOnDelete`` no-op), so a resource
    that is both can leave neither the program nor the stack: removing it fails. Retained, the object
    outlives its removal, and a replacement's delete of it, in AWS anyway: ``protect`` would guard
    nothing more. Explicitly false, it does not inherit a protected parent's ``protect`` either."""
    return DeletionOptions(protect=protect and not retain_on_delete, retain_on_delete=retain_on_delete)


def launched_placement_group(placement: PlacementGroupConfig, created_name: Optional[pulumi.Input[str]]) -> Optional[pulumi.Input[str]]:
    """The placement group a pool's nodes launch in: ``created_name`` for mode ``create`` (the group
    the pool gets), the existing group named in the configuration (mode ``existing``), or None."""
    if placement.mode == "create":
        return created_name
    if placement.mode == "existing":
        return placement.name
    return None


def placement_group_name(
    name: str,
    placement: PlacementGroupConfig,
    group_name: pulumi.Input[str],
    tags: Tags,
    parent: pulumi.Resource,
    region: str,
    protect: bool = False,
    retain_on_delete: bool = False,
    import_id: Optional[str] = None,
) -> Optional[pulumi.Input[str]]:
    """The name of the placement group a pool's nodes launch in: a cluster placement group
    ``{name}-placement-group`` called ``group_name`` that this creates (mode ``create``), the
    existing group named in the configuration (mode ``existing``), or None (mode ``none``). ``protect``
    keeps a created group from being deleted while its pool runs in it; ``retain_on_delete`` leaves
    it in AWS when the pool is removed from the program instead, and then ``protect`` is dropped
    (``deletion_options``); ``import_id``, the group's name, has a created group taken over where it
    already is (Pulumi's ``import``); ``region`` is the cluster's."""
    created = None
    if placement.mode == "create":
        created = aws.ec2.PlacementGroup(
            f"{name}-placement-group",
            name=group_name,
            strategy=placement.strategy,
            tags=tag_map(tags),
            region=region,
            opts=pulumi.ResourceOptions(parent=parent, import_=import_id, **deletion_options(protect, retain_on_delete)),
        ).name
    return launched_placement_group(placement, created)


def efa_security_group(
    name: str, ref: ClusterRef, tags: Tags, parent: pulumi.Resource, retain_on_delete: bool = False
) -> aws.ec2.SecurityGroup:
    """A security group named ``{name}-efa`` that lets EFA traffic flow between a pool's nodes: EFA
    needs all traffic allowed to and from the group itself (OS-bypass traffic is not IP-filtered).
    With ``retain_on_delete`` the group and its rules stay in AWS when the pool is removed from the
    program (EC2 refuses to delete a group that running nodes' interfaces use)."""
    group = aws.ec2.SecurityGroup(
        efa_security_group_resource_name(name),
        vpc_id=ref.vpc_id,
        description=pulumi.Output.concat("EFA traffic between GPU nodes of ", ref.name),
        tags=tag_map(tags),
        region=ref.region,
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=retain_on_delete),
    )
    aws.vpc.SecurityGroupIngressRule(
        f"{name}-efa-ingress-self",
        security_group_id=group.id,
        referenced_security_group_id=group.id,
        ip_protocol="-1",
        description="EFA: all traffic from the group itself",
        tags=tag_map(tags),
        region=ref.region,
        opts=pulumi.ResourceOptions(parent=group, retain_on_delete=retain_on_delete),
    )
    aws.vpc.SecurityGroupEgressRule(
        f"{name}-efa-egress-self",
        security_group_id=group.id,
        referenced_security_group_id=group.id,
        ip_protocol="-1",
        description="EFA: all traffic to the group itself",
        tags=tag_map(tags),
        region=ref.region,
        opts=pulumi.ResourceOptions(parent=group, retain_on_delete=retain_on_delete),
    )
    return group


class PoolArgs(ArgsWithCluster, Protocol):
    """A pool's Args: a ``cluster`` and the ``network`` its nodes join."""

    network: Any


def pool_network_field(args: PoolArgs) -> list[Problem]:
    """Complete the ``network`` of a pool's Args (after ``cluster_field``) from its cluster: left
    out, it is the cluster's VPC and subnets (a ref that holds them: ``EksCluster``'s, or one built
    with ``subnets=``); given as a dict without ``vpcId``, the cluster's VPC, since a pool only
    chooses among the subnets. The problems, for ``check_model_fields`` to raise with the others."""
    ref = args.cluster
    network = args.network
    path = f"{type(args).__name__}.network"
    if not isinstance(ref, ClusterRef):
        return []  # the cluster's own problem is reported
    if network is None:
        if not ref.subnets:
            return [Problem(path, "is required: the cluster ref holds no subnets (give the network, or a ref built with subnets=)")]
        network = NetworkConfig(
            vpc_id=ref.vpc_id, subnets=[SubnetConfig(id=s.id, availability_zone=s.availability_zone) for s in ref.subnets]
        )
    elif isinstance(network, dict) and not network.get("create") and "vpcId" not in network and "vpc_id" not in network:
        network = {**network, "vpcId": ref.vpc_id}
    object.__setattr__(args, "network", network)
    return []


def pool_network_of(args: PoolArgs) -> NetworkConfig:
    """The ``network`` of Args that ``pool_network_field`` completed and ``check_model_fields``
    parsed (a no-op then; the type says what the component holds)."""
    if not isinstance(args.network, NetworkConfig):
        raise TypeError(f"{type(args).__name__}.network is not a NetworkConfig: __post_init__ did not complete it")
    return args.network
