"""Run a Pulumi program offline, under the SDK's mock engine, and record every registration.

``run_program`` runs any callable (a component, or the whole ``__main__.py``) with
``pulumi.runtime.set_mocks`` and returns a ``Graph``: for each resource its type, name, inputs,
parent, provider, dependencies and options, plus the stack exports and the error, if the program
raised one. Nothing is stubbed in the program: its real code runs, only the engine is the SDK's
mock monitor.

pulumi-eks components are remote: under mocks each is one registration with no children, and its
outputs come from ``PlausibleMocks`` (``offline.mocks``, re-exported here). Resource references in inputs are kept as plain
URNs/IDs (the monitor reports no support for them), because rehydrating a reference on the mock
monitor's worker thread would bind it to a different event loop. One output is a reference, as in
a deployment: an ``eks.Cluster``'s ``eksCluster``, whose ``name`` programs read
(``ClusterRef.from_eks_cluster``); the SDK reads that resource back through the monitor's
``getResource``, answered from the mocks' ``references``.

``Graph.output_text`` lists every input that holds an Output turned into text (the SDK's
"Calling __str__ on an Output" message, or an Output's repr): a test of a program asserts it is empty.

The tests (through ``tests/support/harness.py``) and the ``render`` command both run programs with it.
"""

from __future__ import annotations

import contextvars
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

import pulumi
from pulumi.runtime import mocks as runtime_mocks
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import resource_pb2, source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from .commands import collection_paused
from .mocks import ACCOUNT_ID, PlausibleMocks, StackOutputs
from .mock_transforms import run_transforms

__all__ = [
    "ACCOUNT_ID",
    "Graph",
    "PlausibleMocks",
    "RecordingMonitor",
    "Registration",
    "StackOutputs",
    "alias_urn",
    "run_main",
    "run_program",
    "run_stack",
    "stack_config",
    "stack_file",
]



@dataclass
class Registration:
    """One resource the program registered."""

    type: str
    name: str
    urn: str
    custom: bool
    inputs: dict[str, Any]
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    ignore_changes: list[str]
    remote: bool
    transforms: int
    read: bool = False
    providers: dict[str, str] = field(default_factory=dict)
    """The provider references a remote component (pulumi-eks's) is given, by package."""
    id: Optional[str] = None
    protect: bool = False
    retain_on_delete: bool = False
    """``retain_on_delete``: deleting it in Pulumi leaves the object in the cloud or cluster."""
    delete_before_replace: bool = False
    """``delete_before_replace``: a replacement deletes the old object before creating the new one."""
    replace_on_changes: list[str] = field(default_factory=list)
    """``replace_on_changes``: properties whose change replaces the object even where the provider would update it."""
    import_id: Optional[str] = None
    """``import_``: the ID of an existing object the engine takes over instead of creating one."""
    aliases: list[str] = field(default_factory=list)
    """The URNs its ``aliases`` name, as the Pulumi engine resolves them (``alias_urn``): state under
    any of them is taken over as this resource's."""


@dataclass
class Graph:
    """Everything a program run registered, in order."""

    resources: list[Registration]
    exports: dict[str, Any] = field(default_factory=dict)
    secret_exports: set[str] = field(default_factory=set)
    unknown_exports: set[str] = field(default_factory=set)
    """Exports whose value is only known after deployment (a preview run)."""
    error: Optional[BaseException] = None
    invokes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Every provider function the program called: token and arguments, in order."""

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: Optional[str] = None) -> Registration:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"  # noqa: S101 - the tests' lookup: a failed lookup is a failed test
        return found[0]

    def subtree(self, root: Registration) -> "Graph":
        """The resources under ``root`` (a component), as a graph of their own."""
        return Graph([r for r in self.resources if root in self.ancestors(r)], error=self.error)

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.resources if r.urn == urn)

    def children(self, parent: Registration) -> list[Registration]:
        return [r for r in self.resources if r.parent == parent.urn]

    def ancestors(self, resource: Registration) -> list[Registration]:
        chain = []
        while resource.parent and any(r.urn == resource.parent for r in self.resources):
            resource = self.by_urn(resource.parent)
            chain.append(resource)
        return chain

    def depends_on(self, resource: Registration, other: Registration) -> bool:
        """Whether ``resource`` waits for ``other``, directly or through its inputs."""
        direct = set(resource.dependencies)
        for urns in resource.property_dependencies.values():
            direct.update(urns)
        return other.urn in direct

    def types(self) -> set[str]:
        return {r.type for r in self.resources}

    def stack_outputs(self) -> StackOutputs:
        """The run's exports as another stack's reference to this one reads them."""
        return StackOutputs(dict(self.exports), frozenset(self.secret_exports))

    def output_text(self) -> list[str]:
        """Every input (and provider-function argument) that holds an Output turned into text:
        the SDK's "Calling __str__ on an Output" message or an Output's repr. Each entry names the
        resource (or function) and the key path; a correct program has none."""
        found = []
        for resource in self.resources:
            found += [f"{resource.type} {resource.name}: {path}" for path in _output_text(resource.inputs, "")]
        for token, arguments in self.invokes:
            found += [f"{token}(): {path}" for path in _output_text(arguments, "")]
        return found


OUTPUT_TEXT_MARKERS = ("Calling __str__ on an Output", "<pulumi.output.Output object", "Output[T]")
"""What an Output formatted into a string leaves behind: the SDK's ``__str__`` message, or its repr."""


