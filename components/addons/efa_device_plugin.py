"""The AWS EFA Kubernetes device plugin as a Helm release, on EFA-capable GPU nodes only.

The plugin advertises ``vpc.amazonaws.com/efa`` so training pods can request EFA devices. The
chart's default tolerates nothing, so on tainted GPU nodes it would never run; here it tolerates the
GPU taint and is confined to GPU training nodes of instance types that have EFA.

It calls no AWS API (it finds the EFA devices on the node through ``/dev/infiniband`` and sysfs), so
unlike Karpenter and the topology labeler it needs neither AWS credentials nor ``AWS_REGION``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..facts.catalog import GPU_INSTANCE_TYPES
from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import GpuTrainingPlatformArgs
from ..facts.gpu_nodes import gpu_daemon_tolerations, gpu_node_selector
from ..config.arguments import check_model_fields
from .addon_release import addon_release
from .chart_source import release_chart
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource

CHART = "aws-efa-k8s-device-plugin"
"""Chart name in the EKS charts repository."""
CHART_REPOSITORY = "https://aws.github.io/eks-charts"
"""The EKS charts Helm repository."""
CHART_VERSION = "v0.5.30"
"""Pinned chart version (app v0.5.20); ``tests/unit/addons/test_chart_source_values.py`` checks the values against it."""
NAMESPACE = "kube-system"
"""Namespace of the plugin, like the other node-level EKS add-ons."""
RELEASE_TIMEOUT_SECONDS = 600
"""Helm's wait for the plugin's DaemonSet on every joined EFA GPU node: the release installs once
the managed GPU node groups are active, so only image pulls remain. Atomic: a failed upgrade rolls
back, and a device plugin restart leaves running pods' devices alone."""
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
"""Well-known node label with the EC2 instance type."""


EFA_PLUGIN_RESOURCES = {
    "requests": {"cpu": "10m", "memory": "20Mi"},
    "limits": {"cpu": "100m", "memory": "128Mi"},
}
"""Requests as the chart's values.yaml suggests (cpu 10m, memory 20Mi); limits with headroom."""


def efa_needed(args: GpuTrainingPlatformArgs) -> bool:
    """Whether any GPU pool of the platform has EFA on. Every kind of GPU pool that can lay out EFA
    interfaces belongs here."""
    karpenter_pools = args.karpenter.gpu_node_pools if args.karpenter.enabled else []
    return any(pool.efa_enabled for pool in [*args.gpu_node_groups, *karpenter_pools])


def efa_instance_types() -> list[str]:
    """GPU instance types with at least one EFA device (``components/facts/catalog.py``), sorted."""
    return sorted(name for name, facts in GPU_INSTANCE_TYPES.items() if facts.efa_interfaces > 0)


def efa_device_plugin_values() -> dict[str, Any]:
    """Values of the ``aws-efa-k8s-device-plugin`` chart.

    The chart turns ``supportedInstanceLabels`` into a required node affinity (one term per key,
    ``In`` the listed values); the list is narrowed to the GPU types that have EFA, and the
    ``role=gpu-training`` node selector keeps it off any other node of those types.
    """
    return {
        "tolerations": gpu_daemon_tolerations(),
        "nodeSelector": gpu_node_selector(),
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL], "values": efa_instance_types()},
        # The chart's requests with limits added: the plugin lists a node's EFA devices and answers
        # the kubelet, a few MiB; a leak is stopped at the limit instead of squeezing a training pod.
        "resources": EFA_PLUGIN_RESOURCES,
    }


@documented_args
@dataclass
class EfaDevicePluginArgs:
    """Arguments of ``EfaDevicePlugin``."""

    cluster: ClusterInput
    """The cluster to install into: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(EfaDevicePluginArgs)
class EfaDevicePlugin(pulumi.ComponentResource):
    """The EFA device plugin Helm release in ``kube-system``."""

    values: dict[str, Any]
    """The release's values (plain data)."""
    release: k8s.helm.v3.Release
    """The Helm release."""
    release_status: pulumi.Output[Optional[str]]
    """Helm's status of the release (``deployed`` once installed)."""

    def __init__(self, name: str, args: Optional[EfaDevicePluginArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(EfaDevicePluginArgs, "EfaDevicePlugin", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"EfaDevicePlugin({name})")
        # A missing local chart is refused before anything registers.
        chart = release_chart(CHART, CHART_VERSION, CHART_REPOSITORY, args.charts.directory,
                              f"EfaDevicePlugin({name}).charts.directory", args.charts.mirror)
        super().__init__("eks-gpu-training:index:EfaDevicePlugin", name, None, opts)
        ref = cluster_ref_of(args)
        self.values = efa_device_plugin_values()
        # Like the GPU Operator: the cluster and system nodes, not the GPU nodes it will run on.
        self.release = addon_release(self, name, release_name=CHART, chart=chart, values=self.values,
                                     timeout=RELEASE_TIMEOUT_SECONDS, ready=ref.ready, namespace=NAMESPACE)
        self.release_status = self.release.status.apply(lambda s: s.status if s else None)
        self.register_outputs({"releaseStatus": self.release_status})
