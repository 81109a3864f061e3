"""Run a stack's real program offline and turn what it registered into plain, marked data.

The program runs in preview mode (``preview=True``), as ``pulumi preview`` would run it: an output
that only exists after deployment is genuinely unknown, so ``apply`` callbacks on it do not run and
nothing downstream computes with an invented value. ``PlaceholderMocks`` answer the engine's
questions with marked strings instead of plausible-looking fakes: each resource's ID, and for AWS
resources the ARN and the provider-generated name, read ``<unknown: arn of aws:iam/role:Role
gpu-training-...>``; these are the values programs most often pass along verbatim, so the marker
says exactly which attribute of which resource ends up there. Every other output stays unknown and
is marked where it lands, by the resources the input depends on: ``<unknown: output of
eks:index:Cluster gpu-training-cluster-eks>``. Secrets read ``<secret>``.

A stack reference (a manager's workers named by ``stack``) reads another stack's outputs: of a stack
whose file is in this project, those of that stack's own program run offline, each unknown there
``<unknown: OUTPUT of stack NAME>``; of any other stack, none (unknown), and the render says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pulumi
from pulumi.asset import Archive, Asset
from pulumi.output import Unknown
from pulumi.runtime import rpc

from ...config import ConfigError
from ...facts.aws_enums import partition_of
from ...platform.multikueue_fleet import fleet_problems, project_worker_args
from ...platform.stack_files import StackFile, locate_stack
from ..engine import Graph, Registration, run_main
from ..mocks import STACK_REFERENCE, StackOutputs, stack_reference_answer
from .markers import SECRET, UNKNOWN_PREFIX, placeholder
from .reads import preview_reads

COMPUTED = f"{UNKNOWN_PREFIX}computed at deployment>"

PASSED_ALONG_OUTPUTS = {
    "eks:index:Cluster": ("clusterSecurityGroupId", "nodeSecurityGroupId", "kubeconfigJson", "kubeconfig"),
    "aws:ecr/repository:Repository": ("repositoryUrl", "registryId"),
    "docker-build:index:Image": ("digest", "ref"),
}
"""Outputs, beyond ID, ARN and name, that programs pass along verbatim and that get a named
placeholder, e.g. an image reference ``<unknown: repositoryUrl of ...>@<unknown: digest of ...>``
shows that a workload runs a pushed image by digest."""


class PlaceholderMocks(pulumi.runtime.Mocks):
    """Engine answers for an offline render: inputs come back as outputs (as a provider that
    changes nothing would give them), identifiers come back as marked placeholders."""

    def __init__(self, region: str, stacks: Optional[dict[str, StackOutputs]] = None):
        self.region = region
        self.unanswered_calls: set[str] = set()
        """Invokes this class has no offline answer for (their results are empty)."""
        self.stacks = stacks or {}
        """The outputs of the stacks the program reads by stack reference, where this render knows them."""
        self.stack_references: dict[str, bool] = {}
        """Each stack the program read by stack reference, and whether ``stacks`` answered it."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = dict(args.inputs)
        typ, name = args.typ, args.name
        if typ == STACK_REFERENCE:
            referenced = stack_reference_answer(args, self.stacks)
            self.stack_references[str(args.inputs.get("name"))] = referenced is not None
            # Unanswered, its outputs stay unknown, as a preview's are before the stack exists.
            return args.resource_id or name, referenced or outputs
        if typ.startswith("aws:"):
            outputs.setdefault("arn", placeholder("arn", typ, name))
            # AWS names a resource that was given none (auto-naming) when it is created.
            outputs.setdefault("name", placeholder("name", typ, name))
        for attribute in PASSED_ALONG_OUTPUTS.get(typ, ()):
            outputs.setdefault(attribute, placeholder(attribute, typ, name))
        if typ.startswith("kubernetes:"):
            metadata = outputs.get("metadata") or {}
            resource_id = "/".join(str(p) for p in (metadata.get("namespace"), metadata.get("name") or name) if p)
        else:
            resource_id = args.resource_id or placeholder("id", typ, name)
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        token = args.token
        if token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}
        if token == "aws:index/getPartition:getPartition":
            partition = partition_of(self.region)
            suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
            return {"partition": partition, "dnsSuffix": suffix, "id": partition}
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                attribute: placeholder(attribute, "aws:index/getCallerIdentity", "(the deploying account)")
                for attribute in ("accountId", "arn", "userId", "id")
            }
        if token == "aws:iam/getSessionContext:getSessionContext":
            return {
                attribute: placeholder(attribute, "aws:iam/getSessionContext", "(the deploying principal)")
                for attribute in ("arn", "issuerArn", "issuerId", "issuerName", "sessionName", "id")
            }
        if token == "aws:eks/getClusters:getClusters":
            # Offline there is no account to list: the render shows the stack as a first deployment
            # creates it (node groups at their configured sizes).
            return {"names": [], "id": self.region}
        if token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            # ECR's registry user name is always AWS; the password is a 12-hour token.
            return {
                "userName": "AWS",
                **{
                    attribute: placeholder(attribute, "aws:ecr/getAuthorizationToken", "(the deploying account)")
                    for attribute in ("password", "authorizationToken", "proxyEndpoint", "expiresAt", "id")
                },
            }
        if token == "aws:eks/getCluster:getCluster":
            cluster = args.args["name"]

            def unknown(attribute: str) -> str:
                return placeholder(attribute, "EKS cluster", cluster)

            return {
                "name": cluster,
                "id": cluster,
                "arn": unknown("arn"),
                "endpoint": unknown("endpoint"),
                "certificateAuthorities": [{"data": unknown("certificateAuthority")}],
                "vpcConfig": {
                    "clusterSecurityGroupId": unknown("clusterSecurityGroupId"),
                    "vpcId": unknown("vpcId"),
                    "subnetIds": [],
                },
                "version": unknown("version"),
                "roleArn": unknown("roleArn"),
            }
        if token == "aws:ec2/getSubnet:getSubnet":
            # An adopted subnet's CIDR is EC2's to say.
            subnet = args.args["id"]
            return {"id": subnet, "cidrBlock": placeholder("cidrBlock", "EC2 subnet", subnet)}
        if token == "aws:eks/getAddonVersion:getAddonVersion":
            # EKS answers with the add-on builds it offers today; offline, the version stays unknown.
            addon, kubernetes_version = args.args["addonName"], args.args["kubernetesVersion"]
            return {
                "addonName": addon,
                "kubernetesVersion": kubernetes_version,
                "mostRecent": args.args.get("mostRecent", False),
                "version": placeholder("version", "aws:eks/getAddonVersion", f"{addon} on Kubernetes {kubernetes_version}"),
                "id": addon,
            }
        self.unanswered_calls.add(token)
        return {}


