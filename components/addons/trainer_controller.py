"""``TrainerController``: the Kubeflow Trainer controller as a Helm release on the system nodes,
fenced by its admission policy; its chart, values and fence are shared with JobSet's in ``job_apis``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import TrainerConfig
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource
from .chart_source import release_chart
from .controller_ingress import ControllerIngress
from .job_apis import (TRAINER_CHART, TRAINER_NAMESPACE, controller_fence, controller_ingress, controller_release,
                       trainer_fence_manifests, trainer_values)


@documented_args
@dataclass
class TrainerControllerArgs:
    """Arguments of ``TrainerController``."""

    cluster: ClusterInput
    """The cluster to install into (its provider, readiness and system node selector): a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: TrainerConfig = TrainerConfig()
    """Chart version. Default: 2.3.0."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""
    training_namespaces: list[str] = field(default_factory=list)
    """The namespaces whose jobs the controller runs: its admission policy lets it write there only (``job_api_admission``). Default: none."""
    ingress: Optional[ControllerIngress] = None
    """Who may reach the controller's webhooks and metrics: a NetworkPolicy in its namespace (``controller_ingress``). Default: none, no NetworkPolicy."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(TrainerControllerArgs)
class TrainerController(pulumi.ComponentResource):
    """The ``kubeflow-system`` namespace, the Kubeflow Trainer Helm release in it, and the admission
    policy that fences its controller (``job_api_admission``); it needs JobSet (``JobSetController``),
    whose JobSets it creates."""

    values: dict[str, Any]
    """The release's values (plain data)."""
    release: k8s.helm.v3.Release
    """The Helm release; TrainingRuntimes and TrainJobs wait for it (its CRDs and webhooks)."""
    namespace: pulumi.Output[str]
    """Trainer's namespace (``kubeflow-system``)."""

    def __init__(self, name: str, args: Optional[TrainerControllerArgs] = None, opts: Optional[pulumi.ResourceOptions] = None,
                 **fields: Any):
        args = component_args(TrainerControllerArgs, "TrainerController", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainerController({name})")
        chart = release_chart(TRAINER_CHART, args.config.chart_version, None, args.charts.directory,
                              f"TrainerController({name}).charts.directory", args.charts.mirror)
        super().__init__("eks-gpu-training:index:TrainerController", name, None, opts)
        ref = cluster_ref_of(args)
        self.values = trainer_values(args.config, ref.system_node_selector)
        fence = controller_fence(self, name, ref, trainer_fence_manifests(args.training_namespaces))
        namespace, self.release = controller_release(self, name, ref, namespace_name=TRAINER_NAMESPACE,
                                           release_name="kubeflow-trainer", chart=chart, values=self.values,
                                           after=(fence,))
        controller_ingress(self, name, TRAINER_NAMESPACE, namespace, args.ingress)
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
