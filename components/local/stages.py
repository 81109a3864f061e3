"""``up`` as data: named stages, each the files it writes, the objects it applies, what it waits
for, and the processes it starts, in that order; built by ``plan`` from the stack's render and the
cluster's ``Layout`` before anything starts, so ``up --dry-run`` prints exactly what ``up`` does.

The order is what the platform needs, and EKS's: its own add-ons first, as EKS installs them with
the cluster (their DaemonSets' pods are made as the nodes register); the fleet before the
platform's objects are scheduled; CRDs Established
before their objects; Kueue's webhook Secret and webhook configurations before Kueue (its
certificate controller waits for them), and Kueue ready before the objects its webhooks admit;
Karpenter's node class before Karpenter; and every pod placed before the node condition that the
agent's pods report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Union


from ..facts import yaml_io
from ..config import GpuTrainingPlatformArgs, node_repair_settings
from .build import KARPENTER_KWOK
from .control_plane import CONTROL_PLANE_FILES, control_plane_processes
from .controllers import (
    KUEUE_CONFIG_MAP, KUEUE_WEBHOOK_SERVICE, KWOK_NODE_CLASS_CRD, karpenter_files, karpenter_process, kueue_files,
    kueue_process, kueue_webhook_secret,
)
from .eks_addons import eks_system_objects
from .fleet import SimulatedNode, karpenter_instance_types, managed_nodes
from .job_controllers import JOB_CONTROLLERS, identity_objects, installed, job_controller_process, webhook_files
from .layout import File, Layout
from .health_gate_runner import gate_deployed, health_gate_process
from .node_health import node_health_process
from .node_repair import node_repair_process, repair_files
from .platform import KWOK_NODE_CLASS, PlatformObjects, collect, describe, localize
from .processes import Process, start_order
from .scale import STACK_TOPOLOGY, SimulatedTopology

WAITS = {
    "allocatable": "every simulated node allocates its instance type's CPU, memory, GPUs, EFA devices and pods",
    "established": "every CRD of the stage is Established",
    "placed": "every pod is bound to a node and every Deployment and DaemonSet has made its pods",
    "hardware-reported": "AcceleratedHardwareReady is reported where the node monitoring agent's pods run",
}
"""What a stage can wait for once its objects are in, by name."""


@dataclass(frozen=True)
class ObjectFile:
    """An object shipped in a built Go module, read when it is applied, so a dry run needs no build."""

    kind: str
    name: str
    path: Path

    def load(self) -> dict[str, Any]:
        return yaml_io.load(self.path.read_text())


StageObject = Union[dict[str, Any], ObjectFile]


@dataclass(frozen=True)
class Stage:
    """One step of ``up``: its files are written, then its objects applied, its waits waited
    for, and its processes started."""

    name: str
    """What ``up`` logs and the dry run prints (``crds``, ``webhooks``)."""
    purpose: str
    """What the stage brings, in a few words."""
    files: tuple[File, ...] = ()
    objects: tuple[StageObject, ...] = ()
    """Applied in order (a Node is created with its status, as a kubelet registers it)."""
    waits: tuple[str, ...] = ()
    """Names in ``WAITS``, waited for once the objects are in."""
    processes: tuple[Process, ...] = ()
    """Started last, in ``start_order``, each ready before the next."""
    notes: tuple[str, ...] = ()
    """What the stage leaves out, and why."""


@dataclass(frozen=True)
class Plan:
    """What ``up`` does for one render, and what it makes of the render on the way."""

    stages: tuple[Stage, ...]
    nodes: tuple[SimulatedNode, ...]
    platform: Optional[PlatformObjects] = None
    """The platform's objects as applied (None for a bare cluster)."""


def kwok_node_class() -> dict[str, Any]:
    return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": KWOK_NODE_CLASS["kind"],
            "metadata": {"name": KWOK_NODE_CLASS["name"]}}


