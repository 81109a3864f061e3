"""Run a Pulumi program offline, under the SDK's mock engine, and record every registration.

``run_program`` runs any callable (a component, or the whole ``__main__.py``) with
``pulumi.runtime.set_mocks`` and returns a ``Graph``: for each resource its type, name, inputs,
parent, provider, dependencies and options, plus the stack exports and the error, if the program
raised one. Nothing is stubbed in the program: its real code runs, only the engine is the SDK's
mock monitor.

pulumi-eks components are remote: under mocks each is one registration with no children, and its
outputs come from ``PlausibleMocks`` below. Resource references in inputs are kept as plain
URNs/IDs (the monitor reports no support for them), because rehydrating a reference on the mock
monitor's worker thread would bind it to a different event loop. One output is a reference, as in
a deployment: an ``eks.Cluster``'s ``eksCluster``, whose ``name`` programs read
(``ClusterRef.from_eks_cluster``); the SDK reads that resource back through the monitor's
``getResource``, answered from ``PlausibleMocks.references``.

``Graph.output_text`` lists every input that holds an Output turned into text (the SDK's
"Calling __str__ on an Output" message, or an Output's repr): a test of a program asserts it is empty.

The tests (through ``tests/harness.py``) and the ``render`` command both run programs with it.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import pulumi
import yaml
from pulumi.runtime import mocks as runtime_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

__all__ = [
    "ACCOUNT_ID",
    "PROJECT_ROOT",
    "Graph",
    "PlausibleMocks",
    "RecordingMonitor",
    "Registration",
    "run_main",
    "run_program",
    "run_stack",
    "stack_config",
    "stack_file",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
ACCOUNT_ID = "123456789012"
"""The account ID ``PlausibleMocks`` puts in ARNs (tests only; a render never invents one)."""


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
        assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
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


def _arn(service: str, kind: str, name: str) -> str:
    return f"arn:aws:{service}:us-west-2:{ACCOUNT_ID}:{kind}/{name}"


EC2_ID_PREFIXES = {
    "aws:ec2/securityGroup:SecurityGroup": "sg-",
    "aws:ec2/subnet:Subnet": "subnet-",
    "aws:ec2/vpc:Vpc": "vpc-",
}
"""Resource types whose mock IDs take EC2's shape (``<prefix><17 hex digits>``)."""

_RESOURCE_REFERENCE = {"4dabf18193072939515e22adb298388d": "5cf8f73096256a8f31e491e813e4eb8e"}
"""The SDK's marker of a serialized resource reference (``rpc._special_sig_key``: ``_special_resource_sig``)."""


