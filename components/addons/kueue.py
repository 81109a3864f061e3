"""Kueue as a Helm release: the controller that admits training jobs whole, on system nodes.

``kueue_values`` is pure: the chart's values, with Kueue's own configuration
(``managerConfig.controllerManagerConfigYaml``) built from a plain dict and dumped by PyYAML, so
tests can check it without a cluster. Kueue's CRDs are templates of its chart, so its custom
resources (``workloads/kueue_flavors.py``, ``workloads/kueue_queues.py``) wait for this release.

The configuration differs from the chart's default for training jobs (the reasons:
docs/architecture.md, "Kueue and teams"): ``waitForPodsReady`` is on; a failed node is replaced
within the job's topology request (``feature_gates``); only the training namespaces and the stack's
job kinds are Kueue's, so no other pod creation waits on its webhooks; EFA devices, hugepages and
ephemeral storage are left out of admission; the image is the release's own, not the chart's
staging one; with teams, fair sharing is on and Kueue manages every job of the training
namespaces, labelled or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import KueueConfig
from ..facts.gpu_nodes import EFA_RESOURCE
from ..config.arguments import check_model_fields
from .addon_release import addon_namespace, addon_release
from .chart_source import release_chart
from .controller_ingress import KUEUE_VISIBILITY_PORT, WEBHOOK_PORT, ControllerIngress, network_policy
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource

KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
"""Kueue's chart (kubernetes-sigs/kueue's OCI repository on registry.k8s.io)."""

KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
"""The controller image of Kueue's releases; the tag is ``v<chart version>``."""

KUEUE_NAMESPACE = "kueue-system"
"""Kueue's namespace, as upstream installs it; Kueue's default configuration leaves Jobs here unmanaged."""

KUEUE_RELEASE_TIMEOUT_SECONDS = 300
"""Seconds Helm waits for the controllers, which need system nodes only. The release is atomic and
waited for: Kueue's webhooks validate its own custom resources, and a Kueue pod is Ready only once
they answer (kubernetes-sigs/kueue#1682), so the Topology, flavors and queues come after it."""

CONTROLLER_REPLICAS = 2
"""Two controllers (one leader, both serving the webhooks): a Job cannot be created in a managed
namespace while Kueue's webhook does not answer, so one pod's restart must not stop job creation."""

CONTROLLER_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
"""As Karpenter's: no GPU toleration, so the controller keeps running when every GPU node is gone."""

EXCLUDED_RESOURCE_PREFIXES = (EFA_RESOURCE, "hugepages-", "ephemeral-storage")
"""Resources Kueue ignores at admission: EFA devices, EFA's hugepages and the pods' ephemeral
storage (the nodes' instance-store RAID0). The ClusterQueues cover what the ResourceQuota counts,
and Kueue refuses a workload requesting a resource its ClusterQueue does not cover."""

REQUEUE_BACKOFF_BASE_SECONDS = 60
REQUEUE_BACKOFF_MAX_SECONDS = 3600
"""Backoff of a job evicted for not being Ready in time: a minute, doubling up to an hour (the
chart's commented example), so a job that cannot start does not block the queue in a tight loop."""


KUEUE_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
"""Pod Security ``restricted`` on ``kueue-system``, which Kueue's chart meets (non-root,
RuntimeDefault seccomp, no capabilities). On a running namespace it refuses only new pods, never
evicts (kubernetes.io/docs/concepts/security/pod-security-admission/)."""


def managed_namespaces_selector(namespaces: Sequence[str]) -> dict[str, Any]:
    """Label selector of the namespaces whose Jobs Kueue manages: the training namespaces, by name
    (every namespace carries ``kubernetes.io/metadata.name``). Without any, a selector that matches
    none: ``In`` takes no empty list."""
    if not namespaces:
        return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]}


JOB_FRAMEWORK = "batch/job"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
"""Kueue's integrations of the three job kinds (Kueue chart values.yaml, ``integrations.frameworks``)."""


