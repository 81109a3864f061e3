"""The components other Pulumi languages use: ``OFFERED``, the fields that stay Python-only and why,
and ``PackageProvider``, the SDK's component provider over ``PackageAnalyzer``'s schema.

The engine runs this package's ``__main__`` as a plugin (the console script
``pulumi-resource-eks-gpu-training``, or the folder with ``PulumiPlugin.yaml``): ``pulumi package
gen-sdk``/``add`` read the schema and write an SDK in the consumer's language, and each construct
comes here. A consumer's bad argument is raised as the ``InputPropertiesError`` of the
``ConfigError`` a Python program gets, so the engine shows the same property paths in every language."""

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Optional

import pulumi
from pydantic import BaseModel
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.provider import ConstructResult, Provider

from ..addons.efa_device_plugin import EfaDevicePlugin
from ..addons.gpu_node_pool import GpuNodePool
from ..addons.gpu_operator import GpuOperator
from ..addons.karpenter import Karpenter
from ..addons.topology_labeler import TopologyLabeler
from ..aws.cluster_ref import ClusterRef
from ..aws.gpu_node_group import GpuNodeGroup
from ..config import ConfigError, Problem
from ..config.arguments import as_model
from ..facts import aws_enums
from ..facts.kubernetes_versions import DEFAULT_KUBERNETES_VERSION
from ..platform.gpu_training_platform import GpuTrainingPlatform
from ..platform.gpu_training_in_cluster import GpuTrainingInCluster
from ..workloads.kueue_queues import KueueQueues
from ..workloads.scheduling_policies import SchedulingPolicies
from ..workloads.training_job import TrainingJob
from .package_analyzer import PackageAnalyzer, resolved

PACKAGE_NAME = "eks-gpu-training"
"""The package name in the schema and the type tokens (``eks-gpu-training:index:GpuNodeGroup``)."""

OFFERED: tuple[type[pulumi.ComponentResource], ...] = (
    GpuTrainingPlatform, GpuTrainingInCluster, GpuNodeGroup, GpuOperator, EfaDevicePlugin, Karpenter,
    GpuNodePool, TopologyLabeler, SchedulingPolicies, KueueQueues, TrainingJob,
)
"""The components in the schema. The others (``EksCluster``, ``Network``, ``LustreStorage``, ...)
are Python-only for now; ``GpuTrainingPlatform`` makes them from its configuration."""

PYTHON_ONLY: Mapping[tuple[str, str], str] = {
    ("TrainingJobArgs", "job_after"): "resources to wait for: give them as dependsOn",
    ("KueueQueuesArgs", "namespace_resources"): "the Namespace resources to wait for: give them as dependsOn",
    ("GpuNodePoolArgs", "karpenter_release"): "the Karpenter release to wait for: give the Karpenter component as dependsOn",
}
"""Fields left out of the schema, with the form other languages use instead."""


@dataclasses.dataclass(frozen=True)
class AdoptedCluster:
    """An EKS cluster made elsewhere, the form a component's ``cluster`` takes outside Python: looked
    up by name (``ClusterRef.from_existing``), or reached through the Kubernetes provider in ``opts``
    alone, as the in-cluster half reaches its cluster."""

    name: pulumi.Input[str]
    """EKS cluster name (an Output of your cluster resource will do)."""
    region: str
    """AWS region of the cluster."""
    lookup: bool = True
    """Look the cluster up in AWS; false: read nothing in AWS and put the objects on the Kubernetes
    provider in ``opts`` (what an in-cluster component needs). Default: true."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """Kubernetes version of the control plane, when not looked up. Default: 1.35."""


FIELD_TYPES: Mapping[tuple[str, str], Any] = {
    **{(args, "cluster"): AdoptedCluster for args in (
        "GpuNodeGroupArgs", "KarpenterArgs", "GpuNodePoolArgs", "TopologyLabelerArgs", "GpuOperatorArgs", "EfaDevicePluginArgs")},
    **{(args, "cluster"): Optional[AdoptedCluster] for args in ("SchedulingPoliciesArgs", "KueueQueuesArgs", "TrainingJobArgs")},
}
"""Fields whose schema type is another form than their Python one: a ``cluster`` (a ``ClusterRef``,
``EksCluster`` or ``pulumi_eks.Cluster`` in Python) is an ``AdoptedCluster``."""


def _analyzer() -> PackageAnalyzer:
    return PackageAnalyzer(PACKAGE_NAME, PYTHON_ONLY, FIELD_TYPES)


def package_schema(version: str = "0.0.0") -> dict[str, Any]:
    """The package's Pulumi schema, as ``pulumi package get-schema`` prints it."""
    return _schema(_analyzer().analyze(list(OFFERED)), version)