def _provider_urn(reference: str) -> Optional[str]:
    """The URN of a provider reference (``URN::ID``); None for the package's default provider."""
    return reference.rsplit("::", 1)[0] if reference else None


def _describe(urns: list[str], by_urn: dict[str, Registration]) -> str:
    # Sorted: the engine gathers an input's dependencies as a set, whose order can differ between runs.
    names = sorted(f"{by_urn[u].type} {by_urn[u].name}" if u in by_urn else u for u in urns)
    return f"{UNKNOWN_PREFIX}output of {' | '.join(names)}>" if names else COMPUTED


def plain(value: Any, unknown_marker: str) -> Any:
    """A recorded value as plain data: unknowns marked, secrets hidden, whole floats as ints."""
    if isinstance(value, Unknown):
        return unknown_marker
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, dict):
        return {key: plain(item, unknown_marker) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item, unknown_marker) for item in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        # The engine's wire format has one number type; integer fields come back as floats.
        return int(value)
    if isinstance(value, (Asset, Archive)):
        source = getattr(value, "path", None) or getattr(value, "uri", None) or getattr(value, "text", None)
        return f"<{type(value).__name__}: {source}>"
    return value


@dataclass
class Resource:
    """One registered resource as a render shows it."""

    urn: str
    type: str
    name: str
    parent: Optional[str]
    provider: Optional[str]
    dependencies: list[str]
    inputs: dict[str, Any]
    custom: bool
    remote: bool
    id: Optional[str] = None
    protect: bool = False
    ignore_changes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "name": self.name,
            "urn": self.urn,
            "parent": self.parent,
            "provider": self.provider,
            "dependencies": self.dependencies,
            "custom": self.custom,
            "remote": self.remote,
            "id": self.id,
            # Resource options that decide what a later `pulumi up` may do to the resource.
            "protect": self.protect,
            "ignoreChanges": self.ignore_changes,
            "inputs": self.inputs,
        }


@dataclass
class StackRender:
    """A stack's program run offline, as plain data."""

    stack: str
    project: str
    region: str
    kubernetes_version: str
    resources: list[Resource]
    exports: dict[str, Any] = field(default_factory=dict)
    unanswered_calls: list[str] = field(default_factory=list)
    charts_directory: Optional[str] = None
    """The stack's ``charts.directory``, where its charts come from first."""
    charts_mirror: Optional[str] = None
    """The stack's ``charts.mirror``, which its releases pull from."""
    reads: list[str] = field(default_factory=list)
    """The provider functions a preview of the stack calls (``reads.preview_reads``)."""
    stack_references: dict[str, bool] = field(default_factory=dict)
    """The stacks the program reads by stack reference, each with whether this render knew their outputs' names."""


def _ordered(resources: list[Resource]) -> list[Resource]:
    """Parents before children, siblings by type and name: the same order on every run, whatever
    order the program's asynchronous registrations happened to arrive in."""
    urns = {r.urn for r in resources}
    kids: dict[Optional[str], list[Resource]] = {}
    for resource in resources:
        kids.setdefault(resource.parent if resource.parent in urns else None, []).append(resource)
    ordered: list[Resource] = []

    def visit(parent: Optional[str]) -> None:
        for child in sorted(kids.get(parent, []), key=lambda r: (r.type, r.name)):
            ordered.append(child)
            visit(child.urn)

    visit(None)
    return ordered