def integrations(jobset: bool, trainer: bool) -> tuple[str, ...]:
    """The frameworks Kueue manages: Jobs always, JobSets and TrainJobs when their controllers are
    installed (Kueue's TrainJob integration reads the JobSet a TrainJob becomes, so it needs JobSet's)."""
    return (JOB_FRAMEWORK, *((JOBSET_FRAMEWORK,) if jobset or trainer else ()), *((TRAINJOB_FRAMEWORK,) if trainer else ()))


FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
"""Kueue's default fair-sharing preemption strategies (Configuration ``fairSharing``; Kueue docs,
"Fair Sharing"): a team preempts another's workload only while its share with its own workload
stays at most the other's without it, then while it stays below the other's."""


def kueue_manager_config(config: KueueConfig, namespaces: Sequence[str], frameworks: Sequence[str] = (JOB_FRAMEWORK,),
                         fair_sharing: bool = False, queue_required: bool = False,
                         worker_lost_timeout_minutes: Optional[int] = None) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2) for the training ``namespaces``:
    the chart's default with the changes of the module docstring."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "waitForPodsReady": {
            "timeout": f"{config.pods_ready_timeout_minutes}m",
            **({"recoveryTimeout": f"{config.recovery_timeout_minutes}m"} if config.recovery_timeout_minutes is not None else {}),
            "blockAdmission": config.block_admission,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": REQUEUE_BACKOFF_BASE_SECONDS,
                "backoffMaxSeconds": REQUEUE_BACKOFF_MAX_SECONDS,
            },
        },
        # Also suspends an unlabelled job already running (kueue pkg/controller/jobframework/reconciler.go).
        "manageJobsWithoutQueueName": queue_required,
        "managedJobsNamespaceSelector": managed_namespaces_selector(namespaces),
        "integrations": {"frameworks": list(frameworks)},
        "resources": {"excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES)},
        **({"fairSharing": {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}} if fair_sharing else {}),
        # A MultiKueue manager's: how long a job stays dispatched to a worker it cannot reach.
        **({"multiKueue": {"workerLostTimeout": f"{worker_lost_timeout_minutes}m"}} if worker_lost_timeout_minutes is not None else {}),
    }


def feature_gates(config: KueueConfig) -> list[dict[str, Any]]:
    """Kueue's feature gates the stack sets (the chart's ``controllerManager.featureGates``, its
    ``--feature-gates`` argument). The two of node replacement are beta and on by default in Kueue
    0.19 (its ``pkg/features/kube_features.go``); they are spelled out so that a chart whose defaults
    change does not change how a failed node is handled. ``FailureRecoveryPolicy`` (alpha, off by
    default) runs Kueue's controller that fails a pod stuck terminating on a node tainted
    ``node.kubernetes.io/unreachable`` one minute after its deletion (``pkg/controller/failurerecovery``,
    a fixed minute in 0.19), for pods annotated ``kueue.x-k8s.io/safe-to-forcefully-delete: "true"``:
    the training pods, with ``unreachableNodeSeconds`` set. With replacement off, its two companion
    gates (``...FailFast`` and ``TASReplaceNodeOnPodTermination``, beta and on by default) are turned
    off with it: Kueue refuses to start with either on and ``TASFailedNodeReplacement`` off ("requires
    TASFailedNodeReplacement to be enabled", ``pkg/config/validation.go``)."""
    replacement = config.failed_node_replacement
    return [
        {"name": "TASFailedNodeReplacement", "enabled": replacement},
        {"name": "TASFailedNodeReplacementFailFast", "enabled": replacement},
        {"name": "TASReplaceNodeOnPodTermination", "enabled": replacement},
        {"name": "FailureRecoveryPolicy", "enabled": config.unreachable_node_seconds is not None},
    ]