def _output_text(value: Any, path: str) -> list[str]:
    if isinstance(value, str):
        return [path or "(value)"] if any(marker in value for marker in OUTPUT_TEXT_MARKERS) else []
    if isinstance(value, Mapping):
        return [p for key, item in value.items() for p in _output_text(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _output_text(item, f"{path}[{i}]")]
    return []


def alias_urn(alias: Any, request: Any, urn: str) -> str:
    """The URN one alias of a registration names, as the engine resolves an alias spec: the given
    name, type, stack and project or the resource's own, under the given parent (its whole type
    chain; none under the root stack or with ``noParent``) or the resource's own parent."""
    if alias.urn:
        return alias.urn
    spec = alias.spec
    own_stack, own_project = urn.split("::")[0].rsplit(":", 1)[1], urn.split("::")[1]
    parent = "" if spec.noParent else (spec.parentUrn or request.parent)
    type_ = spec.type or request.type
    if parent and parent.split("::")[2] != "pulumi:pulumi:Stack":
        type_ = parent.split("::")[2] + "$" + type_
    return f"urn:pulumi:{spec.stack or own_stack}::{spec.project or own_project}::{type_}::{spec.name or request.name}"


class RecordingMonitor(runtime_mocks.MockMonitor):
    """The SDK's mock monitor, keeping what the program asked for of each registration; it runs the
    ``transforms`` the SDK's leaves alone as the engine does: the resource's, its parents', the stack's."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        self._transforms_under: dict[str, list[Any]] = {}  # what applies to each resource's children, by URN

    def Invoke(self, request):
        response = super().Invoke(request)
        self.invokes.append((request.tok, rpc.deserialize_properties(request.args, keep_internal=False)))
        return response

    def RegisterResource(self, request):
        if request.type != "pulumi:pulumi:Stack":
            transforms = [*runtime_mocks._resolve_callbacks(request.transforms), *self._transforms_under.get(request.parent, [])]
            self._transforms_under[self.make_urn(request.parent, request.type, request.name)] = transforms
            run_transforms(request, [*transforms, *self._stack_transforms])
        response = super().RegisterResource(request)
        for urn, (resource_id, state) in getattr(self.mocks, "references", {}).items():
            self.resources.setdefault(urn, runtime_mocks.MockMonitor.ResourceRegistration(urn, resource_id, state))
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    custom=request.custom,
                    inputs=rpc.deserialize_properties(request.object, keep_internal=False),
                    parent=request.parent,
                    provider=request.provider,
                    dependencies=list(request.dependencies),
                    property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                    ignore_changes=list(request.ignoreChanges),
                    remote=request.remote,
                    transforms=len(request.transforms),
                    providers=dict(request.providers),
                    id=response.id or None,
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    delete_before_replace=request.deleteBeforeReplace,
                    replace_on_changes=list(request.replaceOnChanges),
                    import_id=request.importId or None,
                    aliases=[*request.aliasURNs, *(alias_urn(a, request, response.urn) for a in request.aliases)],
                )
            )
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=response.urn,
                custom=True,
                inputs=rpc.deserialize_properties(request.properties, keep_internal=False),
                parent=request.parent,
                provider=request.provider,
                dependencies=list(request.dependencies),
                property_dependencies={},
                ignore_changes=[],
                remote=False,
                transforms=0,
                read=True,
                id=request.id,
            )
        )
        return response

    def SupportsFeature(self, request):
        supported = request.id not in ("outputValues", "resourceReferences")
        return type("SupportsFeatureResponse", (object,), {"hasSupport": supported})

    def GetDeploymentInfo(self, request):
        info = super().GetDeploymentInfo(request)
        features = [f for f in info.supportedFeatures if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)


def _config_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Stack configuration as the CLI hands it to a program: strings, structured values as JSON."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()}


@contextmanager
def _no_stack_traces() -> Iterator[None]:
    """The SDK reads the Python stack (``traceback.extract_stack``, every frame's source line) for
    each resource it registers, to send the engine where in the program the resource was made: a
    tenth of a mock run's time, for a field the mock monitor never reads. Inside the block it sends
    none. A version of the SDK without the function is left as it is."""
    original = getattr(sdk_resource, "_get_stack_trace", None)
    if original is None:
        yield
        return
    sdk_resource._get_stack_trace = source_pb2.StackTrace  # an empty trace, as the SDK sends for a frame it cannot place
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = original


def run_program(
    program: Callable[[], Any],
    config: Optional[Mapping[str, Any]] = None,
    *,
    project: str = "eks-gpu-training",
    stack: str = "test",
    preview: bool = False,
    mocks: Optional[pulumi.runtime.Mocks] = None,
) -> Graph:
    """Run ``program`` under mocks with ``config`` and return what it registered.

    Each run gets a fresh context, so runs do not share a root stack, configuration or outputs.
    """

    def body() -> Graph:
        pulumi.runtime.set_all_config(_config_strings(config or {}))
        monitor = RecordingMonitor(mocks or PlausibleMocks())
        # Before the mocks make the root stack: its outputs go to the set of outputs a context has,
        # and one without its own set uses the process-wide set, where they stayed, and with them
        # every run's stack, resources and outputs (about 5,800 objects a prod run).
        settings.SETTINGS.outputs = set()
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor)
        error: Optional[BaseException] = None
        try:
            _sync_await(run_pulumi_func(program))
        except Exception as exc:  # noqa: BLE001 - the graph carries the error for the test to assert on
            error = exc
        graph = Graph(monitor.registrations, error=error, invokes=monitor.invokes)
        root = settings.get_root_resource()
        for key, value in (getattr(root, "outputs", None) or {}).items():
            output = pulumi.Output.from_input(value)
            graph.exports[key] = _sync_await(output.future())
            if _sync_await(output.is_secret()):
                graph.secret_exports.add(key)
            if not _sync_await(output.is_known()):
                graph.unknown_exports.add(key)
        return graph

    # The SDK's event loop, made on its first use, keeps the context it was made in for as long as
    # it lives (its wake-up reader's callback context): made inside a run, it would keep that run's
    # outputs, and through them its resources, alive for good. It is made first, in a context of
    # its own.
    contextvars.Context().run(_ensure_event_loop)
    # A run's objects are nearly all alive until it ends: automatic collections during a run walk
    # them again and again for nothing.
    with _no_stack_traces(), collection_paused():
        return contextvars.Context().run(body)


def stack_file(stack: str, project_root: Optional[Path] = None) -> Path:
    """The stack file of a stack of the project (``platform.stack_files.locate_stack``)."""
    from ..platform.stack_files import locate_stack

    return locate_stack(stack, project_root).path


def stack_config(stack: str, project_root: Optional[Path] = None) -> dict[str, Any]:
    """The ``config`` of a stack's file."""
    from ..platform.stack_files import locate_stack

    return locate_stack(stack, project_root).settings()


def project_dir(project_root: Optional[Path] = None) -> Path:
    """``project_root``, else the Pulumi project the current folder is in."""
    from ..config import ConfigError, Problem
    from ..platform.stack_files import PROJECT_FILE, find_project

    found = project_root or find_project(Path.cwd())
    if found is None:
        raise ConfigError([Problem(PROJECT_FILE, f"no Pulumi project in {Path.cwd()} or a folder above it")])
    return found


def run_main(
    config: Mapping[str, Any],
    *,
    stack: str = "test",
    preview: bool = False,
    mocks: Optional[pulumi.runtime.Mocks] = None,
    project_root: Optional[Path] = None,
    project: str = "eks-gpu-training",
) -> Graph:
    """Run a project's ``__main__.py`` (``project_root``, else the project the current folder is
    in) under mocks with the given stack configuration, as Pulumi project ``project`` (the
    namespace its own settings are read from); a project without one (stack files and
    ``Pulumi.yaml`` beside an installed package) runs the package's stack program, which this
    project's own ``__main__.py`` is."""
    import runpy

    from ..platform.program import stack_program

    program = project_dir(project_root) / "__main__.py"
    return run_program(
        (lambda: runpy.run_path(str(program), run_name="__main__")) if program.is_file() else stack_program,
        config,
        project=project,
        stack=stack,
        preview=preview,
        mocks=mocks,
    )


def run_stack(stack: str, *, preview: bool = False) -> Graph:
    """Run ``__main__.py`` with the configuration of the project's stack file of ``stack``."""
    return run_main(stack_config(stack), stack=stack, preview=preview)
