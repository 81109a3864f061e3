"""The NVIDIA GPU Operator as a Helm release, with values derived from the GPU nodes' OS.

``gpu_operator_values`` is pure: it turns the stack's ``GpuOperatorConfig``, the GPU pools' node OS
and the system node selector into the chart's values, so tests can check them against the chart's
own ``values.yaml`` without a cluster. ``GpuOperator`` creates the namespace and the release.

The release waits for what ``ClusterRef.ready`` lists: the platform puts its managed GPU node
groups there besides the cluster and system nodes, so Helm does not wait for DaemonSet pods on
nodes still booting. The operator deploys its operands as further nodes appear (Karpenter's).

Neither the operator nor its operands call AWS APIs (they talk to the Kubernetes API and the
node's GPUs), so they need neither AWS credentials nor ``AWS_REGION``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import (
    ConfigError,
    GpuNodeGroupConfig,
    Problem,
    GpuOperatorConfig,
    GpuTrainingPlatformArgs,
    gpu_pool_ami_types,
    validate_gpu_operator,
)
from ..facts.gpu_nodes import gpu_daemon_tolerations
from .addon_release import addon_namespace, addon_release
from .chart_source import release_chart
from .dcgm_dashboard import dcgm_dashboard_config_map
from ..facts.node_os import NODE_OS_BY_AMI_TYPE, GpuNodeOs, node_os_of
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config.chart_settings import ChartSource

CHART = "gpu-operator"
"""Chart name in NVIDIA's Helm repository."""
CHART_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
"""NVIDIA's Helm repository (NGC)."""
NAMESPACE = "gpu-operator"
"""Namespace of the operator and its operands; created by ``GpuOperator``."""
RELEASE_TIMEOUT_SECONDS = 900
"""Helm's wait for the chart's own workloads (operator, NFD), never for GPU drivers: the operator
makes the operands later. The release installs once the managed GPU node groups are active, so only
image pulls remain. Atomic; the ClusterPolicy keeps the chart's ``helm.sh/resource-policy:
keep``."""


DEFAULT_GPU_AMI_TYPE = GpuNodeGroupConfig.model_fields["ami_type"].default
"""The AMI type of a GPU pool that names none, and so of the nodes ``GpuOperator`` serves by default."""


def gpu_node_os(args: GpuTrainingPlatformArgs) -> GpuNodeOs:
    """The one node OS of the platform's GPU pools (``validate_gpu_node_os`` refuses a mix).

    Without GPU pools yet, the OS of the default pool AMI (Amazon Linux 2023 NVIDIA), so GPU
    nodes added later (an autoscaler's, or another program's) get the operator they need.
    """
    ami_types = list(gpu_pool_ami_types(args).values())
    return node_os_of(ami_types[0] if ami_types else DEFAULT_GPU_AMI_TYPE)


def _required_node_affinity(selector: Mapping[str, str]) -> dict[str, Any]:
    """A node affinity that requires every label of ``selector`` (what a nodeSelector does)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": key, "operator": "In", "values": [value]} for key, value in sorted(selector.items())
                        ]
                    }
                ]
            }
        }
    }


RUNTIME_DEFAULT_SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}
"""Pod security context that puts a pod under the container runtime's default seccomp profile."""