def to_render(graph: Graph, *, stack: str, project: str, region: str, kubernetes_version: str) -> StackRender:
    """Plain, marked data of everything a program run registered."""
    by_urn = {r.urn: r for r in graph.resources}
    resources = []
    for reg in graph.resources:
        inputs = {}
        for key, value in reg.inputs.items():
            marker = _describe(reg.property_dependencies.get(key) or reg.dependencies, by_urn)
            inputs[key] = plain(value, marker)
        dependencies = set(reg.dependencies)
        for urns in reg.property_dependencies.values():
            dependencies.update(urns)
        resources.append(
            Resource(
                urn=reg.urn,
                type=reg.type,
                name=reg.name,
                parent=reg.parent if reg.parent in by_urn else None,
                provider=_provider_urn(reg.provider),
                dependencies=sorted(dependencies),
                inputs=inputs,
                custom=reg.custom,
                remote=reg.remote,
                id=reg.id,
                protect=reg.protect,
                ignore_changes=list(reg.ignore_changes),
            )
        )
    exports = {}
    for key, value in graph.exports.items():
        if key in graph.secret_exports:
            exports[key] = SECRET
        elif key in graph.unknown_exports:
            exports[key] = COMPUTED
        else:
            exports[key] = plain(value, COMPUTED)
    return StackRender(
        stack=stack,
        project=project,
        region=region,
        kubernetes_version=kubernetes_version,
        resources=_ordered(resources),
        exports=exports,
    )


class RenderError(RuntimeError):
    """The program failed under the mock engine (invalid configuration, a bug)."""


def stack_reference_outputs(located: StackFile, seen: frozenset[str] = frozenset()) -> StackOutputs:
    """A stack's outputs as a render of a stack reading it knows them: its program run offline, each
    export as that run has it, ``<unknown: OUTPUT of stack NAME>`` where only its deployment knows it
    (a worker's ``multiKueueKubeconfig``), secret where it exports a secret."""
    config = located.settings()
    mocks = PlaceholderMocks(config.get("aws:region", ""), referenced_stacks(located, seen))
    graph = run_main(config, stack=located.name, preview=True, mocks=mocks, project_root=located.project_dir,
                     project=located.namespace())
    if graph.error is not None:
        raise RenderError(f"stack {located.name}, read by stack reference: the program failed: {graph.error}") from graph.error
    outputs: dict[str, Any] = {}
    for key, value in graph.exports.items():
        unknown = placeholder(key, "stack", located.name)
        outputs[key] = unknown if key in graph.unknown_exports else plain(value, unknown)
    return StackOutputs(outputs, frozenset(graph.secret_exports))


def referenced_stacks(located: StackFile, seen: frozenset[str] = frozenset()) -> dict[str, StackOutputs]:
    """The outputs of each stack the stack program reads by stack reference (a manager's workers named
    by ``stack``) whose file this project holds, as ``stack_reference_outputs`` knows them; a stack
    already in ``seen`` (a cycle) is left unknown."""
    try:
        args = located.platform_args()
        if fleet_problems(args, project_worker_args(args, located.project_dir)):
            return {}  # the stack's own run refuses it before reading any worker
    except ConfigError:
        return {}  # the stack's own run reports its problems
    seen = seen | {located.name}
    found: dict[str, StackOutputs] = {}
    for entry in args.multi_kueue.workers:
        if entry.stack is None or "/" in entry.stack or entry.stack in seen or located.project_dir is None:
            continue
        worker = locate_stack(entry.stack, located.project_dir)
        if worker.path.is_file():
            found[entry.stack] = stack_reference_outputs(worker, seen)
    return found


def render_stack(
    stack: str, *, project_root: Optional[Path] = None, stack_path: Optional[Path] = None,
    mocks: Optional[pulumi.runtime.Mocks] = None, located: Optional[StackFile] = None,
) -> StackRender:
    """Run ``__main__.py`` of ``project_root`` (else the project the current folder is in) with a
    stack's configuration (from ``stack_path``, or the project's stack file of that name), offline. Values AWS would compute are placeholders that say so,
    unless ``mocks`` gives them (the local cluster needs IDs in AWS's own shape, which CRD patterns check).
    ``located`` gives the stack file already found (or one read differently, ``local.scale``)."""
    located = located or locate_stack(stack_path or stack, project_root)
    config = located.settings()
    namespace = located.namespace()
    region = config.get("aws:region", "")
    mocks = mocks or PlaceholderMocks(region, referenced_stacks(located))
    graph = run_main(config, stack=stack, preview=True, mocks=mocks, project_root=located.project_dir or project_root,
                     project=namespace)
    if graph.error is not None:
        raise RenderError(f"stack {stack}: the program failed: {graph.error}") from graph.error
    args = located.platform_args()
    result = to_render(
        graph, stack=stack, project=namespace, region=region, kubernetes_version=args.cluster.kubernetes_version
    )
    result.unanswered_calls = sorted(getattr(mocks, "unanswered_calls", ()))
    result.stack_references = dict(sorted(getattr(mocks, "stack_references", {}).items()))
    result.charts_directory, result.charts_mirror = args.charts.directory, args.charts.mirror
    result.reads = preview_reads((token for token, _ in graph.invokes), args)
    return result