def repair_config(args: GpuTrainingPlatformArgs, nodes: Iterable[SimulatedNode]) -> dict[str, Any]:
    """What the simulation needs, per managed GPU pool whose ``nodeRepair`` is enabled: the
    ``nodeRepairConfig`` the stack sends EKS and one of its nodes as registered (the template of a
    replacement). Empty when no pool repairs."""
    templates: dict[str, dict[str, Any]] = {}
    for node in nodes:
        templates.setdefault(node.pool, node.manifest())
    return {pool.name: {"settings": node_repair_settings(pool.node_repair), "template": templates[pool.name]}
            for pool in args.gpu_node_groups if pool.node_repair.enabled and pool.name in templates}


def plan(
    layout: Layout, args: GpuTrainingPlatformArgs, render: dict[str, Any], *, bare: bool = False,
    topology: SimulatedTopology = STACK_TOPOLOGY,
) -> Plan:
    """The stages of ``up`` for a stack's render (``resources``, ``stack_objects``,
    ``chart_objects``); ``bare``: the fleet without the platform; ``topology``: the simulated network."""
    nodes = tuple(managed_nodes(args, render["resources"], topology))
    stages = [
        Stage("control-plane", "etcd, the API server, the controllers and KWOK's simulated kubelets",
              processes=control_plane_processes(layout)),
        # EKS installs its add-ons with the cluster, before a node group joins; their DaemonSets'
        # pods are then made and placed as the nodes register, beside the fleet's creation.
        Stage("eks-system", "the DaemonSets EKS itself runs on every node", objects=tuple(eks_system_objects())),
        Stage("fleet", "the stack's managed node groups' nodes, simulated",
              objects=tuple(node.manifest() for node in nodes),
              waits=("allocatable", "placed") if bare else ("allocatable",)),
    ]
    if bare:
        return Plan(tuple(stages), nodes)
    chart_objects = render["chart_objects"]
    platform = collect(render["stack_objects"], chart_objects)
    kueue_on = any(o.get("kind") == "ConfigMap" and o["metadata"].get("name") == KUEUE_CONFIG_MAP[1] for o in chart_objects)
    karpenter_on = any(o.get("kind") == "NodePool" for o in platform.objects)
    # What runs beside the cluster has its address before anything points at it: Kueue's webhooks
    # and CRD conversion name its port when they are created.
    out_of_cluster: dict[tuple[str, str], tuple[str, str]] = {}
    replaced: set[tuple[str, str, str]] = set()
    kueue_secret = None
    if kueue_on:
        kueue_secret, bundle = kueue_webhook_secret(chart_objects)
        replaced.add(("Secret", kueue_secret["metadata"]["namespace"], kueue_secret["metadata"]["name"]))
        out_of_cluster[KUEUE_WEBHOOK_SERVICE] = (layout.url("kueue-webhook", "https"), bundle)
    controller_files: tuple[File, ...] = ()
    controller_processes: tuple[Process, ...] = ()
    running_controllers = []
    for controller in JOB_CONTROLLERS:
        if installed(controller, chart_objects):
            files, bundle = webhook_files(controller, chart_objects, layout)
            controller_files += files
            controller_processes += (job_controller_process(controller, layout),)
            running_controllers.append(controller)
            out_of_cluster[controller.webhook_service] = (layout.url(f"{controller.name}-webhook", "https"), bundle)
    localized = localize(platform, out_of_cluster=out_of_cluster, replaced=replaced)
    crds: tuple[StageObject, ...] = tuple(localized.crds)
    if karpenter_on:
        crd_name, crd_file = KWOK_NODE_CLASS_CRD
        crds += (ObjectFile("CustomResourceDefinition", crd_name, layout.binary(KARPENTER_KWOK, crd_file)),)
    webhooks = [o for o in localized.objects if o["kind"].endswith("WebhookConfiguration")]
    # The job controllers act as their ServiceAccounts: their RBAC is there before they start.
    identities = [o for c in running_controllers for o in identity_objects(c, localized.objects)]
    rest = [o for o in localized.objects if o not in webhooks and o not in identities]
    stages += [
        Stage("crds", "the stack's and the charts' CRDs", objects=crds, waits=("established",)),
        Stage("namespaces", "the stack's and the charts' namespaces", objects=tuple(localized.namespaces)),
        Stage("webhooks", "Kueue's webhook Secret, the webhook configurations and the JobSet and Kubeflow Trainer "
              "ServiceAccounts' RBAC, then Kueue, JobSet and Kubeflow Trainer beside the cluster",
              files=(kueue_files(layout, chart_objects, kueue_secret) if kueue_secret else ()) + controller_files,
              objects=((kueue_secret,) if kueue_secret else ()) + tuple(webhooks) + tuple(identities),
              processes=((kueue_process(layout, chart_objects),) if kueue_on else ()) + controller_processes),
    ]
    if karpenter_on:
        nodepools = [o for o in render["stack_objects"] if o.get("kind") == "NodePool"]
        stages.append(Stage(
            "karpenter", "the KWOK node class the NodePools point at, then Karpenter's KWOK provider beside the cluster",
            files=karpenter_files(layout, karpenter_instance_types(args, nodepools)), objects=(kwok_node_class(),),
            processes=(karpenter_process(layout, chart_objects),),
        ))
    gated = gate_deployed(render["stack_objects"])
    if gated:
        # Before the platform: its pods wait for GPU nodes the gate admits, and the gate waits for
        # its check verdicts, which the reporter writes.
        stages.append(Stage(
            "health-gate", "the health gate's program beside the cluster, as its ServiceAccount, and the reporter "
            "that writes its check containers' verdicts and the node monitoring agent's condition",
            processes=(health_gate_process(layout), node_health_process(layout)),
        ))
    stages.append(Stage("platform", "every other object of the stack and its charts", objects=tuple(rest),
                        waits=("placed",), notes=tuple(localized.left_out)))
    repaired = repair_config(args, nodes)
    if repaired:
        stages.append(Stage(
            "node-repair", f"EKS node auto repair of {', '.join(sorted(repaired))} (nodeRepair on), simulated beside "
            "the cluster: a replacement registers, the bad node is drained through the Eviction API",
            files=repair_files(layout, repaired), processes=(node_repair_process(layout),),
        ))
    stages += [
        Stage("node-health", "the node monitoring agent's condition, reported in its place",
              waits=("hardware-reported",),
              processes=(node_health_process(layout),) if args.node_monitoring.enabled and not gated else ()),
    ]
    return Plan(tuple(stages), nodes, localized)