class PlausibleMocks(pulumi.runtime.Mocks):
    """Outputs a real deployment would give back, derived from the inputs."""

    def __init__(self) -> None:
        self.references: dict[str, tuple[str, dict[str, Any]]] = {}
        """Resources that outputs refer to (urn: id and state), for the SDK to read back by URN."""

    def _reference(self, urn: str, resource_id: str, state: dict[str, Any]) -> dict[str, Any]:
        """An output that is a resource reference, as pulumi-eks gives ``eksCluster``: the SDK turns it
        into a resource object whose outputs it reads with ``getResource`` (answered from ``state``)."""
        self.references[urn] = (resource_id, state)
        return {**_RESOURCE_REFERENCE, "urn": urn, "id": resource_id}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outputs = dict(args.inputs)
        name = args.name
        typ = args.typ
        if typ == "eks:index:Cluster":
            # pulumi-eks names an unnamed cluster after the resource, with a random suffix.
            cluster_name = outputs.get("name") or f"{name}-eksCluster-{hashlib.sha1(name.encode()).hexdigest()[:7]}"
            kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster_name}]}
            outputs.update(
                kubeconfig=kubeconfig,
                kubeconfigJson=json.dumps(kubeconfig),
                clusterSecurityGroupId="sg-0c1a55e7c1a55e7c1",
                nodeSecurityGroupId="sg-0d0d0d0d0d0d0d0d0",
                eksCluster=self._reference(
                    f"urn:pulumi:mock::mock::eks:index:Cluster$aws:eks/cluster:Cluster::{name}-eksCluster",
                    cluster_name,
                    {
                        "name": cluster_name,
                        "arn": _arn("eks", "cluster", cluster_name),
                        # pulumi-eks leaves the version to EKS, which picks its default.
                        "version": outputs.get("version") or "1.34",
                        "vpcConfig": {"vpcId": outputs.get("vpcId")},
                    },
                ),
                core={
                    "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                    "vpcId": outputs.get("vpcId"),
                    "subnetIds": outputs.get("subnetIds") or [],
                },
            )
        elif typ == "aws:eks/nodeGroup:NodeGroup":
            # EKS completes a name prefix with a unique suffix (a timestamp, as the provider does).
            outputs.setdefault("nodeGroupName", f"{outputs.get('nodeGroupNamePrefix', '')}20261130000000000000000001")
        elif typ == "aws:iam/role:Role":
            outputs.setdefault("name", f"{name}-1a2b3c")
            outputs["arn"] = f"arn:aws:iam::{ACCOUNT_ID}:role/{outputs['name']}"
        elif typ == "aws:sqs/queue:Queue":
            outputs.setdefault("name", f"{name}-4d5e6f")
            region = outputs.get("region", "us-west-2")
            outputs["arn"] = f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{outputs['name']}"
            outputs["url"] = f"https://sqs.{region}.amazonaws.com/{ACCOUNT_ID}/{outputs['name']}"
        elif typ in ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"):
            # An unnamed bucket gets a generated name, like an IAM role.
            outputs.setdefault("bucket", f"{name}-7g8h9i")
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outputs.update(latestVersion=1, defaultVersion=1)
        elif typ == "aws:ecr/repository:Repository":
            repository = outputs.get("name", name)
            outputs.update(
                registryId=ACCOUNT_ID,
                repositoryUrl=f"{ACCOUNT_ID}.dkr.ecr.{outputs.get('region', 'us-west-2')}.amazonaws.com/{repository}",
                arn=_arn("ecr", "repository", repository),
            )
        elif typ == "docker-build:index:Image":
            digest = "sha256:" + hashlib.sha256(json.dumps(outputs, sort_keys=True, default=str).encode()).hexdigest()
            tag = (outputs.get("tags") or [""])[0]
            outputs.update(digest=digest, ref=f"{tag}@{digest}", contextHash="0" * 64)
        elif typ == "tls:index/privateKey:PrivateKey":
            # Key-shaped stand-ins (tests only): the provider generates the real pair at deployment.
            outputs.update(
                privateKeyOpenssh="-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n",
                publicKeyOpenssh=f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAImock {name}\n",
            )
        elif typ.startswith("aws:"):
            service = typ.split(":")[1].split("/")[0]
            outputs.setdefault("arn", _arn(service, typ.rsplit(":", 1)[-1].lower(), name))
        if typ.startswith("kubernetes:"):
            metadata = outputs.get("metadata") or {}
            resource_id = "/".join(p for p in (metadata.get("namespace"), metadata.get("name") or name) if p)
        elif typ in EC2_ID_PREFIXES:
            # EC2-shaped, since CRD patterns (EC2NodeClass selector ids) check them.
            resource_id = EC2_ID_PREFIXES[typ] + hashlib.sha1(name.encode()).hexdigest()[:17]
        else:
            resource_id = args.resource_id or f"{name}-id"
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == "aws:eks/getCluster:getCluster":
            cluster_name = args.args["name"]
            return {
                "name": cluster_name,
                "id": cluster_name,
                "arn": _arn("eks", "cluster", cluster_name),
                "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                "certificateAuthorities": [{"data": "LS0tLS1CRUdJTi1DRVJUSUZJQ0FURS0tLS0t"}],
                "vpcConfig": {
                    "clusterSecurityGroupId": "sg-0e0e0e0e0e0e0e0e0",
                    "vpcId": "vpc-0123456789abcdef0",
                    "subnetIds": [],
                },
                "version": "1.34",
                "accessConfigs": [{"authenticationMode": "API_AND_CONFIG_MAP"}],
                "roleArn": f"arn:aws:iam::{ACCOUNT_ID}:role/{cluster_name}-cluster",
            }
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/test", "userId": "AIDATEST"}
        if args.token == "aws:iam/getSessionContext:getSessionContext":
            # STS names an assumed-role session arn:aws:sts::<account>:assumed-role/<role>/<session>;
            # the issuer is the role. Any other principal is its own issuer.
            arn = args.args["arn"]
            match = re.match(r"^arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/(.+)$", arn)
            if match is None:
                return {"arn": arn, "issuerArn": arn, "id": arn}
            partition, account, role, session = match.groups()
            return {
                "arn": arn,
                "issuerArn": f"arn:{partition}:iam::{account}:role/{role}",
                "issuerName": role,
                "sessionName": session,
                "id": arn,
            }
        if args.token == "aws:eks/getClusters:getClusters":
            # No cluster exists yet: every program runs as its first deployment unless a test says otherwise.
            return {"names": [], "id": "us-west-2"}
        if args.token in ("aws:index/getRegion:getRegion",):
            return {"name": "us-west-2", "region": "us-west-2", "id": "us-west-2"}
        if args.token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            return {
                "id": "us-west-2",
                "userName": "AWS",
                "password": "mock-ecr-password",
                "authorizationToken": "QVdTOm1vY2stZWNyLXBhc3N3b3Jk",
                "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com",
                "expiresAt": "2030-01-01T00:00:00Z",
            }
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            # A version of the shape EKS returns; for the node monitoring agent, the build its 1.7.0
            # chart ships (nodeAgent.image.tag). Tests only: a render marks it as unknown instead.
            addon = args.args["addonName"]
            version = "v1.7.0-eksbuild.1" if addon == "eks-node-monitoring-agent" else "v1.0.0-eksbuild.1"
            return {
                "addonName": addon,
                "kubernetesVersion": args.args["kubernetesVersion"],
                "mostRecent": args.args.get("mostRecent", False),
                "version": version,
                "id": addon,
            }
        return {}


