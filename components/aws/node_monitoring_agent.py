"""The EKS node monitoring agent, installed as the EKS add-on ``eks-node-monitoring-agent``.

The agent runs on every node and sets node conditions (``AcceleratedHardwareReady``,
``KernelReady``, ``NetworkingReady``, ``StorageReady``, ``ContainerRuntimeReady``) from kernel logs,
the NVIDIA driver and DCGM; EKS node auto repair (managed node groups) and Karpenter's NodeRepair
act on them (docs.aws.amazon.com/eks/latest/userguide/node-health.html).

GPU health comes from DCGM. The add-on brings its own host engine, the ``dcgm-server`` DaemonSet
(``nv-hostengine`` from the agent's image, host port 5555), and the agent talks to it; the add-on's
1.7.0 configuration schema has no key to point the agent at another engine. Its chart defaults
``dcgmAgent.tolerations: []``, so on tainted GPU nodes the host engine never runs and the agent
latches ``AcceleratedHardwareReady=False`` with reason ``DCGMError`` (aws/containers-roadmap#2555,
#2567), which repair then acts on. ``node_monitoring_agent_configuration`` adds the GPU toleration.
The GPU Operator keeps its own standalone DCGM off (``gpu_operator_values``), so nothing else binds
host port 5555; its DCGM exporter keeps the engine embedded in its own pod.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from ..config import NODE_MONITORING_AGENT_ADDON
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..facts.gpu_nodes import gpu_daemon_tolerations
from .addon_versions import addon_version
from .eks_cluster import ClusterInput, cluster_field, cluster_ref_of

RESOLVE_CONFLICTS = "OVERWRITE"
"""The stack owns the add-on's configuration: EKS overwrites fields changed by hand, at creation and
on every update (EKS API ``ResolveConflicts``)."""


def node_monitoring_agent_configuration() -> dict[str, Any]:
    """The add-on's configuration values (its ``configuration.schema.json`` shape): the DCGM host
    engine tolerates the GPU taint and the health gate's taints, so it runs on the GPU nodes it
    exists for, also before the gate admits them and while it quarantines them. The chart's DCGM
    node affinity (NVIDIA instance types, amd64, not Fargate/Auto Mode/HyperPod) stays as it is; the
    node agent itself already tolerates every taint."""
    return {"dcgmAgent": {"tolerations": gpu_daemon_tolerations()}}


@documented_args
@dataclass
class NodeMonitoringAgentArgs:
    """Arguments of ``NodeMonitoringAgent``."""

    cluster: ClusterInput
    """The cluster to install the add-on into: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    addon_version: Optional[str] = None
    """A pinned add-on version. Default: EKS's default build for the cluster's Kubernetes version
    (``ClusterRef.kubernetes_version``: the configured one, or the one an adopted cluster runs)."""
    tags: Tags = field(default_factory=dict)
    """Tags of the add-on. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(NodeMonitoringAgentArgs)
class NodeMonitoringAgent(pulumi.ComponentResource):
    """The ``eks-node-monitoring-agent`` EKS add-on, at EKS's default build for the cluster's
    Kubernetes version unless pinned, its DCGM host engine running on tainted GPU nodes."""

    addon_version: pulumi.Output[str]
    """The add-on version EKS resolved (``v1.7.0-eksbuild.1`` style)."""

    def __init__(self, name: str, args: Optional[NodeMonitoringAgentArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(NodeMonitoringAgentArgs, "NodeMonitoringAgent", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"NodeMonitoringAgent({name})")
        super().__init__("eks-gpu-training:index:NodeMonitoringAgent", name, None, opts)
        ref = cluster_ref_of(args)
        # Unless pinned, EKS's default build for this Kubernetes version (``addon_versions``): it moves
        # with a version upgrade, or when EKS moves its default, not with every build AWS publishes
        # (EKS updates the add-on in place; its DaemonSets roll 10% of nodes at a time).
        version = addon_version(NODE_MONITORING_AGENT_ADDON, ref.kubernetes_version, args.addon_version, self, ref.region)
        addon = aws.eks.Addon(
            f"{name}-addon",
            cluster_name=ref.name,
            addon_name=NODE_MONITORING_AGENT_ADDON,
            addon_version=version,
            configuration_values=json.dumps(node_monitoring_agent_configuration()),
            resolve_conflicts_on_create=RESOLVE_CONFLICTS,
            resolve_conflicts_on_update=RESOLVE_CONFLICTS,
            tags=tag_map(args.tags),
            # The cluster name is a plain string, so the add-on waits for the cluster (and the system
            # nodes) explicitly; GPU nodes get the agent's pods whenever they join.
            region=ref.region,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(ref.ready)),
        )
        self.addon_version = addon.addon_version
        self.register_outputs({"addonVersion": self.addon_version})