def gpu_operator_values(
    config: GpuOperatorConfig,
    node_os: GpuNodeOs,
    system_node_selector: Mapping[str, str],
) -> dict[str, Any]:
    """Values of the ``gpu-operator`` chart (any supported ``config.chart_version``).

    Every key set here exists in the values.yaml of each version in
    ``config.GPU_OPERATOR_CHART_VERSIONS`` (and ``node-feature-discovery.*`` in the NFD subchart's);
    ``tests/unit/addons/test_chart_source_values.py`` checks that against the upstream files.
    """
    tolerations = gpu_daemon_tolerations()
    values: dict[str, Any] = {
        # The operator installs only what the node OS lacks (see ``node_os.GpuNodeOs``):
        # - the driver: every accepted GPU AMI has it (the seed's intent: the AMI has it);
        # - the container toolkit: AL2023 NVIDIA and Bottlerocket NVIDIA both ship it and configure
        #   containerd's nvidia runtime; the operator's toolkit daemonset would rewrite that config
        #   and restart containerd on a node whose runtime already works;
        # - the device plugin: Bottlerocket runs its own, AL2023 does not.
        "driver": {"enabled": not node_os.ships_driver},
        "toolkit": {"enabled": not node_os.ships_container_toolkit},
        "devicePlugin": {"enabled": not node_os.ships_device_plugin},
        # GPU metrics and GPU labels (model, memory, compute capability) for training pods' selectors.
        "dcgmExporter": {
            "enabled": True,
            # The chart makes a Service for the exporter (port 9400, ``/metrics``); a ServiceMonitor
            # only where its CRD exists (v26's chart would otherwise make one by default and fail).
            "serviceMonitor": {
                "enabled": config.prometheus_operator,
                **({"additionalLabels": dict(config.service_monitor_labels)} if config.service_monitor_labels else {}),
            },
        },
        # No standalone DCGM host engine from the operator: the EKS node monitoring agent runs its own
        # on host port 5555 (its dcgm-server DaemonSet), which the operator's would also bind. The
        # exporter keeps the engine embedded in its own pod (the chart's default, set here so a chart
        # whose default changes cannot start a second engine on that port).
        "dcgm": {"enabled": False},
        "gfd": {"enabled": True},
        # No GPU sharing for training: no MIG strategy (whole GPUs are advertised) and no MIG manager
        # to partition them; no time-slicing (the device plugin keeps its default, unshared config).
        "mig": {"strategy": "none"},
        "migManager": {"enabled": False},
        # Every operand daemonset runs on tainted GPU nodes, also before the health gate admits them
        # (its checks need the GPUs the device plugin advertises) and while it quarantines them.
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {
            # The NFD worker labels GPU nodes (PCI vendor 10de) so the operator finds them; it must run on
            # them too. A list value replaces the chart's, so the GPU daemons' tolerations are spelled out here.
            # The chart leaves the pods' seccomp profile unset (Unconfined on containerd); NFD's
            # daemons make no unusual syscalls, so the runtime's default profile holds them. Its
            # NetworkPolicies (the chart's own rules: DNS and the API server out, metrics in) are
            # enforced where the cluster runs a network policy agent: a cluster ``EksCluster``
            # creates turns on the VPC CNI's; an adopted one enforces them only if it runs one.
            "worker": {
                "tolerations": tolerations,
                "podSecurityContext": dict(RUNTIME_DEFAULT_SECCOMP),
                "networkPolicy": {"enabled": True},
            },
            "master": {"podSecurityContext": dict(RUNTIME_DEFAULT_SECCOMP), "networkPolicy": {"enabled": True}},
            "gc": {"podSecurityContext": dict(RUNTIME_DEFAULT_SECCOMP), "networkPolicy": {"enabled": True}},
        },
    }
    if system_node_selector:
        # The operator and NFD's master and garbage collector are controllers: system nodes. The
        # operator gets a required node affinity because ``operator.nodeSelector`` is not declared in
        # v24.9.2's values.yaml (its template reads it, but only ``operator.affinity`` is declared in
        # every supported version).
        values["operator"] = {"affinity": _required_node_affinity(system_node_selector)}
        values["node-feature-discovery"]["master"]["nodeSelector"] = dict(system_node_selector)
        values["node-feature-discovery"]["gc"]["nodeSelector"] = dict(system_node_selector)
    return values


