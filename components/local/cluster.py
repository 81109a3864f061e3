"""A local cluster for a stack file: the control plane, the simulated fleet and the platform.

``up`` renders the stack, builds what is missing, lays the cluster out (its ports and files) and
runs the stages ``stages.plan`` makes of the render: it starts everything on loopback, creates the
stack's nodes, applies the stack's objects and its charts' objects, starts Kueue and Karpenter's
KWOK provider, and waits until every pod the platform creates is placed; then reports the node
monitoring agent's ``AcceleratedHardwareReady`` where its pods stand (``node_health``). A failure
stops every process it started before it raises. ``dry_run`` says all of that without doing any of
it. ``down`` stops the processes recorded in the state folder and removes it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..config import GpuTrainingPlatformArgs
from ..offline.chart_sources import ChartSources, ChartUnavailable
from ..offline.commands import collection_paused
from ..offline.engine import PlausibleMocks
from ..offline.render.registrations import Resource, render_stack
from ..offline.render import RenderError, write_render
from ..offline.render.files import is_kubernetes_object, manifest
from ..platform.stack_files import StackFile, locate_stack
from . import build as builds
from .control_plane import control_plane_processes, write_control_plane_files
from .errors import LocalClusterError
from .faults import Faults
from .layout import Layout
from .node_group_update import node_group_settings, update_running_nodes
from .node_health import report_accelerated_hardware
from .node_registration import check_allocatable, create_nodes
from .fleet import SimulatedNode
from .processes import Process, Supervisor
from .scale import SCALED_TOPOLOGY, STACK_TOPOLOGY, scaled_stack
from .placement_wait import wait_until_placed
from .platform import Applier, PlatformObjects
from . import stages
from .stages import ObjectFile, Plan, Stage

PLACED_TIMEOUT_SECONDS = 180
"""How long ``up`` waits for every pod to be placed before it reports the ones that are not; a
fleet gets ``PLACED_SECONDS_PER_NODE`` more for each node (the DaemonSets' pods on each)."""
PLACED_SECONDS_PER_NODE = 0.3
EARLY_PROCESSES = ("etcd", "kube-apiserver")
"""Started before the render, without waiting for each other: the API server retries etcd until it
answers, as under kwokctl. The controller manager gives up on an API server not healthy within 10 s,
which a loaded machine can take, so the rest start once the API server is ready."""


def creation_order(registrations: list[Resource]) -> list[Resource]:
    """The registrations in the order a deployment creates them: by how long the chain of what each
    waits for is (its dependencies and its parent), registration order among equals. The mock
    engine registers every resource as soon as its program runs; a deployment creates a resource
    once everything it waits for exists, so one with few dependencies (a TrainJob's runtime) is
    created well before one with many (the TrainJob)."""
    by_urn = {r.urn: r for r in registrations}
    depths: dict[str, int] = {}

    def depth(registration: Resource) -> int:
        if registration.urn not in depths:
            depths[registration.urn] = 0  # a cycle cannot be registered; this only ends the recursion
            waits = [by_urn[u] for u in [*registration.dependencies, registration.parent or ""] if u in by_urn]
            depths[registration.urn] = 1 + max((depth(w) for w in waits), default=0)
        return depths[registration.urn]

    return sorted(registrations, key=depth)


def default_state_dir(stack: str) -> Path:
    return builds.cache_root() / "clusters" / stack


@dataclass(frozen=True)
class Prepared:
    """What ``LocalCluster.prepare`` gives ``start``: the render and the components to run it on."""

    render: dict[str, Any]
    kubernetes: builds.GoComponent
    components: tuple[builds.GoComponent, ...]
    bare: bool
    started: float
    """``time.monotonic()`` when ``prepare`` began: the cluster's timings count from it."""
    layout: Optional[Layout]
    """The state folder laid out and etcd and the API server launched, when all was built."""


@dataclass
class LocalCluster:
    """One local cluster, running or not, described by its state folder."""

    stack: str
    state: Path
    project_root: Optional[Path] = None
    """The Pulumi project whose program runs (default: the one the stack file or the current folder is in)."""
    stack_path: Optional[Path] = None
    sources: Optional[ChartSources] = None
    """Where the charts come from (default: the configured sources, ``ChartSources.configured``)."""
    bin_dir: Optional[Path] = None
    """A folder of prebuilt binaries to use where they are the pinned versions (default:
    ``$EKS_GPU_TRAINING_BIN_DIR``; see ``build.adopt``)."""
    log: Callable[[str], None] = print
    attached: bool = False
    """Its processes end with the process that started them, however it ends: a test session's
    cluster. ``eks-gpu-training-local up`` leaves its cluster running instead."""
    scale: Optional[int] = None
    """Grow the stack's managed GPU pools to this many nodes together, in a fleet-sized network
    (``local.scale``). Default: the stack's own sizes."""
    args: Optional[GpuTrainingPlatformArgs] = None
    nodes: list[SimulatedNode] = field(default_factory=list)
    platform: Optional[PlatformObjects] = None
    layout: Optional[Layout] = None
    supervisor: Optional[Supervisor] = None
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds from the start of ``up`` to the end of the build and of each stage."""
    resources: list[dict[str, Any]] = field(default_factory=list)
    """The render's resources the running cluster was made from (its node groups' inputs among them)."""
    processes: dict[str, Process] = field(default_factory=dict)
    """The processes the plan runs, by name."""

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def render_dir(self) -> Path:
        return self.state.parent / f".{self.state.name}-render"

    def _stack_file(self) -> StackFile:
        located = locate_stack(self.stack_path or self.stack, self.project_root)
        return scaled_stack(located, self.scale) if self.scale is not None else located

    def stack_args(self) -> GpuTrainingPlatformArgs:
        """The stack's checked arguments, as ``up`` renders them (grown by ``scale``)."""
        return self._stack_file().platform_args()

    def _stack_path(self) -> Path:
        return self._stack_file().path

    def plan(self, render: dict[str, Any], layout: Layout, *, bare: bool = False) -> Plan:
        assert self.args is not None  # noqa: S101 - set by _render, which up and dry_run call first
        topology = SCALED_TOPOLOGY if self.scale is not None else STACK_TOPOLOGY
        planned = stages.plan(layout, self.args, render, bare=bare, topology=topology)
        self.nodes, self.platform, self.resources = list(planned.nodes), planned.platform, render["resources"]
        self.processes = {p.name: p for stage in planned.stages for p in stage.processes}
        return planned

    def dry_run(self, *, bare: bool = False) -> list[str]:
        """What ``up`` would build, write, apply and start, in order; nothing is built or started,
        and a running cluster of the stack is left alone. The ports are ones free now; ``up``
        chooses its own when it runs."""
        with tempfile.TemporaryDirectory(prefix="eks-gpu-training-dry-run-") as out:
            render = self._render(Path(out), bare=bare)
        kubernetes = builds.kubernetes_for(self._minor())
        layout = Layout.allocate(self.state, kubernetes=kubernetes)
        lines = [f"dry run of up {self.stack}: nothing is built, started or applied"]
        for component in builds.control_plane_for(self._minor()):
            folder = builds.bin_dir(component)
            state = "built" if builds.is_built(component) else "not built: up builds it first"
            lines.append(f"component {component.name} {component.stamp} in {folder} ({state})")
        lines.append("ports are free now; up chooses its own when it runs")
        return lines + stages.describe_plan(self.plan(render, layout, bare=bare), layout)

    def _minor(self) -> str:
        assert self.args is not None  # noqa: S101 - set by _render, which up and dry_run call first
        return self.args.cluster.kubernetes_version

    def up(self, *, bare: bool = False) -> Path:
        return self.start(self.prepare(bare=bare))

    def prepare(self, *, bare: bool = False) -> "Prepared":
        """The first part of ``up``, in this process's Python: the stack read and rendered (Pulumi's
        mock engine, process-wide, so one render at a time) and, when everything is built, etcd and
        the API server launched to come up meanwhile. ``start`` does the rest, and may run beside
        other clusters' (``LocalFleet.up``)."""
        if (self.state / "pids.json").is_file():
            raise LocalClusterError(f"a local cluster already runs from {self.state}",
                                    f"`eks-gpu-training-local down {self.stack}` first")
        started = time.monotonic()
        # The stack's arguments first: a configuration problem shows at once, before anything starts.
        located = self._read_stack()
        # The stack's own Kubernetes minor; one the local control plane cannot run is refused, naming
        # those it can.
        kubernetes = builds.kubernetes_for(self._minor())
        components = builds.control_plane_for(self._minor())
        layout: Optional[Layout] = None
        if all(builds.is_built(component) for component in components):
            # Nothing to build: etcd and the API server start now and come up during the render,
            # which is Python on the other core.
            layout = self._lay_out(kubernetes)
            try:
                render = self._render(self.render_dir, bare=bare, located=located)
            except BaseException:
                self._stop()
                raise
        else:
            # The render before the build: a stack or chart problem shows in seconds, not after
            # tens of minutes of building.
            render = self._render(self.render_dir, bare=bare, located=located)
        return Prepared(render, kubernetes, components, bare, started, layout)

    def start(self, prepared: "Prepared") -> Path:
        """The rest of ``up`` once ``prepare`` has rendered: what is missing built, the control
        plane's stages run; the kubeconfig. A failure stops what it started."""
        # Says what is missing when a component can be neither found, taken from the binaries folder, nor built.
        builds.build_all(prepared.components, log=self.log, prebuilt=builds.prebuilt_dir(self.bin_dir))
        self.timings["build"] = time.monotonic() - prepared.started
        layout = prepared.layout or self._lay_out(prepared.kubernetes)
        try:
            planned = self.plan(prepared.render, layout, bare=prepared.bare)
            applier: Optional[Applier] = None
            for stage in planned.stages:
                # Made once the API server answers: the first stage with objects or waits comes after it.
                if applier is None and (stage.objects or stage.waits):
                    applier = Applier(self.kubeconfig)
                self._run(stage, applier)
                self.timings[stage.name] = time.monotonic() - prepared.started
            assert self.supervisor is not None  # noqa: S101 - _lay_out makes it before the first stage runs
            self.supervisor.check()
        except BaseException:
            self._stop()
            raise
        (self.state / "stack.json").write_text(json.dumps({"stack": self.stack, "stackFile": str(self._stack_path()), "scale": self.scale}))
        return self.kubeconfig

    def _lay_out(self, kubernetes: builds.GoComponent) -> Layout:
        """A fresh state folder, its ports and files, and the processes that wait for nothing the
        render decides (etcd and the API server) started; ``_run`` waits until they are ready."""
        if self.state.exists():
            shutil.rmtree(self.state)
        self.layout = Layout.allocate(self.state, kubernetes=kubernetes)
        self.supervisor = Supervisor(self.state, attached=self.attached)
        try:
            write_control_plane_files(self.layout)
            self.supervisor.launch([p for p in control_plane_processes(self.layout) if p.name in EARLY_PROCESSES],
                                   log=self.log)
        except BaseException:
            self._stop()
            raise
        return self.layout

    def _stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()

    def _read_stack(self) -> StackFile:
        """The stack's file, its arguments checked and kept (``self.args``)."""
        located = self._stack_file()
        self.args = located.platform_args()
        return located

    def _render(self, out: Path, *, bare: bool = False, located: Optional[StackFile] = None) -> dict[str, Any]:
        """The render of the stack into ``out``: of ``located`` when ``_read_stack`` has read it already."""
        located = located or self._read_stack()
        self.log(f"rendering stack {self.stack} from {located.path}"
                 + (f", its GPU pools grown to {self.scale} nodes" if self.scale is not None else "")
                 + (", without its charts" if bare else ""))
        with collection_paused():
            return self._render_located(located, out, bare=bare)

    def _render_located(self, located: StackFile, out: Path, *, bare: bool) -> dict[str, Any]:
        # IDs and ARNs in AWS's own shape (CRD patterns check them), as a deployment would give back.
        result = render_stack(self.stack, located=located, mocks=PlausibleMocks())
        if bare:
            # The fleet is made from the node groups' inputs alone; the charts, about 40% of a
            # render, are the platform's, which a bare cluster leaves out.
            return {"resources": [r.as_json() for r in result.resources], "stack_objects": [], "chart_objects": []}
        try:
            sources = self.sources or ChartSources.configured(stack_dir=located.path.parent)
            summary = write_render(result, out, picture=False, sources=sources)
        except (ChartUnavailable, RenderError) as error:
            raise LocalClusterError(str(error), "make every chart available (docs/mirrors.md, where the charts "
                                    "come from): the platform would be incomplete without them") from None
        for pulled in sources.pulled:
            self.log(f"pulled chart {pulled}")
        charts = summary.charts
        failed = [f"{chart.chart} {chart.version}: {chart.skipped or chart.error}" for chart in charts
                  if chart.skipped or chart.error]
        if failed:
            raise LocalClusterError("charts not rendered: " + "; ".join(failed),
                                    "fix the chart's values or source; the platform would be incomplete without it")
        resources = [r.as_json() for r in result.resources]
        # A patch is applied as pulumi-kubernetes applies it, server-side, which creates what is missing.
        stack_objects = [manifest(r) for r in creation_order(result.resources) if is_kubernetes_object(r)]
        chart_objects = [obj for chart in charts for _, obj in chart.objects]
        return {"resources": resources, "stack_objects": stack_objects, "chart_objects": chart_objects}

    def _run(self, stage: Stage, applier: Optional[Applier]) -> None:
        """Write the stage's files, apply its objects, wait for what it waits for, start its processes."""
        assert self.supervisor is not None  # noqa: S101 - up starts the supervisor before any stage runs
        self.log(f"stage {stage.name}: {stage.purpose}")
        for file in stage.files:
            file.write()
        objects = [obj.load() if isinstance(obj, ObjectFile) else obj for obj in stage.objects]
        if objects:
            assert applier is not None  # noqa: S101 - up makes the applier once a stage has objects or waits
            nodes = [obj for obj in objects if obj.get("kind") == "Node"]
            self.log(f"applying {len(objects)} objects" + (f", {len(nodes)} of them simulated nodes" if nodes else ""))
            create_nodes(applier, nodes)
            applier.apply_all([obj for obj in objects if obj.get("kind") != "Node"])
        for note in stage.notes:
            self.log(f"left out: {note}")
        for wait in stage.waits:
            assert applier is not None  # noqa: S101 - up makes the applier once a stage has objects or waits
            self._wait(wait, applier, objects)
        self.supervisor.start_all(stage.processes, log=self.log)

    def _wait(self, wait: str, applier: Applier, objects: list[dict[str, Any]]) -> None:
        assert self.supervisor is not None  # noqa: S101 - up starts the supervisor before any stage runs
        if wait == "allocatable":
            check_allocatable(applier, [obj for obj in objects if obj.get("kind") == "Node"])
        elif wait == "established":
            applier.wait_established([obj for obj in objects if obj.get("kind") == "CustomResourceDefinition"])
        elif wait == "placed":
            wait_until_placed(applier, timeout=PLACED_TIMEOUT_SECONDS + PLACED_SECONDS_PER_NODE * len(self.nodes),
                              check=self.supervisor.check)
        elif wait == "hardware-reported":
            reported = report_accelerated_hardware(applier.core)
            if reported:
                more = f" and {len(reported) - 3} more" if len(reported) > 3 else ""
                self.log(f"AcceleratedHardwareReady reported, for the node monitoring agent, on {', '.join(reported[:3])}{more}")
        else:
            raise LocalClusterError(f"stage wait {wait!r} is not one the cluster knows", "report it with the command line")

    def update(self, stack_path: Path) -> list[str]:
        """The stack file ``stack_path`` applied to this running cluster (the one ``up`` started in
        this process), as a ``pulumi up`` of the change would: EKS writes the managed node groups'
        new taints and labels onto their running nodes (``node_group_update``), the objects the
        change adds are applied, and the programs it adds beside the cluster (the health gate's)
        start. Objects it changes or removes are left as they are. What was done, in lines."""
        if self.layout is None or self.supervisor is None or self.platform is None:
            raise LocalClusterError(f"no cluster of {self.stack} was started by this process", "update a cluster `up` started here")
        before, known = node_group_settings(self.resources), {_key(o) for o in self.platform.all()}
        self.stack_path = stack_path
        planned = self.plan(self._render(self.render_dir), self.layout)
        applier = Applier(self.kubeconfig)
        done = update_running_nodes(applier.core, before, node_group_settings(self.resources))
        added = [o for o in planned.platform.all() if _key(o) not in known] if planned.platform else []
        applier.apply_all(added)
        done += [f"applied {_key(o)[0]} {_key(o)[2]}" for o in added]
        new = [p for stage in planned.stages for p in stage.processes if p.name not in self.supervisor.started]
        return done + [f"started {p.name}" for p in self.supervisor.start_all(new, log=self.log)]

    def restart(self, name: str) -> None:
        """Stop the process ``name`` of the cluster ``up`` started in this process and start it
        again, ready: for a configuration file changed in its state folder (a what-if)."""
        if self.supervisor is None or name not in self.processes:
            raise LocalClusterError(f"no process {name!r} was started by this process", "restart one of " + ", ".join(self.processes))
        self.supervisor.stop(name)
        self.supervisor.start_all([self.processes[name]], log=self.log)

    def down(self) -> list[str]:
        supervisor = Supervisor(self.state)
        supervisor.load()
        killed = supervisor.stop_all()
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.render_dir, ignore_errors=True)
        return killed

    def faults(self) -> "Faults":
        """The faults of this running cluster (``faults.Faults``), written through its API server."""
        from kubernetes import client, config

        if not (self.state / "pids.json").is_file():
            raise LocalClusterError(f"no local cluster of {self.stack} runs from {self.state}",
                                    f"`eks-gpu-training-local up {self.stack}` first")
        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        return Faults(client.CoreV1Api(api), client.CoordinationV1Api(api))

    def status(self) -> dict[str, bool]:
        supervisor = Supervisor(self.state)
        supervisor.load()
        return supervisor.status()


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (str(obj.get("kind")), str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"]))
