"""``ClusterRef``: what components need of an EKS cluster, the same shape whether this program
created the cluster (``EksCluster.ref``, ``ClusterRef.from_eks_cluster``), adopted one by name
(``ClusterRef.from_existing``) or reaches one through a kubeconfig alone (the in-cluster half's
hand-built ref), with the one Kubernetes provider every in-cluster object uses."""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, cast

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from ..config import ConfigError, Problem, SubnetRef
from ..facts import aws_enums
from .region import aws_provider_of, check_provider_region, stack_region, without_aws_provider

_EKS_CLUSTER_PROVIDERS: "weakref.WeakKeyDictionary[eks.Cluster, k8s.Provider]" = weakref.WeakKeyDictionary()
"""The Kubernetes provider ``ClusterRef.from_eks_cluster`` made for each cluster, so that every ref
of one cluster uses one provider."""


@dataclass(frozen=True)
class ClusterRef:
    """What components need of a cluster; the same shape for a created and an adopted cluster.

    Build one with ``ClusterRef.from_eks_cluster`` (your own ``pulumi_eks.Cluster``),
    ``ClusterRef.from_existing`` (a cluster made elsewhere, by name), or take ``EksCluster.ref``.
    Every value another resource may supply is a ``pulumi.Input``: components never format one into
    text, they pass it on or combine it with ``pulumi.Output.concat``/``apply``.

    Providers: a component given a cluster puts every Kubernetes object on ``provider`` and every AWS
    resource in ``region``; one given none takes the Kubernetes provider in its ``opts``. A Kubernetes
    provider in ``opts`` other than the cluster's, or an AWS provider for another region, is a
    ``ConfigError``.
    """

    name: pulumi.Input[str]
    """EKS cluster name (an Output when it comes from a cluster resource)."""
    region: str
    """AWS region of the cluster."""
    partition: str
    """ARN partition of the region (``aws``, ``aws-cn``, ``aws-us-gov``)."""
    vpc_id: pulumi.Input[str]
    """VPC of the cluster (an Output when this stack creates the network)."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version of the control plane; managed node groups follow it (``version``)."""
    cluster_security_group_id: pulumi.Input[str]
    """The security group EKS made for the cluster; nodes need it to reach the control plane."""
    kubeconfig: pulumi.Input[str]
    """The cluster's kubeconfig: JSON that authenticates with ``aws eks get-token`` for a created or
    adopted cluster; the stack's own (a path or the document) in the in-cluster half."""
    provider: k8s.Provider
    """The one Kubernetes provider every in-cluster object of components taking this ref uses."""
    system_node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node selector that puts controllers on the system node group; empty when the stack describes
    none (a cluster made elsewhere: its controllers then go wherever its scheduler puts them)."""
    ready: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """Resources that must exist before in-cluster objects are installed: the cluster, the rules
    opening its private endpoint to `pulumi up`, its system nodes. The platform adds its managed GPU
    node groups for the releases with DaemonSets on GPU nodes (``after_gpu_nodes``)."""
    control_plane: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """What node groups wait for: a cluster this program creates (when its name is a plain string, the
    data flow alone does not order them); empty for an adopted cluster."""
    pod_identity: Sequence[pulumi.Resource] = field(default_factory=tuple)
    """The Pod Identity agent add-on a created cluster gets; only what gets AWS credentials through
    Pod Identity (Karpenter, the topology labeler, training pods, the FSx CSI driver) waits for it.
    Empty for an adopted cluster, which must already run it (``pod_identity_agent`` looks it up)."""
    creates_pod_identity_agent: bool = False
    """Whether the first component that needs the Pod Identity agent creates the add-on (a cluster
    made by this program that has none); otherwise an empty ``pod_identity`` is looked up."""
    subnets: tuple[SubnetRef, ...] = ()
    """The cluster's private subnets with their AZs, which pools choose from; empty in a hand-built ref
    (pools then take the subnets of their network configuration)."""
    endpoint: Optional[pulumi.Input[str]] = None
    """The API server endpoint (https URL), for controllers that are told it (Karpenter); when None,
    Karpenter discovers it itself."""
    node_ssm_access: bool = False
    """Whether node roles made for this cluster get AmazonSSMManagedInstanceCore (``cluster.nodeSsmAccess``)."""

    def check_aws_provider(self, opts: Optional[pulumi.ResourceOptions], path: str) -> None:
        """Refuse (``ConfigError`` naming ``<path>.opts``) an AWS provider in a component's ``opts``
        for another region than this cluster's, once its region is known."""
        check_provider_region(aws_provider_of(opts), self.region, f"{path}.opts")

    @classmethod
    def from_eks_cluster(
        cls,
        cluster: eks.Cluster,
        *,
        region: str,
        name: Optional[pulumi.Input[str]] = None,
        partition: Optional[str] = None,
        vpc_id: Optional[pulumi.Input[str]] = None,
        subnets: Sequence[SubnetRef] = (),
        provider: Optional[k8s.Provider] = None,
        system_node_selector: Optional[Mapping[str, str]] = None,
        ready: Sequence[pulumi.Resource] = (),
        pod_identity: Optional[Sequence[pulumi.Resource]] = None,
        node_ssm_access: bool = False,
    ) -> "ClusterRef":
        """The ref of a ``pulumi_eks.Cluster`` made by your program.

        ``name`` defaults to the cluster's ``eks_cluster.name`` (pass the name you gave the cluster to
        have it known at preview), ``partition`` to the region's, ``vpc_id`` to the cluster's
        ``core.vpc_id``; the Kubernetes version is the cluster's. ``subnets`` (``SubnetRef``: ID and
        AZ) are the private subnets pools choose from (default: none, pools then take their network
        configuration's). ``provider`` defaults to a new
        Kubernetes provider ``<cluster>-k8s`` (a child of the cluster) on its ``kubeconfig_json``.
        ``system_node_selector`` places controllers (default: none); ``ready`` lists what must exist
        before they install besides the cluster (e.g. your system node group); ``pod_identity`` your
        ``eks-pod-identity-agent`` add-on, which Karpenter, the topology labeler, training pods' roles
        and the FSx CSI driver need: left out (None), the first component that needs it creates the
        add-on ``<cluster>-pod-identity-agent``; ``()`` says the cluster runs it already, and it is
        looked up.
        ``node_ssm_access`` gives node roles made for it AmazonSSMManagedInstanceCore (default: no).
        """
        cluster_provider = aws_provider_of(resource=cluster)
        if cluster_provider is None and stack_region() not in (None, region):
            raise ConfigError(
                [
                    Problem(
                        "ClusterRef.from_eks_cluster.region",
                        f"the cluster has no AWS provider of its own, so it is in the stack's aws:region "
                        f"{stack_region()}, not {region}; pass region={stack_region()!r}, or create the "
                        f"cluster with an AWS provider for {region}",
                    )
                ]
            )
        check_provider_region(cluster_provider, region, "ClusterRef.from_eks_cluster.region")
        kubeconfig = cluster.kubeconfig_json
        if provider is None and cluster in _EKS_CLUSTER_PROVIDERS:
            # A second ref of the same cluster (e.g. one a component made from the cluster itself).
            provider = _EKS_CLUSTER_PROVIDERS[cluster]
        if provider is None:
            # pulumi.Resource has no public accessor for its name; the provider is named after the cluster.
            provider = k8s.Provider(
                f"{cluster._name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=cluster)
            )
            _EKS_CLUSTER_PROVIDERS[cluster] = provider
        return cls(
            name=name if name is not None else cluster.eks_cluster.name,
            region=region,
            partition=partition if partition is not None else aws_enums.partition_of(region),
            vpc_id=vpc_id if vpc_id is not None else cluster.core.vpc_id,
            subnets=tuple(subnets),
            kubernetes_version=cluster.eks_cluster.version,
            cluster_security_group_id=cluster.cluster_security_group_id,
            kubeconfig=kubeconfig,
            provider=provider,
            system_node_selector=dict(system_node_selector or {}),
            ready=(cluster, *ready),
            control_plane=(cluster,),
            pod_identity=tuple(pod_identity or ()),
            creates_pod_identity_agent=pod_identity is None,
            endpoint=cluster.core.endpoint,
            node_ssm_access=node_ssm_access,
        )

    @classmethod
    def from_existing(
        cls,
        name: pulumi.Input[str],
        region: str,
        *,
        resource_name: Optional[str] = None,
        partition: Optional[str] = None,
        vpc_id: Optional[pulumi.Input[str]] = None,
        subnets: Sequence[SubnetRef] = (),
        system_node_selector: Optional[Mapping[str, str]] = None,
        ready: Sequence[pulumi.Resource] = (),
        node_ssm_access: bool = False,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> "ClusterRef":
        """The ref of an existing EKS cluster, looked up by ``name`` in ``region`` (nothing is created
        or changed in it).

        Registers one resource: ``<resource_name>-k8s``, a Kubernetes provider whose kubeconfig gets
        tokens from ``aws eks get-token``. ``resource_name`` defaults to ``name`` (required when
        ``name`` is an Output); ``opts`` applies to the provider and the look-up (e.g. ``parent``).
        ``vpc_id`` defaults to the cluster's own, ``partition`` to the region's; ``subnets`` as in
        ``from_eks_cluster``.
        ``node_ssm_access`` gives node roles made for it AmazonSSMManagedInstanceCore (default: no).
        The cluster must already run the ``eks-pod-identity-agent`` add-on for what gets AWS
        credentials through Pod Identity (Karpenter, the topology labeler, training pods' roles, the
        FSx CSI driver): it is looked up, and a preview fails when it is missing.
        """
        if resource_name is None:
            if not isinstance(name, str):
                raise TypeError("ClusterRef.from_existing: pass resource_name when the cluster name is an Output")
            resource_name = name
        opts = opts or pulumi.ResourceOptions()
        # The look-up goes to ``region`` whatever provider opts name, but one for another region is a mistake.
        check_provider_region(aws_provider_of(opts), region, f"ClusterRef.from_existing({resource_name}).region")
        lookup = aws.eks.get_cluster_output(name=name, region=region, opts=pulumi.InvokeOutputOptions(parent=opts.parent))
        kubeconfig = pulumi.Output.all(name, lookup).apply(
            lambda values: kubeconfig_for(
                values[0],
                region,
                values[1].endpoint,
                values[1].certificate_authorities[0].data if values[1].certificate_authorities else None,
            )
        )
        return cls(
            name=name,
            region=region,
            partition=partition if partition is not None else aws_enums.partition_of(region),
            vpc_id=vpc_id if vpc_id is not None else lookup.vpc_config.vpc_id,
            subnets=tuple(subnets),
            kubernetes_version=lookup.version,
            cluster_security_group_id=cast("pulumi.Output[str]", lookup.apply(lambda c: c.vpc_config.cluster_security_group_id if c.vpc_config else None)),  # EKS gives every cluster its security group; only a mock's answer lacks one
            kubeconfig=kubeconfig,
            # An AWS provider in opts serves the look-up only; the Kubernetes provider cannot take it.
            provider=k8s.Provider(f"{resource_name}-k8s", kubeconfig=kubeconfig, opts=without_aws_provider(opts)),
            system_node_selector=dict(system_node_selector or {}),
            ready=tuple(ready),
            endpoint=lookup.endpoint,
            node_ssm_access=node_ssm_access,
        )


def kubeconfig_for(cluster_name: str, region: str, endpoint: Optional[str], ca_data: Optional[str]) -> str:
    """A kubeconfig (JSON) for an EKS cluster that gets its token from ``aws eks get-token``."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [{"name": cluster_name, "user": user}],
        }
    )