def kueue_values(config: KueueConfig, namespaces: Sequence[str], system_node_selector: Mapping[str, str],
                 frameworks: Sequence[str] = (JOB_FRAMEWORK,), fair_sharing: bool = False, queue_required: bool = False,
                 worker_lost_timeout_minutes: Optional[int] = None) -> dict[str, Any]:
    """Helm values of the ``kueue`` chart (keys checked against the chart's values.yaml by ``check``)."""
    return {
        "controllerManager": {
            "featureGates": feature_gates(config),
            # The chart's default is a staging image (release-0.19, pullPolicy: Always).
            "manager": {"image": {"repository": KUEUE_IMAGE, "tag": f"v{config.chart_version}", "pullPolicy": "IfNotPresent"}},
            "replicas": CONTROLLER_REPLICAS,
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
            "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
            "tolerations": CONTROLLER_TOLERATIONS,
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_manager_config(
            config, namespaces, frameworks, fair_sharing, queue_required, worker_lost_timeout_minutes), sort_keys=False)},
    }


@documented_args
@dataclass
class KueueArgs:
    """Arguments of ``Kueue``."""

    cluster: ClusterInput
    """The cluster to install into (its provider, readiness and system node selector): a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: KueueConfig
    """Chart version and admission timeouts."""
    namespaces: Sequence[str]
    """The training namespaces: Kueue manages Jobs there and nowhere else."""
    frameworks: Sequence[str] = (JOB_FRAMEWORK,)
    """The job kinds Kueue manages (``integrations``). Default: Jobs only."""
    fair_sharing: bool = False
    """Turn on fair sharing between the ClusterQueues of a cohort (teams). Default: off."""
    queue_required: bool = False
    """Manage every job of ``namespaces``, holding one without a queue label (``manageJobsWithoutQueueName``; teams). Default: off, such a job runs outside Kueue."""
    worker_lost_timeout_minutes: Optional[int] = None
    """A MultiKueue manager's ``multiKueue.workerLostTimeout``: minutes a job stays dispatched to a worker it cannot reach. Default: None, Kueue's own (15)."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""
    ingress: Optional[ControllerIngress] = None
    """Who may reach Kueue's webhooks, visibility API and metrics: a NetworkPolicy in ``kueue-system`` (``controller_ingress``). Default: none, no NetworkPolicy."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(KueueArgs)
class Kueue(pulumi.ComponentResource):
    """The ``kueue-system`` namespace and the Kueue Helm release in it."""

    values: dict[str, Any]
    """The release's values (plain data)."""
    release: k8s.helm.v3.Release
    """The Helm release; Kueue's custom resources depend on it (its CRDs are chart templates)."""
    namespace: pulumi.Output[str]
    """Kueue's namespace (``kueue-system``)."""

    def __init__(self, name: str, args: Optional[KueueArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(KueueArgs, "Kueue", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"Kueue({name})")
        # A missing local chart is refused before anything registers.
        chart = release_chart(KUEUE_CHART, args.config.chart_version, None, args.charts.directory, f"Kueue({name}).charts.directory",
                              args.charts.mirror)
        super().__init__("eks-gpu-training:index:Kueue", name, None, opts)
        ref = cluster_ref_of(args)
        ready = list(ref.ready)
        namespace = addon_namespace(self, name, namespace=KUEUE_NAMESPACE, labels=KUEUE_NAMESPACE_LABELS, ready=ready)
        self.values = kueue_values(args.config, args.namespaces, ref.system_node_selector, args.frameworks, args.fair_sharing,
                                   args.queue_required, args.worker_lost_timeout_minutes)
        self.release = addon_release(self, name, release_name="kueue", chart=chart, values=self.values,
                                     timeout=KUEUE_RELEASE_TIMEOUT_SECONDS, ready=ready, namespace=namespace)
        if args.ingress is not None:
            network_policy(name, KUEUE_NAMESPACE, args.ingress, webhook_ports=(WEBHOOK_PORT, KUEUE_VISIBILITY_PORT),
                           opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]))
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
