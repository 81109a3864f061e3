"""``JobSetController``: the JobSet controller as a Helm release on the system nodes, fenced by its
admission policy; its chart, values and fence are shared with Trainer's in ``job_apis``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import JobSetConfig
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource
from .chart_source import release_chart
from .controller_ingress import ControllerIngress
from .job_apis import (JOBSET_CHART, JOBSET_NAMESPACE, controller_fence, controller_ingress, controller_release,
                       jobset_fence_manifests, jobset_values)


@documented_args
@dataclass
class JobSetControllerArgs:
    """Arguments of ``JobSetController``."""

    cluster: ClusterInput
    """The cluster to install into (its provider, readiness and system node selector): a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: JobSetConfig = JobSetConfig()
    """Chart version. Default: 0.12.0."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""
    training_namespaces: list[str] = field(default_factory=list)
    """The namespaces whose jobs the controller runs: its admission policy lets it write there only (``job_api_admission``). Default: none."""
    ingress: Optional[ControllerIngress] = None
    """Who may reach the controller's webhooks and metrics: a NetworkPolicy in its namespace (``controller_ingress``). Default: none, no NetworkPolicy."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(JobSetControllerArgs)
class JobSetController(pulumi.ComponentResource):
    """The ``jobset-system`` namespace, the JobSet Helm release in it, and the admission policy that
    fences its controller (``job_api_admission``)."""

    values: dict[str, Any]
    """The release's values (plain data)."""
    release: k8s.helm.v3.Release
    """The Helm release; JobSets (and TrainJobs) wait for it (its CRDs and webhooks)."""
    namespace: pulumi.Output[str]
    """JobSet's namespace (``jobset-system``)."""

    def __init__(self, name: str, args: Optional[JobSetControllerArgs] = None, opts: Optional[pulumi.ResourceOptions] = None,
                 **fields: Any):
        args = component_args(JobSetControllerArgs, "JobSetController", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"JobSetController({name})")
        chart = release_chart(JOBSET_CHART, args.config.chart_version, None, args.charts.directory,
                              f"JobSetController({name}).charts.directory", args.charts.mirror)
        super().__init__("eks-gpu-training:index:JobSetController", name, None, opts)
        ref = cluster_ref_of(args)
        self.values = jobset_values(args.config, ref.system_node_selector)
        fence = controller_fence(self, name, ref, jobset_fence_manifests(args.training_namespaces))
        namespace, self.release = controller_release(self, name, ref, namespace_name=JOBSET_NAMESPACE, release_name="jobset",
                                           chart=chart, values=self.values, after=(fence,))
        controller_ingress(self, name, JOBSET_NAMESPACE, namespace, args.ingress)
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