def _object_line(obj: StageObject) -> str:
    if isinstance(obj, ObjectFile):
        return f"{obj.kind} {obj.name} (from {obj.path})"
    return describe(obj)


def describe_plan(plan: Plan, layout: Layout) -> list[str]:
    """Every stage's files, objects, waits and processes (each command line with its environment),
    in the order ``up`` takes them."""
    lines = [f"before anything starts: writes {', '.join(str(layout.state / name) for name in CONTROL_PLANE_FILES)}"]
    started: list[str] = []
    for stage in plan.stages:
        lines.append(f"stage {stage.name}: {stage.purpose}")
        lines += [f"  write {file.path}" for file in stage.files]
        lines += [f"  apply {_object_line(obj)}" for obj in stage.objects]
        lines += [f"  wait until {WAITS[wait]}" for wait in stage.waits]
        for process in start_order(stage.processes, started):
            after = f" after {', '.join(process.after)}" if process.after else ""
            lines.append(f"  start {process.name}{after}: {process.command_line()}")
            if process.ready is not None:
                lines.append(f"    ready when {process.ready.describe()}")
            started.append(process.name)
        lines += [f"  leave out {note}" for note in stage.notes]
        if not (stage.files or stage.objects or stage.waits or stage.processes):
            lines.append("  nothing, for this stack")
    return lines
