"""What a training pod may request on a GPU node: the node's allocatable less what runs beside it.

A training pod takes a whole node, so its CPU and memory requests are sized from the node. The
scheduler admits it only where its requests fit the node's allocatable less the requests of the
pods already there, and on a GPU node those are DaemonSets that start as the node joins: EKS's
(``aws-node``, ``kube-proxy``, the Pod Identity agent), the GPU Operator's NFD worker and operands,
the EFA device plugin, the node monitoring agent and its DCGM host engine, the topology labeler and
the FSx CSI node driver. ``NodeLoad`` is what they request on one node; ``training_room`` is what is
left for the pod; a job's default requests are that room less ``reserve`` (for DaemonSets a team
adds of its own: log shippers, security agents), CPU in whole cores.

The allocatable is computed as the EKS AMI reserves it (``facts.node_allocatable``, checked against
Karpenter's instance-type reference); the DaemonSets' requests are the constants of
``addons.system_footprints``, each checked against what its chart renders. That a full job then
fits an empty node of each shipped pool, beside every DaemonSet, is proven by the real scheduler in
the cluster tier (``tests/cluster/test_placement.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from ..addons import system_footprints as footprints
from ..addons.system_footprints import PodFootprint
from ..config import GpuTrainingPlatformArgs
from ..facts.catalog import GPU_INSTANCE_TYPES
from ..facts.gpu_nodes import EFA_NODE_HUGEPAGES_MIB
from ..facts.node_allocatable import allocatable

RESERVE_FRACTION = 100
RESERVE_MIN_CPU_MILLICORES, RESERVE_MIN_MEMORY_MIB = 500, 1024
"""What a default request leaves free on top of the known DaemonSets: 1/100 of the node's
allocatable CPU and memory, at least half a core and 1 GiB, so a DaemonSet a team adds later
(a log shipper, a security agent) still schedules beside the training pod."""


@dataclass(frozen=True)
class NodeLoad:
    """What stands on a GPU node before a training pod arrives."""

    cpu_millicores: int
    """CPU its DaemonSets' pods request, added up."""
    memory_mib: int
    """Memory its DaemonSets' pods request, added up."""
    pods: int
    """Its DaemonSets' pods (each takes one of the node's pod slots)."""
    hugepages_mib: int = 0
    """Memory the node pre-allocates as hugepages (EFA's 5128 2-MiB pages on an EFA node), which the
    kubelet takes out of allocatable memory."""

    @classmethod
    def of(cls, daemonsets: Iterable[PodFootprint], *, hugepages_mib: int = 0) -> "NodeLoad":
        pods = list(daemonsets)
        return cls(sum(p.cpu_millicores for p in pods), sum(p.memory_mib for p in pods), len(pods), hugepages_mib)


@dataclass(frozen=True)
class NodeRoom:
    """What one node of a type offers a training pod."""

    instance_type: str
    cpu_millicores: int
    memory_mib: int

    def __str__(self) -> str:
        return f"{self.cpu_millicores}m CPU and {self.memory_mib}Mi on {self.instance_type}"


def gpu_node_daemonsets(
    instance_type: str, *, efa_plugin: bool = True, node_monitoring: bool = True,
    labeler: Optional[PodFootprint] = footprints.TOPOLOGY_LABELER, fsx: bool = True,
    gpu_operator_version: str = footprints.GPU_OPERATOR_DEFAULT_VERSION,
) -> list[PodFootprint]:
    """The DaemonSets whose pods stand on every GPU node of ``instance_type`` (``labeler`` None: no
    labeler). The defaults are everything this library can run there, at its default requests."""
    pods = list(footprints.EKS_NODE_DAEMONSETS)
    pods += footprints.GPU_OPERATOR_DAEMONSETS[gpu_operator_version]
    pods += footprints.GPU_OPERATOR_OPERANDS[gpu_operator_version]
    if efa_plugin and GPU_INSTANCE_TYPES[instance_type].efa_interfaces > 0:
        # The plugin's node affinity lists the EFA types only (``efa_device_plugin.efa_instance_types``).
        pods.append(footprints.EFA_DEVICE_PLUGIN)
    if node_monitoring:
        pods += footprints.NODE_MONITORING_GPU_DAEMONSETS[footprints.NODE_MONITORING_CHART_VERSION]
    if labeler is not None:
        pods.append(labeler)
    if fsx:
        pods.append(footprints.FSX_CSI_NODE)
    return pods


def library_node_load(instance_type: str, *, efa_node: bool) -> NodeLoad:
    """Every DaemonSet this library can run on a GPU node, at its default requests: what a training
    job built outside a stack leaves room for."""
    return NodeLoad.of(gpu_node_daemonsets(instance_type), hugepages_mib=EFA_NODE_HUGEPAGES_MIB if efa_node else 0)


def stack_node_load(args: GpuTrainingPlatformArgs, instance_type: str, *, efa_node: bool) -> NodeLoad:
    """What the stack's own DaemonSets request on a GPU node of ``instance_type``; ``efa_node``: the
    node's pool has EFA on (its nodes pre-allocate EFA's hugepages)."""
    karpenter_pools = args.karpenter.gpu_node_pools if args.karpenter.enabled else []
    labeler = args.topology_labeler
    daemonsets = gpu_node_daemonsets(
        instance_type,
        efa_plugin=any(pool.efa_enabled for pool in [*args.gpu_node_groups, *karpenter_pools]),
        node_monitoring=args.node_monitoring.enabled,
        labeler=footprints.labeler_footprint(labeler.resources.cpu_request, labeler.resources.memory_request)
        if labeler.enabled else None,
        fsx=args.storage.fsx.enabled,
        gpu_operator_version=args.gpu_operator.chart_version,
    )
    return NodeLoad.of(daemonsets, hugepages_mib=EFA_NODE_HUGEPAGES_MIB if efa_node else 0)


def training_room(instance_type: str, load: NodeLoad) -> NodeRoom:
    """What a node of ``instance_type`` offers one pod beside ``load``."""
    node = allocatable(instance_type, hugepages_mib=load.hugepages_mib)
    return NodeRoom(instance_type, node.cpu_millicores - load.cpu_millicores, node.memory_mib - load.memory_mib)


def reserve(instance_type: str, load: NodeLoad) -> tuple[int, int]:
    """CPU millicores and memory MiB a default request leaves free beyond ``load``."""
    node = allocatable(instance_type, hugepages_mib=load.hugepages_mib)
    return (max(RESERVE_MIN_CPU_MILLICORES, node.cpu_millicores // RESERVE_FRACTION),
            max(RESERVE_MIN_MEMORY_MIB, node.memory_mib // RESERVE_FRACTION))


def default_requests(instance_types: Iterable[str], load_of) -> tuple[int, int]:
    """A training pod's default CPU (whole cores, as millicores) and memory (MiB) over
    ``instance_types``: the smallest room any of them offers, less the reserve. ``load_of(type)``
    is the NodeLoad of a node of that type."""
    cpus, memories = [], []
    for instance_type in instance_types:
        load = load_of(instance_type)
        room = training_room(instance_type, load)
        cpu_reserve, memory_reserve = reserve(instance_type, load)
        cpus.append((room.cpu_millicores - cpu_reserve) // 1000 * 1000)
        memories.append(room.memory_mib - memory_reserve)
    return max(1000, min(cpus)), max(1024, min(memories))