class RecordingMonitor(runtime_mocks.MockMonitor):
    """The SDK's mock monitor, also keeping what the program asked for of each registration."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.invokes: list[tuple[str, dict[str, Any]]] = []

    def Invoke(self, request):
        response = super().Invoke(request)
        self.invokes.append((request.tok, rpc.deserialize_properties(request.args, keep_internal=False)))
        return response

    def RegisterResource(self, request):
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
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor)
        settings.SETTINGS.outputs = set()
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

    return contextvars.Context().run(body)


def stack_file(stack: str, project_root: Path = PROJECT_ROOT) -> Path:
    """``stacks/Pulumi.<stack>.yaml`` of a project."""
    return project_root / "stacks" / f"Pulumi.{stack}.yaml"


def stack_config(stack: str, project_root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The ``config`` of ``stacks/Pulumi.<stack>.yaml``."""
    return yaml.safe_load(stack_file(stack, project_root).read_text())["config"]


def run_main(
    config: Mapping[str, Any],
    *,
    stack: str = "test",
    preview: bool = False,
    mocks: Optional[pulumi.runtime.Mocks] = None,
    project_root: Path = PROJECT_ROOT,
) -> Graph:
    """Run a project's ``__main__.py`` under mocks with the given stack configuration."""
    import runpy

    return run_program(
        lambda: runpy.run_path(str(project_root / "__main__.py"), run_name="__main__"),
        config,
        stack=stack,
        preview=preview,
        mocks=mocks,
    )


def run_stack(stack: str, *, preview: bool = False) -> Graph:
    """Run ``__main__.py`` with the configuration of ``stacks/Pulumi.<stack>.yaml``."""
    return run_main(stack_config(stack), stack=stack, preview=preview)
