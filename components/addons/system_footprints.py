"""What the stack puts on its system nodes: each controller's replicas, requests and hostname
anti-affinity, and the DaemonSets every system node runs, per chart version.

``pulumi up`` cannot render a chart (the program never has the chart sources), so these are named
constants. Each chart's figures are what that chart renders with the values this stack passes;
``tests/unit/platform/test_system_capacity.py`` renders the pinned charts with Helm's own engine and fails when a
constant differs from what the chart creates. EKS add-ons that no chart here renders (CoreDNS,
kube-proxy, the VPC CNI, the Pod Identity agent, the FSx CSI driver) cite their own source.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.addon_settings import LabelerResourcesConfig
from ..facts.quantity import MIB, parse_quantity
from . import job_apis, karpenter, kueue
from .efa_device_plugin import EFA_PLUGIN_RESOURCES


def _millicores(quantity: str) -> int:
    return int(parse_quantity(quantity) * 1000)


def _mebibytes(quantity: str) -> int:
    return int(parse_quantity(quantity) / MIB)


@dataclass(frozen=True)
class PodFootprint:
    """One kind of pod on system nodes."""

    name: str
    """Workload name, as the chart or add-on names it."""
    replicas: int
    """Pods of a Deployment; 1 for a DaemonSet (one pod on every node)."""
    cpu_millicores: int
    """CPU the pod requests (its containers' requests added up)."""
    memory_mib: int
    """Memory the pod requests, in MiB."""
    one_per_node: bool = False
    """Required hostname anti-affinity between the replicas: each needs a node of its own."""


_KARPENTER_CONTROLLER = PodFootprint(
    "karpenter",
    # The chart's default ``replicas: 2`` and ``affinity.podAntiAffinity`` (required, topologyKey
    # kubernetes.io/hostname), the same in 1.14.1 and 1.14.3; requests are the stack's
    # ``CONTROLLER_RESOURCES``.
    replicas=2,
    cpu_millicores=_millicores(karpenter.CONTROLLER_RESOURCES["requests"]["cpu"]),
    memory_mib=_mebibytes(karpenter.CONTROLLER_RESOURCES["requests"]["memory"]),
    one_per_node=True,
)
KARPENTER_CONTROLLER = {"1.14.3": _KARPENTER_CONTROLLER, "1.14.1": _KARPENTER_CONTROLLER}
"""The Karpenter controller by chart version (chart values.yaml, ``replicas`` and ``affinity``)."""

KUEUE_CONTROLLER = {
    # The stack's ``CONTROLLER_REPLICAS``; requests are the chart's ``controllerManager.manager.resources``
    # default (500m CPU, 512Mi); no anti-affinity in the chart.
    "0.19.2": PodFootprint("kueue-controller-manager", replicas=kueue.CONTROLLER_REPLICAS, cpu_millicores=500, memory_mib=512),
}
"""Kueue's controller by chart version."""

JOBSET_CONTROLLER = {
    # The stack's ``CONTROLLER_REPLICAS`` and ``CONTROLLER_RESOURCES``; no anti-affinity in the chart.
    "0.12.0": PodFootprint("jobset-controller", replicas=job_apis.CONTROLLER_REPLICAS,
                           cpu_millicores=_millicores(job_apis.CONTROLLER_RESOURCES["requests"]["cpu"]),
                           memory_mib=_mebibytes(job_apis.CONTROLLER_RESOURCES["requests"]["memory"])),
}
"""JobSet's controller by chart version."""

TRAINER_CONTROLLER = {
    "2.3.0": PodFootprint("kubeflow-trainer-controller-manager", replicas=job_apis.CONTROLLER_REPLICAS,
                          cpu_millicores=_millicores(job_apis.CONTROLLER_RESOURCES["requests"]["cpu"]),
                          memory_mib=_mebibytes(job_apis.CONTROLLER_RESOURCES["requests"]["memory"])),
}
"""Kubeflow Trainer's controller by chart version."""

_GPU_OPERATOR_CONTROLLERS = (
    # The chart's ``operator.resources`` and the NFD subchart's ``master.resources`` and ``gc.resources``.
    PodFootprint("gpu-operator", replicas=1, cpu_millicores=200, memory_mib=100),
    PodFootprint("gpu-operator-node-feature-discovery-master", replicas=1, cpu_millicores=100, memory_mib=128),
    PodFootprint("gpu-operator-node-feature-discovery-gc", replicas=1, cpu_millicores=10, memory_mib=128),
)
GPU_OPERATOR_CONTROLLERS = {"v26.7.0": _GPU_OPERATOR_CONTROLLERS, "v24.9.2": _GPU_OPERATOR_CONTROLLERS}
"""The GPU Operator's Deployments by chart version (the same figures in both versions' values.yaml)."""

GPU_OPERATOR_DAEMONSETS = {
    # NFD's worker runs on every node (the subchart's ``worker.resources``: 5m, 64Mi). The operands
    # (device plugin, DCGM exporter, GFD, validators) select GPU nodes only.
    "v26.7.0": (PodFootprint("gpu-operator-node-feature-discovery-worker", 1, 5, 64),),
    "v24.9.2": (PodFootprint("gpu-operator-node-feature-discovery-worker", 1, 5, 64),),
}
"""The GPU Operator chart's DaemonSets that run on system nodes, by chart version."""

GPU_OPERATOR_OPERANDS = {
    # What the operator creates on GPU nodes with the stack's ClusterPolicy (driver, toolkit, DCGM and
    # the MIG manager off): the device plugin, GPU feature discovery, the DCGM exporter and the
    # validator. Their DaemonSets (NVIDIA/gpu-operator assets/state-*/..._daemonset.yaml) request no
    # CPU or memory, and the stack sets no ``resources`` in the ClusterPolicy; each pod takes a slot.
    version: (
        PodFootprint("nvidia-device-plugin-daemonset", 1, 0, 0),
        PodFootprint("gpu-feature-discovery", 1, 0, 0),
        PodFootprint("nvidia-dcgm-exporter", 1, 0, 0),
        PodFootprint("nvidia-operator-validator", 1, 0, 0),
    )
    for version in ("v26.7.0", "v24.9.2")
}
"""The GPU Operator's operands on every GPU node, by chart version."""
GPU_OPERATOR_DEFAULT_VERSION = "v26.7.0"
"""The chart version a GPU node's load is figured for when no stack names one (the default's)."""

EFA_DEVICE_PLUGIN = PodFootprint(
    "aws-efa-k8s-device-plugin", 1,
    _millicores(EFA_PLUGIN_RESOURCES["requests"]["cpu"]), _mebibytes(EFA_PLUGIN_RESOURCES["requests"]["memory"]),
)
"""The EFA device plugin's pod, on every GPU node of an EFA type (the stack's ``EFA_PLUGIN_RESOURCES``)."""


def labeler_footprint(cpu_request: str, memory_request: str) -> PodFootprint:
    """The topology labeler's pod, on every GPU node, at the stack's requests."""
    return PodFootprint("topology-labeler", 1, _millicores(cpu_request), _mebibytes(memory_request))


TOPOLOGY_LABELER = labeler_footprint(LabelerResourcesConfig().cpu_request, LabelerResourcesConfig().memory_request)
"""The labeler's pod at its default requests."""

NODE_MONITORING_DAEMONSETS = {
    # The agent runs on every EC2 node (chart 1.7.0 ``nodeAgent.resources.requests``: 10m, 30Mi); its
    # ``dcgm-server`` DaemonSet selects NVIDIA instance types only.
    "1.7.0": (PodFootprint("eks-node-monitoring-agent", 1, 10, 30),),
}
"""The node monitoring agent's DaemonSets on system nodes, by the chart version of its add-on."""

NODE_MONITORING_GPU_DAEMONSETS = {
    # On GPU nodes the agent and the ``dcgm-server`` host engine it reads the GPUs through (chart
    # 1.7.0 ``dcgmAgent.resources``: none).
    "1.7.0": (*NODE_MONITORING_DAEMONSETS["1.7.0"], PodFootprint("dcgm-server", 1, 0, 0)),
}
"""The node monitoring agent's DaemonSets on GPU nodes, by the chart version of its add-on."""

NODE_MONITORING_CHART_VERSION = "1.7.0"
"""The agent chart the add-on installs today; EKS resolves the exact build at deployment, so the
figures are those of the newest chart this library has checked."""

COREDNS = PodFootprint("coredns", replicas=2, cpu_millicores=100, memory_mib=70)
"""CoreDNS as the EKS add-on runs it: two replicas, each requesting 100m CPU and 70Mi, with a
preferred hostname anti-affinity (kubernetes/kubernetes
cluster/addons/dns/coredns/coredns.yaml.base). It lands on system nodes, the only untainted ones."""

EKS_NODE_DAEMONSETS = (
    # amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml: ``resources.requests.cpu: 25m``.
    PodFootprint("aws-node", 1, 25, 0),
    # The EKS kube-proxy add-on's DaemonSet requests 100m CPU and no memory, fixed by the add-on
    # (aws/containers-roadmap#1509, #2852 ask for them to be configurable).
    PodFootprint("kube-proxy", 1, 100, 0),
    # aws/eks-pod-identity-agent charts/eks-pod-identity-agent values.yaml: ``resources: {}``; it
    # still takes one pod slot on each node.
    PodFootprint("eks-pod-identity-agent", 1, 0, 0),
)
"""The EKS add-ons' DaemonSets on every node of a created cluster."""

FSX_CSI_CONTROLLER = PodFootprint("fsx-csi-controller", replicas=2, cpu_millicores=40, memory_mib=136)
"""The FSx CSI add-on's controller: two replicas, each the driver (10m, 40Mi) and three sidecars
(10m, 32Mi each) (kubernetes-sigs/aws-fsx-csi-driver charts/aws-fsx-csi-driver/values.yaml, driver
v1.10.0: ``controller.resources``, ``sidecars.*.resources``)."""

FSX_CSI_NODE = PodFootprint("fsx-csi-node", 1, 30, 104)
"""The FSx CSI add-on's node DaemonSet: the driver (10m, 40Mi) with its node-driver-registrar and
liveness-probe sidecars (10m, 32Mi each), same chart values; it tolerates every taint."""