@documented_args
@dataclass
class GpuOperatorArgs:
    """Arguments of ``GpuOperator``."""

    cluster: ClusterInput
    """The cluster to install into (its provider, readiness and system node selector): a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: GpuOperatorConfig = field(default_factory=GpuOperatorConfig)
    """Chart version, Prometheus operator presence, sharing (refused). Default: the defaults of ``GpuOperatorConfig``."""
    node_os: Union[str, GpuNodeOs] = DEFAULT_GPU_AMI_TYPE
    """The GPU nodes' EKS AMI type (decides driver, toolkit and device plugin). Default: AL2023_x86_64_NVIDIA."""
    charts: ChartSource = field(default_factory=ChartSource)
    """Where the chart comes from instead of its repository: a local folder (``directory``) or a mirror (``mirror``), as the stack's ``charts`` (``ChartsConfig.source()``). Default: the repository."""

    def __post_init__(self) -> None:
        problems = cluster_field(self)
        if isinstance(self.node_os, str):
            if self.node_os in NODE_OS_BY_AMI_TYPE:
                self.node_os = node_os_of(self.node_os)
            else:
                problems.append(
                    Problem(
                        "GpuOperatorArgs.node_os",
                        f"{self.node_os!r} is not an NVIDIA GPU AMI type; allowed: {', '.join(NODE_OS_BY_AMI_TYPE)}",
                    )
                )
        check_model_fields(self, problems)


@documented_component(GpuOperatorArgs)
class GpuOperator(pulumi.ComponentResource):
    """The ``gpu-operator`` namespace and the NVIDIA GPU Operator Helm release in it."""

    values: dict[str, Any]
    """The release's values (plain data)."""
    release: k8s.helm.v3.Release
    """The Helm release."""
    namespace: pulumi.Output[str]
    """The operator's namespace (``gpu-operator``)."""
    release_status: pulumi.Output[Optional[str]]
    """Helm's status of the release (``deployed`` once installed)."""

    def __init__(self, name: str, args: Optional[GpuOperatorArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(GpuOperatorArgs, "GpuOperator", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"GpuOperator({name})")
        problems = validate_gpu_operator(args.config, path=f"GpuOperator({name}).config")
        if problems:
            raise ConfigError(problems)
        chart = release_chart(CHART, args.config.chart_version, CHART_REPOSITORY, args.charts.directory,
                              f"GpuOperator({name}).charts.directory", args.charts.mirror)
        super().__init__("eks-gpu-training:index:GpuOperator", name, None, opts)
        ref = cluster_ref_of(args)
        # Whatever the ref lists: the cluster and its system nodes, and, in the platform's ref, the
        # managed GPU node groups too, so that Helm waits for pulls on joined nodes, not for boots
        # (``RELEASE_TIMEOUT_SECONDS``).
        ready = list(ref.ready)

        # __post_init__ has made an AMI type its GpuNodeOs; the check says so to the type checker.
        node_os = args.node_os if isinstance(args.node_os, GpuNodeOs) else node_os_of(args.node_os)
        self.values = gpu_operator_values(args.config, node_os, ref.system_node_selector)
        # Operands are privileged host daemons (device plugin, DCGM, validators).
        namespace = addon_namespace(self, name, namespace=NAMESPACE, labels={"pod-security.kubernetes.io/enforce": "privileged"},
                                    ready=ready)
        self.release = addon_release(self, name, release_name=CHART, chart=chart, values=self.values,
                                     timeout=RELEASE_TIMEOUT_SECONDS, ready=ready, namespace=namespace)
        if args.config.prometheus_operator:
            # NVIDIA's DCGM dashboard beside the exporter whose ServiceMonitor Prometheus scrapes.
            dashboard = dcgm_dashboard_config_map(NAMESPACE)
            k8s.core.v1.ConfigMap(
                f"{name}-dcgm-dashboard",
                metadata=dashboard["metadata"],
                data=dashboard["data"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
        self.namespace = namespace.metadata.name
        self.release_status = self.release.status.apply(lambda s: s.status if s else None)
        self.register_outputs({"namespace": self.namespace, "releaseStatus": self.release_status})
