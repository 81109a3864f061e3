"""Do the stack's controllers fit on its system nodes? A check before anything is created.

A Helm release is atomic: when a controller's pods stay Pending because the system nodes are full,
Helm waits out the release's timeout and rolls it back, and `pulumi up` fails halfway. What each
add-on puts on system nodes is in ``addons.system_footprints``; what a node offers is the kubelet's
allocatable (``facts.node_allocatable``). The check places every controller replica on the nodes
the group is created with (``desiredSize``), each replica of a controller with required hostname
anti-affinity on a node of its own, the rest largest first onto the node with the most CPU left,
after the DaemonSets every node runs.

This is an offline pre-check, not the scheduler: it can refuse a packing the scheduler would find
(it is greedy), and it knows nothing of pods this stack does not create. Whether the controllers
really schedule is proven on the local control plane with the real scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..addons.job_apis import jobset_needed, trainer_needed
from ..addons import system_footprints as footprints
from ..addons.system_footprints import PodFootprint
from ..config import GpuTrainingPlatformArgs, Problem
from ..facts.node_allocatable import SYSTEM_INSTANCE_TYPES, Allocatable, allocatable

MOST_NODES_SUGGESTED = 10
"""The largest node count a refusal suggests; beyond it the suggestion is a larger type."""


def system_node_pods(args: GpuTrainingPlatformArgs) -> tuple[list[PodFootprint], list[PodFootprint]]:
    """What the stack runs on its system nodes: (controllers, DaemonSets on every node)."""
    controllers: list[PodFootprint] = []
    daemonsets: list[PodFootprint] = list(footprints.EKS_NODE_DAEMONSETS)
    if args.cluster.create:
        controllers.append(footprints.COREDNS)
    controllers += footprints.GPU_OPERATOR_CONTROLLERS[args.gpu_operator.chart_version]
    daemonsets += footprints.GPU_OPERATOR_DAEMONSETS[args.gpu_operator.chart_version]
    if args.karpenter.enabled:
        controllers.append(footprints.KARPENTER_CONTROLLER[args.karpenter.chart_version])
    if args.kueue.enabled:
        controllers.append(footprints.KUEUE_CONTROLLER[args.kueue.chart_version])
    if jobset_needed(args) or trainer_needed(args):
        controllers.append(footprints.JOBSET_CONTROLLER[args.job_set.chart_version])
    if trainer_needed(args):
        controllers.append(footprints.TRAINER_CONTROLLER[args.trainer.chart_version])
    if args.node_monitoring.enabled:
        daemonsets += footprints.NODE_MONITORING_DAEMONSETS[footprints.NODE_MONITORING_CHART_VERSION]
    if args.storage.fsx.enabled:
        controllers.append(footprints.FSX_CSI_CONTROLLER)
        daemonsets.append(footprints.FSX_CSI_NODE)
    return controllers, daemonsets


@dataclass
class _Node:
    cpu: int
    memory: int
    pods: int

    def holds(self, pod: PodFootprint) -> bool:
        return self.cpu >= pod.cpu_millicores and self.memory >= pod.memory_mib and self.pods >= 1

    def take(self, pod: PodFootprint) -> None:
        self.cpu -= pod.cpu_millicores
        self.memory -= pod.memory_mib
        self.pods -= 1


def unplaced(node: Allocatable, count: int, controllers: list[PodFootprint], daemonsets: list[PodFootprint]) -> Optional[str]:
    """Why the pods do not fit on ``count`` nodes of allocatable ``node``; None when they do."""
    daemon_cpu = sum(d.cpu_millicores for d in daemonsets)
    daemon_memory = sum(d.memory_mib for d in daemonsets)
    nodes = [_Node(node.cpu_millicores - daemon_cpu, node.memory_mib - daemon_memory, node.pods - len(daemonsets)) for _ in range(count)]
    if count == 0:
        return "no system node is created (desiredSize 0)" if controllers else None
    if nodes[0].cpu < 0 or nodes[0].memory < 0 or nodes[0].pods < 0:
        return f"the DaemonSets alone ({daemon_cpu}m CPU, {daemon_memory}Mi) exceed one node"
    spread = [c for c in controllers if c.one_per_node]
    rest = sorted(
        (c for c in controllers if not c.one_per_node for _ in range(c.replicas)),
        key=lambda c: (c.cpu_millicores, c.memory_mib),
        reverse=True,
    )
    for controller in spread:
        if controller.replicas > count:
            return f"{controller.name} needs {controller.replicas} nodes (required hostname anti-affinity, one replica per node)"
        for target in sorted(nodes, key=lambda n: n.cpu, reverse=True)[: controller.replicas]:
            if not target.holds(controller):
                return f"a node has {target.cpu}m CPU and {target.memory}Mi left, too little for a {controller.name} replica ({controller.cpu_millicores}m, {controller.memory_mib}Mi)"
            target.take(controller)
    for pod in rest:
        fitting = [n for n in nodes if n.holds(pod)]
        if not fitting:
            left = ", ".join(f"{n.cpu}m/{n.memory}Mi" for n in nodes)
            return f"no node has room for {pod.name} ({pod.cpu_millicores}m CPU, {pod.memory_mib}Mi) once the rest is placed (left per node: {left})"
        max(fitting, key=lambda n: n.cpu).take(pod)
    return None


def _describe(controllers: list[PodFootprint], daemonsets: list[PodFootprint]) -> str:
    parts = [f"{c.name} {c.replicas}x{c.cpu_millicores}m" for c in controllers]
    per_node = sum(d.cpu_millicores for d in daemonsets)
    return ", ".join(parts) + f"; DaemonSets {per_node}m on every node"


def validate_system_capacity(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """The system node group holds every controller the stack puts on it (see the module docstring)."""
    system = args.system_node_group
    if not system.enabled:
        return []
    unknown = [(i, t) for i, t in enumerate(system.instance_types) if t not in SYSTEM_INSTANCE_TYPES]
    if unknown:
        allowed = ", ".join(SYSTEM_INSTANCE_TYPES)
        return [
            Problem(
                f"systemNodeGroup.instanceTypes[{i}]",
                f"'{name}': its kubelet allocatable is not known here, so the controllers' fit cannot be checked; allowed: {allowed}",
            )
            for i, name in unknown
        ]
    # EKS may launch any of the listed types: the smallest must hold everything.
    smallest = min(system.instance_types, key=lambda t: (allocatable(t).cpu_millicores, allocatable(t).memory_mib))
    node = allocatable(smallest)
    controllers, daemonsets = system_node_pods(args)
    reason = unplaced(node, system.desired_size, controllers, daemonsets)
    if reason is None:
        return []
    enough = next((n for n in range(system.desired_size + 1, MOST_NODES_SUGGESTED + 1) if unplaced(node, n, controllers, daemonsets) is None), None)
    larger = next(
        (t for t in SYSTEM_INSTANCE_TYPES if unplaced(allocatable(t), system.desired_size, controllers, daemonsets) is None and t.split(".")[0] == smallest.split(".")[0]),
        None,
    )
    fixes = []
    if larger is not None:
        fixes.append(f"instanceTypes [{larger}]")
    if enough is not None:
        fixes.append(f"desiredSize {enough}")
    return [
        Problem(
            "systemNodeGroup.instanceTypes",
            f"{system.desired_size} x {smallest} ({node.cpu_millicores}m CPU, {node.memory_mib}Mi, {node.pods} pods allocatable each) "
            f"cannot hold the controllers the stack puts there ({_describe(controllers, daemonsets)}): {reason}; "
            f"Helm would wait for Pending pods and roll the release back; allowed: {' or '.join(fixes) or 'a larger instance type'}",
        )
    ]