def _schema(analysis: Any, version: str) -> dict[str, Any]:
    """The schema of an analysis of ``OFFERED`` (``PackageAnalyzer.analyze``'s result)."""
    dependencies = sorted(analysis["dependencies"], key=lambda d: f"{d.name}{d.version}")
    schema = generate_schema(PACKAGE_NAME, version, None, analysis["component_definitions"], analysis["type_definitions"],
                             dependencies)
    return typing.cast(dict[str, Any], _without_item_descriptions(schema.to_json()))


def _without_item_descriptions(node: Any) -> Any:
    """The schema as the CLI prints it: the analyzer repeats a list's or map's description on its
    items and writes empty lists, which ``pulumi package get-schema`` drops."""
    if isinstance(node, dict):
        out = {k: _without_item_descriptions(v) for k, v in node.items() if v != [] or k not in ("required", "requiredInputs", "dependencies")}
        for key in ("items", "additionalProperties"):
            if isinstance(out.get(key), dict):
                out[key] = {k: v for k, v in out[key].items() if k != "description"}
        return out
    if isinstance(node, list):
        return [_without_item_descriptions(v) for v in node]
    return node


def _cluster_ref(cluster: AdoptedCluster, path: str, options: Optional[pulumi.ResourceOptions]) -> ClusterRef:
    if cluster.lookup:
        return ClusterRef.from_existing(cluster.name, cluster.region, resource_name=f"{path}-cluster")
    providers = options.providers if options is not None else None
    found = providers.get("kubernetes") if isinstance(providers, dict) else next(
        (p for p in providers or () if getattr(p, "package", None) == "kubernetes"), None)
    if found is None:
        raise ConfigError([Problem(f"{path}.cluster.lookup", "false needs the cluster's Kubernetes provider in the options (providers)")])
    return ClusterRef(
        name=cluster.name, region=cluster.region, partition=aws_enums.partition_of(cluster.region), vpc_id="",
        kubernetes_version=cluster.kubernetes_version, cluster_security_group_id="", kubeconfig="",
        provider=typing.cast(Any, found),  # the program's own Kubernetes provider, by reference
    )


def _plain(value: Any, annotation: Any, module: str, path: str, options: Optional[pulumi.ResourceOptions] = None) -> Any:
    """A value mapped from the schema as the Python argument: dicts into the dataclasses they stand
    for, lists into tuples where the field is one, an ``AdoptedCluster`` into its ``ClusterRef``."""
    annotation = resolved(annotation, module)
    origin, members = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, typing.ForwardRef):
        return _plain(value, annotation.__forward_arg__, module, path, options)
    if origin is typing.Union:
        candidates = [m for m in members if m is not type(None)]
        chosen = next((m for m in candidates if dataclasses.is_dataclass(m)), candidates[0]) if isinstance(value, dict) else None
        return _plain(value, chosen, module, path, options) if chosen is not None else value
    if annotation is AdoptedCluster and isinstance(value, dict):
        return _cluster_ref(AdoptedCluster(**value), path, options)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
        return as_model(value, annotation, f"{path}.{annotation.__name__}")
    if dataclasses.is_dataclass(annotation) and isinstance(value, dict):
        cls = typing.cast(type, annotation)
        return cls(**_dataclass_fields(cls, value, path, options))
    if origin in (tuple,) and isinstance(value, list):
        return tuple(value)
    if origin is not None and isinstance(value, list) and members:
        return [_plain(v, members[0], module, path, options) for v in value]
    return value


