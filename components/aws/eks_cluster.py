"""The EKS cluster, created with pulumi-eks or adopted by name, with its system node group
(``system_node_group.py``), and ``ClusterInput``: what a component accepts as its cluster. The
component is thin: ``cluster_plan.py`` checks its arguments and settles every default first, and
``eks_control_plane.py`` builds the control plane it wires to the node group and the ref.

Both paths end in the same ``ClusterRef`` (``cluster_ref.py``): everything downstream (GPU node
groups, Helm releases, Kubernetes objects) is built identically whether this stack created the
cluster or not, through one Kubernetes provider.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional, Protocol, Union

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from ..config import ConfigError, Problem
from ..config.documented import component_args, documented_component
from .cluster_plan import (  # noqa: F401 - re-exported: their import path before the plan had a module of its own
    EksClusterArgs,
    EksClusterPlan,
    eks_cluster_physical_names,
    endpoint_group_resource_name,
    has_endpoint_sources,
    plan_eks_cluster,
    unread_cluster_checks,
)
from .cluster_ref import ClusterRef
from .eks_control_plane import ControlPlane, CreatedControlPlane, adopted_control_plane, coredns_addon, created_control_plane
from .node_group_sizes import warn_unread
from .region import aws_provider_of, check_provider_region, stack_region
from .system_node_group import system_node_group, system_node_labels


@documented_component(EksClusterArgs)
class EksCluster(pulumi.ComponentResource):
    """An EKS cluster (new via pulumi-eks, or an existing one) plus its system node group."""

    ref: ClusterRef
    """The cluster as downstream components see it."""
    eks_cluster: Optional[eks.Cluster]
    """The ``pulumi_eks.Cluster`` this component created; None for an adopted cluster."""
    system_node_group: Optional[aws.eks.NodeGroup]
    """The system node group; None when ``systemNodeGroup.enabled`` is false."""
    admin_access: list[aws.eks.AccessPolicyAssociation]
    """The cluster-admin policy of each of ``adminPrincipalArns`` but the cluster's creator, each under
    its access entry (``cluster_access.py``); empty for an adopted cluster."""
    member_access: list[aws.eks.AccessEntry]
    """The access entry of each team member that is an IAM principal, with its team's Kubernetes group
    and no access policy (``cluster_access.py``), on a created or an adopted cluster."""
    coredns: Optional[aws.eks.Addon]
    """The ``coredns`` EKS add-on of a created cluster; None for an adopted one."""
    provider: k8s.Provider
    """The Kubernetes provider of the cluster (also ``ref.provider``)."""
    cluster_name: pulumi.Output[str]
    """EKS cluster name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON, secret) that authenticates with ``aws eks get-token``."""

    def __init__(self, name: str, args: Optional[EksClusterArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(EksClusterArgs, "EksCluster", name, args, fields)
        # Every problem is found, and every read done, before anything registers (``cluster_plan.py``).
        plan = plan_eks_cluster(name, args, opts)
        super().__init__("eks-gpu-training:index:EksCluster", name, None, opts)
        if plan.unread:
            warn_unread(plan.cluster.name, f"EksCluster({name})", plan.unread, self)
        # Every AWS resource and look-up below takes ``region``; the pulumi-eks cluster, which has no
        # such input, gets a provider for it. The region an AWS provider in opts points at must agree.
        check_provider_region(aws_provider_of(resource=self), plan.region, f"EksCluster({name}).region")
        created = plan.control_plane
        if isinstance(created, CreatedControlPlane):
            if created.upgraded_by_eks:
                pulumi.log.warn(created.upgraded_by_eks, resource=self)
            control_plane = created_control_plane(plan, created, parent=self)
        else:
            control_plane = adopted_control_plane(plan, parent=self)
        self.eks_cluster, self.provider = control_plane.eks_cluster, control_plane.provider
        self.admin_access, self.member_access = control_plane.admin_access, control_plane.member_access
        self.system_node_group = self._system_node_group(plan, control_plane)
        ready = [*control_plane.ready, *([self.system_node_group] if self.system_node_group is not None else [])]
        self.coredns = coredns_addon(plan, ready, parent=self) if isinstance(created, CreatedControlPlane) else None
        self.ref = self._ref(plan, control_plane, ready)
        self.cluster_name = pulumi.Output.from_input(plan.cluster.name)
        self.kubeconfig = pulumi.Output.secret(control_plane.kubeconfig)
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "eksCluster": self.eks_cluster,
                "systemNodeGroup": self.system_node_group,
                "adminAccess": self.admin_access,
                "memberAccess": self.member_access,
                "coredns": self.coredns,
            }
        )

    def _system_node_group(self, plan: EksClusterPlan, control_plane: ControlPlane) -> Optional[aws.eks.NodeGroup]:
        if not plan.system_node_group.enabled:
            return None
        return system_node_group(
            plan.name,
            plan.system_node_group,
            plan.cluster,
            partition=plan.partition,
            region=plan.region,
            tags=plan.tags,
            kubernetes_version=control_plane.kubernetes_version,
            subnet_ids=plan.network.subnet_ids,
            control_plane=control_plane.control_plane,
            parent=self,
        )

    def _ref(self, plan: EksClusterPlan, control_plane: ControlPlane, ready: list[pulumi.Resource]) -> ClusterRef:
        return ClusterRef(
            name=plan.cluster.name,
            region=plan.region,
            partition=plan.partition,
            vpc_id=plan.network.vpc_id,
            subnets=tuple(plan.network.subnets),
            kubernetes_version=control_plane.kubernetes_version,
            cluster_security_group_id=control_plane.cluster_security_group_id,
            kubeconfig=control_plane.kubeconfig,
            endpoint=control_plane.endpoint,
            provider=self.provider,
            system_node_selector=system_node_labels() if plan.system_node_group.enabled else {},
            ready=tuple(ready),
            node_ssm_access=plan.cluster.node_ssm_access,
            control_plane=control_plane.control_plane,
            pod_identity=control_plane.pod_identity,
        )


ClusterInput = Union[ClusterRef, EksCluster, eks.Cluster]
"""What a component takes as its cluster: a ``ClusterRef``, this library's ``EksCluster``, or your
own ``pulumi_eks.Cluster``."""

_EKS_CLUSTER_REFS: "weakref.WeakKeyDictionary[eks.Cluster, ClusterRef]" = weakref.WeakKeyDictionary()
"""The ref made for each ``pulumi_eks.Cluster`` given to a component, so that every component given
the same cluster shares one ref and one Kubernetes provider."""


def as_cluster_ref(value: object, path: str) -> ClusterRef:
    """``value`` (a ``ClusterInput``) as a ``ClusterRef``. A ``pulumi_eks.Cluster`` becomes
    ``ClusterRef.from_eks_cluster(cluster, region=<the stack's aws:region>)`` once per cluster; one
    made with an AWS provider of its own, or in a stack without ``aws:region``, needs its region said,
    so it must be passed as ``ClusterRef.from_eks_cluster(cluster, region=...)``; anything else is a
    ``ConfigError`` naming ``path``."""
    if isinstance(value, ClusterRef):
        return value
    if isinstance(value, EksCluster):
        return value.ref
    if isinstance(value, eks.Cluster):
        if value in _EKS_CLUSTER_REFS:
            return _EKS_CLUSTER_REFS[value]
        region = stack_region()
        if aws_provider_of(resource=value) is not None or region is None:
            why = "it has an AWS provider of its own" if region is not None else "the stack sets no aws:region"
            raise ConfigError(
                [Problem(path, f"the region of this pulumi_eks.Cluster is not known ({why}); pass ClusterRef.from_eks_cluster(cluster, region=...)")]
            )
        _EKS_CLUSTER_REFS[value] = ref = ClusterRef.from_eks_cluster(value, region=region)
        return ref
    raise ConfigError(
        [Problem(path, f"expected a ClusterRef, an EksCluster or a pulumi_eks.Cluster, got {type(value).__name__}")]
    )


class ArgsWithCluster(Protocol):
    """A component's Args: any dataclass with a ``cluster`` field."""

    cluster: Any


def cluster_field(args: ArgsWithCluster) -> list[Problem]:
    """Turn the ``cluster`` field of a component's Args into a ``ClusterRef`` (``as_cluster_ref``); the
    problems, for ``check_model_fields`` to raise with those of the other fields."""
    try:
        object.__setattr__(args, "cluster", as_cluster_ref(args.cluster, f"{type(args).__name__}.cluster"))
    except ConfigError as error:
        return list(error.problems)
    return []


def cluster_ref_of(args: ArgsWithCluster) -> ClusterRef:
    """The ``ClusterRef`` in the ``cluster`` of Args that ``cluster_field`` checked (a no-op lookup
    then; the type says what the component holds)."""
    return as_cluster_ref(args.cluster, f"{type(args).__name__}.cluster")


def optional_cluster_field(args: ArgsWithCluster) -> list[Problem]:
    """``cluster_field`` for Args whose ``cluster`` may be left out (None)."""
    return [] if args.cluster is None else cluster_field(args)
