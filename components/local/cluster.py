"""A local cluster for a stack file: the control plane, the simulated fleet and the platform.

``up`` builds what is missing, starts everything on loopback, creates the stack's nodes, applies
the stack's objects and its charts' objects, starts Kueue and Karpenter's KWOK provider, and waits
until every pod the platform creates is placed; then reports the node monitoring agent's
``AcceleratedHardwareReady`` where its pods stand (``node_health``). A failure stops every process it started before it
raises. ``down`` stops the processes recorded in the state folder and removes it.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..config import GpuTrainingPlatformArgs
from ..offline.chart_sources import ChartSources, ChartUnavailable
from ..offline.engine import PlausibleMocks
from ..offline.render.engine import render_stack
from ..offline.render import RenderError, write_render
from ..offline.render.files import is_kubernetes_object, is_patch, manifest
from ..platform.stack_files import StackFile, locate_stack
from . import build as builds
from .control_plane import ControlPlane
from .controllers import (
    KUEUE_CONFIG_MAP, KUEUE_WEBHOOK_SERVICE, kueue_webhook_secret, kwok_crds, start_karpenter, start_kueue,
)
from .eks_addons import eks_system_objects
from .node_health import report_accelerated_hardware
from .fleet import SimulatedNode, karpenter_instance_types, managed_nodes, write_instance_types
from .processes import free_port
from .platform import KWOK_NODE_CLASS, Applier, PlatformObjects, collect, localize

PLACED_TIMEOUT_SECONDS = 180
"""How long ``up`` waits for every pod to be placed before it reports the ones that are not."""


class LocalClusterError(RuntimeError):
    pass


def default_state_dir(stack: str) -> Path:
    return builds.cache_root() / "clusters" / stack


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
    args: Optional[GpuTrainingPlatformArgs] = None
    nodes: list[SimulatedNode] = field(default_factory=list)
    platform: Optional[PlatformObjects] = None
    control_plane: Optional[ControlPlane] = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def _stack_file(self) -> StackFile:
        return locate_stack(self.stack_path or self.stack, self.project_root)

    def _stack_path(self) -> Path:
        return self._stack_file().path

    def up(self, *, bare: bool = False) -> Path:
        if (self.state / "pids.json").is_file():
            raise LocalClusterError(
                f"a local cluster already runs from {self.state}: `eks-gpu-training-local down {self.stack}` first"
            )
        started = time.monotonic()
        # The render first: a stack or chart problem shows in seconds, before any build.
        render = self._render()
        # The stack's own Kubernetes minor; one the local control plane cannot run is refused, naming
        # those it can.
        assert self.args is not None  # noqa: S101 - set by _render
        minor = self.args.cluster.kubernetes_version
        kubernetes = builds.kubernetes_for(minor)
        # Says what is missing when a component can be neither found, taken from the binaries folder, nor built.
        builds.build_all(builds.control_plane_for(minor), log=self.log, prebuilt=builds.prebuilt_dir(self.bin_dir))
        self.timings["build"] = time.monotonic() - started
        if self.state.exists():
            shutil.rmtree(self.state)
        self.state.mkdir(parents=True)
        self.control_plane = ControlPlane(self.state, attached=self.attached, kubernetes=kubernetes)
        try:
            self.control_plane.start(log=self.log)
            self.timings["control plane"] = time.monotonic() - started
            self._apply(render, bare=bare)
            self.timings["placed"] = time.monotonic() - started
            self.control_plane.check()
        except BaseException:
            self.control_plane.stop()
            raise
        (self.state / "stack.json").write_text(json.dumps({"stack": self.stack, "stackFile": str(self._stack_path())}))
        return self.kubeconfig

    def _render(self) -> dict[str, Any]:
        located = self._stack_file()
        self.log(f"rendering stack {self.stack} from {located.path}")
        self.args = located.platform_args()
        # IDs and ARNs in AWS's own shape (CRD patterns check them), as a deployment would give back.
        result = render_stack(self.stack, project_root=located.project_dir, stack_path=located.path,
                              mocks=PlausibleMocks())
        try:
            sources = self.sources or ChartSources.configured(stack_dir=located.path.parent)
            summary = write_render(result, self.state.parent / f".{self.state.name}-render", picture=False, sources=sources)
        except (ChartUnavailable, RenderError) as error:
            raise LocalClusterError(f"{error}\n(the platform would be incomplete without them)") from None
        for pulled in sources.pulled:
            self.log(f"pulled chart {pulled}")
        charts = summary.charts
        failed = [f"{chart.chart} {chart.version}: {chart.skipped or chart.error}" for chart in charts
                  if chart.skipped or chart.error]
        if failed:
            raise LocalClusterError("charts not rendered, so the platform would be incomplete: " + "; ".join(failed))
        resources = [r.as_json() for r in result.resources]
        stack_objects = [manifest(r) for r in result.resources if is_kubernetes_object(r) and not is_patch(r)]
        chart_objects = [obj for chart in charts for _, obj in chart.objects]
        return {"resources": resources, "stack_objects": stack_objects, "chart_objects": chart_objects}

    def _apply(self, render: dict[str, Any], *, bare: bool) -> None:
        assert self.control_plane is not None  # noqa: S101 - started before anything is applied
        assert self.args is not None  # noqa: S101 - set by _render
        applier = Applier(self.kubeconfig)
        self.nodes = managed_nodes(self.args, render["resources"])
        self.log(f"creating {len(self.nodes)} simulated nodes: " + ", ".join(
            f"{n.name} ({n.instance_type})" for n in self.nodes))
        for node in self.nodes:
            _create_node(applier, node.manifest())
        _check_allocatable(applier, self.nodes)
        applier.apply_all(eks_system_objects())
        if bare:
            wait_until_placed(applier, timeout=PLACED_TIMEOUT_SECONDS, check=self.control_plane.check)
            return
        chart_objects = render["chart_objects"]
        platform = collect(render["stack_objects"], chart_objects)
        kueue_on = any(o.get("kind") == "ConfigMap" and o["metadata"].get("name") == KUEUE_CONFIG_MAP[1]
                       for o in chart_objects)
        karpenter_on = any(o.get("kind") == "NodePool" for o in platform.objects)
        supervisor = self.control_plane.supervisor
        # What runs beside the cluster gets its address before anything points at it: Kueue's
        # webhooks and CRD conversion must name its port when they are created, and Kueue's own
        # certificate controller waits for them to exist before it reports ready.
        out_of_cluster: dict[tuple[str, str], tuple[str, str]] = {}
        replaced: set[tuple[str, str, str]] = set()
        kueue_secret = None
        kueue_port = free_port()
        if kueue_on:
            kueue_secret, bundle = kueue_webhook_secret(chart_objects)
            replaced.add(("Secret", kueue_secret["metadata"]["namespace"], kueue_secret["metadata"]["name"]))
            out_of_cluster[KUEUE_WEBHOOK_SERVICE] = (f"https://127.0.0.1:{kueue_port}", bundle)
        crds = platform.crds + (kwok_crds() if karpenter_on else [])
        localized = localize(
            PlatformObjects(crds=crds, namespaces=platform.namespaces, objects=platform.objects, left_out=platform.left_out),
            out_of_cluster=out_of_cluster, replaced=replaced,
        )
        self.platform = localized
        self.log(f"applying {len(localized.crds)} CRDs and {len(localized.namespaces)} namespaces")
        for crd in localized.crds:
            applier.apply(crd)
        applier.wait_established(localized.crds)
        applier.apply_all(localized.namespaces)
        webhooks = [o for o in localized.objects if o["kind"].endswith("WebhookConfiguration")]
        rest = [o for o in localized.objects if o not in webhooks]
        if kueue_on:
            applier.apply(kueue_secret)
            applier.apply_all(webhooks)
            self.log("starting Kueue")
            start_kueue(supervisor, self.state, self.kubeconfig, chart_objects, webhook_port=kueue_port,
                        secret=kueue_secret)
        elif webhooks:
            applier.apply_all(webhooks)
        if karpenter_on:
            nodepools = [o for o in render["stack_objects"] if o.get("kind") == "NodePool"]
            types_file = write_instance_types(
                self.state / "karpenter-instance-types.json",
                karpenter_instance_types(self.args, nodepools),
            )
            applier.apply({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": KWOK_NODE_CLASS["kind"],
                           "metadata": {"name": KWOK_NODE_CLASS["name"]}})
            self.log("starting Karpenter (KWOK provider)")
            start_karpenter(supervisor, self.state, self.kubeconfig, chart_objects, types_file)
        self.log(f"applying {len(rest)} objects")
        applier.apply_all(rest)
        for reason in localized.left_out:
            self.log(f"left out: {reason}")
        wait_until_placed(applier, timeout=PLACED_TIMEOUT_SECONDS, check=self.control_plane.check)
        reported = report_accelerated_hardware(applier.core)
        if reported:
            self.log(f"AcceleratedHardwareReady reported, for the node monitoring agent, on {', '.join(reported)}")
        if self.args.node_monitoring.enabled:
            supervisor.start("node-health", [sys.executable, "-m", "eks_gpu_training.local.node_health",
                                             f"--kubeconfig={self.kubeconfig}"])

    def down(self) -> list[str]:
        control_plane = ControlPlane(self.state)
        killed = control_plane.stop()
        shutil.rmtree(self.state, ignore_errors=True)
        shutil.rmtree(self.state.parent / f".{self.state.name}-render", ignore_errors=True)
        return killed

    def status(self) -> dict[str, bool]:
        control_plane = ControlPlane(self.state)
        control_plane.supervisor.load()
        return control_plane.supervisor.status()


def _create_node(applier: Applier, node: dict[str, Any]) -> None:
    """Create a simulated node with its status, as a kubelet registers its node (the API server
    keeps a Node's status on create). Written after the create, the status raced KWOK: its
    node-initialize stage gives a node it sees without allocatable KWOK's defaults (1k CPU, 1Ti,
    1M pods), and its write, rendered from the node as first seen, could land after ours and
    replace our CPU, memory and pods, while the GPUs and EFA devices stayed: a p5 node then offered
    1Ti, and a training pod's 1.8Ti never fitted it. A node left from an earlier ``up`` gets its
    status patched."""
    from kubernetes.client.exceptions import ApiException

    try:
        applier.core.create_node(node)
    except ApiException as error:
        if error.status != 409:
            raise
        status = node["status"]
        applier.apply({key: value for key, value in node.items() if key != "status"})
        applier.core.patch_node_status(node["metadata"]["name"], {"status": status})


def _check_allocatable(applier: Applier, nodes: list[SimulatedNode]) -> None:
    """Every simulated node allocates what its instance type does: a node whose figures were
    replaced would make the scheduler's verdicts the simulator's, not the fleet's."""
    from ..facts.quantity import parse_quantity

    wrong = []
    for node in nodes:
        live = applier.core.read_node(node.name).status.allocatable or {}
        differing = sorted(key for key, value in node.allocatable.items()
                           if key not in live or parse_quantity(str(live[key])) != parse_quantity(str(value)))
        if differing:
            wrong.append(f"{node.name}: " + ", ".join(f"{key} {live.get(key)} instead of {node.allocatable[key]}" for key in differing))
    if wrong:
        raise LocalClusterError("simulated nodes do not allocate what their instance types do: " + "; ".join(wrong))