def _karpenter_dependency(name: str, options: Optional[pulumi.ResourceOptions]) -> pulumi.Resource:
    after = list(options.depends_on or []) if options is not None and isinstance(options.depends_on, list) else []
    if not after:
        raise ConfigError([Problem(f"GpuNodePool({name}).dependsOn", "give the Karpenter component as dependsOn: the pool's custom resources need its CRDs")])
    return typing.cast(pulumi.Resource, after[0])


def _dataclass_fields(cls: type, value: Mapping[str, Any], path: str, options: Optional[pulumi.ResourceOptions] = None) -> dict[str, Any]:
    """The keyword arguments of dataclass ``cls`` from mapped inputs: each converted by ``_plain``;
    an ``Optional`` field without a default, which the schema offers as optional, is None when absent."""
    fields = {}
    for field in dataclasses.fields(cls):
        annotation = FIELD_TYPES.get((cls.__name__, field.name), field.type)
        if field.name in value:
            fields[field.name] = _plain(value[field.name], annotation, cls.__module__, path, options)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if type(None) in typing.get_args(resolved(annotation, cls.__module__)):
                fields[field.name] = None
    return fields


class PackageProvider(ComponentProvider):
    """The SDK's component provider with ``PackageAnalyzer``'s schema; a construct builds the
    component's Args from the inputs and calls the component as a Python program would."""

    def __init__(self, version: str = "0.0.0") -> None:
        self._name = PACKAGE_NAME
        self.analyzer = _analyzer()
        result = self.analyzer.analyze(list(OFFERED))
        self._components = {component.__name__: component for component in OFFERED}
        self._component_defs = result["component_definitions"]
        self._type_defs = result["type_definitions"]
        self._external_enum_types = result["external_enum_types"]
        self._dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
        # The schema of this analysis, rather than of a second one.
        Provider.__init__(self, version, json.dumps(_schema(result, version)))

    def construct(self, name: str, resource_type: str, inputs: Any, options: Optional[pulumi.ResourceOptions] = None) -> ConstructResult:
        self.validate_resource_type(self._name, resource_type)
        component_name = resource_type.rsplit(":", maxsplit=1)[-1]
        component: Any = self._components[component_name]  # each takes (name, args, opts, **fields)
        mapped = self.map_inputs(inputs, self._component_defs[component_name])
        try:
            instance = self._construct_component(component, name, mapped, options)
        except ConfigError as error:
            # A ConfigError is also a RunError (for Python programs' language host), which the provider
            # server re-raises before it looks for InputPropertiesError: raise the property errors alone.
            raise pulumi.InputPropertiesError(error.message, error.errors) from None
        return ConstructResult(instance.urn, self.get_state(instance, self._component_defs[component_name]))

    @staticmethod
    def _construct_component(component: Any, name: str, mapped: Any, options: Optional[pulumi.ResourceOptions]) -> Any:
        args_type = resolved(component.__init__.__annotations__["args"], component.__module__)
        args_type = next(a for a in typing.get_args(args_type) if a is not type(None))
        if not dataclasses.is_dataclass(args_type):
            return component(name, dict(mapped), options)  # a configuration model checks the dict itself
        fields = _dataclass_fields(typing.cast(type, args_type), mapped, name, options)
        if component is GpuNodePool:
            # Its custom resources wait for Karpenter (its CRDs): the Karpenter component given as dependsOn.
            fields["karpenter_release"] = _karpenter_dependency(name, options)
        return component(name, None, options, **fields)


SCHEMA_FILE = "schema.json"
"""The checked-in schema beside this module: what review sees change when an Args class does."""


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m eks_gpu_training.plugin.package_provider --write`` rewrites the checked-in schema;
    without ``--write`` it prints the schema."""
    import sys
    from pathlib import Path

    text = json.dumps(package_schema(), indent=2, sort_keys=True) + "\n"
    if "--write" in (sys.argv[1:] if argv is None else argv):
        (Path(__file__).parent / SCHEMA_FILE).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