def pending_pods(applier: Applier) -> list[dict[str, Any]]:
    """Pods not bound to a node, with the scheduler's latest reason."""
    pods = applier.core.list_pod_for_all_namespaces(field_selector="status.phase=Pending").items
    pending = []
    for pod in pods:
        if pod.spec.node_name:
            continue
        reason = ""
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                reason = condition.message or condition.reason or ""
        pending.append({"pod": f"{pod.metadata.namespace}/{pod.metadata.name}", "reason": reason})
    return pending


def wait_until_placed(applier: Applier, *, timeout: float, check: Callable[[], None]) -> None:
    """Wait until the controllers have made their pods and every pod is bound to a node."""
    deadline = time.monotonic() + timeout
    settled_since: Optional[float] = None
    while time.monotonic() < deadline:
        check()
        pending = pending_pods(applier)
        unmade = _workloads_without_pods(applier)
        if not pending and not unmade:
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since >= 2:
                return
        else:
            settled_since = None
        time.sleep(0.5)
    details = [f"{p['pod']}: {p['reason'] or 'not scheduled yet'}" for p in pending_pods(applier)]
    details += [f"{w}: its controller has not made all its pods" for w in _workloads_without_pods(applier)]
    raise LocalClusterError(f"not every pod was placed after {timeout:.0f} s:\n  " + "\n  ".join(details))


def _workloads_without_pods(applier: Applier) -> list[str]:
    from kubernetes import client

    apps = client.AppsV1Api(applier.api_client)
    missing = []
    for deployment in apps.list_deployment_for_all_namespaces().items:
        wanted = deployment.spec.replicas if deployment.spec.replicas is not None else 1
        if (deployment.status.replicas or 0) < wanted:
            missing.append(f"Deployment {deployment.metadata.namespace}/{deployment.metadata.name}")
    for daemonset in apps.list_daemon_set_for_all_namespaces().items:
        status = daemonset.status
        if status.observed_generation != daemonset.metadata.generation or (
            (status.current_number_scheduled or 0) < (status.desired_number_scheduled or 0)
        ):
            missing.append(f"DaemonSet {daemonset.metadata.namespace}/{daemonset.metadata.name}")
    return missing
