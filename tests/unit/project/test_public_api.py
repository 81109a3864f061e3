"""What a program importing the library meets: the root exports, help() text, the refusal of a
dict with bad keys, configuration models that take Outputs, and another project's namespace."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pydoc
import subprocess
import sys
import typing

import pulumi
import pydantic
import pytest

import eks_gpu_training
from eks_gpu_training import (
    ConfigError,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
    GpuTrainingPlatform,
    NetworkConfig,
    SubnetConfig,
)
from eks_gpu_training.config import ClusterConfig, GpuTrainingPlatformArgs, TopologyLabelerConfig, validate_platform
from eks_gpu_training.config.documented import field_docstrings
from eks_gpu_training.platform.loading import load_stack_config
from tests.support.harness import run_program, stand_in_ref

COMPONENTS = [
    getattr(eks_gpu_training, name)
    for name in eks_gpu_training.__all__
    if isinstance(getattr(eks_gpu_training, name), type) and issubclass(getattr(eks_gpu_training, name), pulumi.ComponentResource)
]
ARGS = [getattr(eks_gpu_training, f"{c.__name__}Args") for c in COMPONENTS]


def _library_classes(annotation) -> set[type]:
    found = set()
    if isinstance(annotation, type) and annotation.__module__.startswith("eks_gpu_training"):
        found.add(annotation)
    for argument in typing.get_args(annotation):
        found |= _library_classes(argument)
    return found


def _hints(cls: type) -> dict[str, typing.Any]:
    # pulumi.Input names Output[T] as a forward reference.
    return typing.get_type_hints(cls, localns={"Output": pulumi.Output, "T": typing.Any})


def test_every_type_needed_to_build_a_components_arguments_is_exported_from_the_root():
    exported = {getattr(eks_gpu_training, name) for name in eks_gpu_training.__all__}
    needed = set()
    for args in ARGS:
        hints = _hints(args)
        for annotation in hints.values():
            needed |= _library_classes(annotation)
        if hasattr(args, "model_fields"):  # the platform's arguments are a configuration model
            for field in args.model_fields.values():
                needed |= _library_classes(field.annotation)
    unvisited = list(needed)
    while unvisited:  # the types inside those types, configuration models and dataclasses alike
        cls = unvisited.pop()
        if hasattr(cls, "model_fields"):
            inner = set().union(*(_library_classes(f.annotation) for f in cls.model_fields.values()))
        elif dataclasses.is_dataclass(cls):
            inner = set().union(*map(_library_classes, _hints(cls).values()))
        else:
            inner = set()
        unvisited += inner - needed
        needed |= inner
    assert {c.__name__ for c in needed - exported} == set()
    assert {"NetworkConfig", "SubnetConfig", "ClusterConfig", "SystemNodeGroupConfig", "PriorityClassConfig"} <= {
        c.__name__ for c in needed
    }


def _imported_names(module) -> set[str]:
    """The names a package's ``if TYPE_CHECKING:`` block imports: what type checkers see."""
    tree = ast.parse(inspect.getsource(module))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.name for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_the_root_exports_what_type_checkers_see_and_loads_each_on_first_use():
    assert set(eks_gpu_training.__all__) == _imported_names(eks_gpu_training)
    assert set(dir(eks_gpu_training)) >= set(eks_gpu_training.__all__)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        eks_gpu_training.NoSuchName  # noqa: B018 - the attribute read is the test


def test_the_offline_package_exports_exactly_the_engines_names():
    from eks_gpu_training import offline
    from eks_gpu_training.offline import engine

    assert offline.__all__ == engine.__all__
    assert all(getattr(offline, name) is getattr(engine, name) for name in engine.__all__)


@pytest.mark.parametrize("statement", [
    "import eks_gpu_training",
    "import eks_gpu_training.local.node_health",
    "import eks_gpu_training.local.node_repair",
    "import eks_gpu_training.healthgate.gate_loop",
    "from eks_gpu_training.offline import agent_data",
])
def test_the_package_and_the_local_clusters_helper_programs_load_without_the_sdks(statement):
    # The local cluster runs three of these beside every cluster: each loaded the Pulumi SDKs and
    # the configuration models through the package's root, 0.6 CPU-seconds and 80 MB apiece.
    code = (f"import sys; {statement}; "
            "print(' '.join(m for m in ('pulumi', 'pulumi_aws', 'pulumi_kubernetes', 'pydantic') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_help_of_a_component_lists_every_argument_with_its_docstring_and_its_outputs():
    text = pydoc.render_doc(GpuNodeGroup, renderer=pydoc.plaintext)
    docs = field_docstrings(GpuNodeGroupArgs)
    for field in dataclasses.fields(GpuNodeGroupArgs):
        assert f"{field.name} ({field.type}): {docs[field.name]}" in text
    assert "node_role (aws.iam.Role):" in text
    # Not ComponentResource's own parameters (t, props, remote) under __init__.
    assert ":param str t:" not in text


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_component_documents_each_argument(component):
    args = getattr(eks_gpu_training, f"{component.__name__}Args")
    names = list(args.model_fields) if hasattr(args, "model_fields") else [f.name for f in dataclasses.fields(args)]
    docs = {n: f.description for n, f in args.model_fields.items()} if hasattr(args, "model_fields") else field_docstrings(args)
    assert all(docs.get(name) for name in names), [n for n in names if not docs.get(n)]
    assert all(f"    {name} (" in component.__doc__ for name in names)


NETWORK = {
    "vpcId": "vpc-0123456789abcdef0",
    "subnets": [
        {"id": "subnet-0123456789abcdef0", "availabilityZone": "us-west-2a"},
        {"id": "subnet-0123456789abcdef1", "availabilityZone": "us-west-2b"},
    ],
}


def test_a_dict_given_for_a_configuration_model_is_checked_into_the_model():
    args = GpuNodeGroupArgs(cluster=stand_in_ref(), pool={"name": "h100", "instanceTypes": ["p5.48xlarge"]}, network=NETWORK)
    assert args.pool == GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"])
    assert isinstance(args.network, NetworkConfig)


def test_a_dict_with_bad_keys_is_refused_with_key_paths_not_a_pydantic_trace():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupArgs(cluster=stand_in_ref(), pool={"name": "h100", "instanceType": "p5.48xlarge"}, network={"vpcId": "vpc-1"})
    allowed = ", ".join(field.alias for field in GpuNodeGroupConfig.model_fields.values())
    assert [str(p) for p in raised.value.problems] == [
        f"GpuNodeGroupArgs.pool.instanceType: unknown key; allowed: {allowed}",
        "GpuNodeGroupArgs.network.vpcId: 'vpc-1' does not match ^vpc-[0-9a-f]{8,17}$",
    ]


def test_something_other_than_a_model_or_dict_is_refused_naming_the_expected_model():
    with pytest.raises(ConfigError, match=r"GpuNodeGroupArgs.pool: expected a GpuNodeGroupConfig \(or a dict of its keys\), got str"):
        GpuNodeGroupArgs(cluster=stand_in_ref(), pool="h100", network=NETWORK)


def test_the_platform_checks_a_dict_given_as_its_arguments_before_registering_anything():
    def program():
        GpuTrainingPlatform("p", {"region": "us-west-2", "cluster": {"name": "research"}, "network": {**NETWORK, "vpc": "x"}})

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    allowed = ", ".join(field.alias for field in NetworkConfig.model_fields.values())
    assert [str(p) for p in graph.error.problems] == [f"GpuTrainingPlatformArgs.network.vpc: unknown key; allowed: {allowed}"]
    assert allowed.startswith("create, vpcId, subnets, ")
    assert graph.resources == []


def test_configuration_models_take_outputs_where_another_resource_supplies_the_value():
    vpc_id, subnet_id, arn, image = (pulumi.Output.from_input(v) for v in ("a", "b", "c", "d"))
    network = NetworkConfig(vpc_id=vpc_id, subnets=[SubnetConfig(id=subnet_id, availability_zone="us-west-2a")])
    assert network.vpc_id is vpc_id
    assert network.subnets[0].id is subnet_id
    assert ClusterConfig(name=pulumi.Output.from_input("x"), admin_principal_arns=[arn]).admin_principal_arns == [arn]
    assert TopologyLabelerConfig(image=image).image is image


def test_known_values_are_still_checked_where_outputs_are_allowed():
    with pytest.raises(ConfigError, match=r"SubnetConfig.id: 'subnet-nothex' does not match \^subnet-"):
        SubnetConfig(id="subnet-nothex", availability_zone="us-west-2a")
    with pytest.raises(ValueError, match="must be a string or a pulumi.Output, not int"):
        NetworkConfig(vpc_id=12, subnets=[])
    with pytest.raises(ValueError, match="is not an IAM role or user ARN"):
        ClusterConfig(name="x", admin_principal_arns=["admin"])
    with pytest.raises(ValueError, match="names no fixed image"):
        TopologyLabelerConfig(image="nginx")


def _platform(network: NetworkConfig, **pool) -> GpuTrainingPlatformArgs:
    return GpuTrainingPlatformArgs(
        region="us-west-2",
        cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["203.0.113.0/24"]),
        network=network,
        gpu_node_groups=[GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], **pool)],
    )


def test_rules_comparing_ids_skip_outputs_and_find_an_output_subnet_by_identity():
    a, b = pulumi.Output.from_input("subnet-a"), pulumi.Output.from_input("subnet-b")
    network = NetworkConfig(
        vpc_id=pulumi.Output.from_input("vpc"),
        subnets=[SubnetConfig(id=a, availability_zone="us-west-2a"), SubnetConfig(id=b, availability_zone="us-west-2b")],
    )
    assert validate_platform(_platform(network, subnet_ids=[a])) == []
    other = pulumi.Output.from_input("subnet-a")
    problems = [str(p) for p in validate_platform(_platform(network, subnet_ids=[other]))]
    assert problems == [
        "gpuNodeGroups[0].subnetIds[0]: an Output (known after deployment) is not in network.subnets; allowed: "
        "an Output (known after deployment), an Output (known after deployment)"
    ]


def test_a_known_subnet_listed_twice_is_still_refused_beside_outputs():
    twice = NetworkConfig(
        vpc_id="vpc-0123456789abcdef0",
        subnets=[
            SubnetConfig(id="subnet-0123456789abcdef0", availability_zone="us-west-2a"),
            SubnetConfig(id="subnet-0123456789abcdef0", availability_zone="us-west-2a"),
            SubnetConfig(id=pulumi.Output.from_input("subnet-x"), availability_zone="us-west-2b"),
        ],
    )
    problems = [str(p) for p in validate_platform(_platform(twice, availability_zone="us-west-2a"))]
    assert problems == ["network.subnets[1].id: 'subnet-0123456789abcdef0' is listed twice"]


CLUSTER = {"endpointPublicAccessCidrs": ["203.0.113.0/24"]}

ACME_SETTINGS = {
    "aws:region": "us-west-2",
    "acme:cluster": {"name": "acme", "endpointPublicAccessCidrs": ["203.0.113.0/24"]},
    "acme:network": NETWORK,
}


def _loaded(program_project: str, settings: dict, **kwargs) -> GpuTrainingPlatformArgs:
    loaded = {}

    def program():
        loaded["args"] = load_stack_config(**kwargs)

    graph = run_program(program, settings, project=program_project)
    if graph.error is not None:
        raise graph.error
    return loaded["args"]


def test_load_stack_config_reads_the_running_programs_own_namespace():
    assert _loaded("acme", ACME_SETTINGS).cluster.name == "acme"


def test_load_stack_config_reads_a_namespace_it_is_given():
    settings = {"aws:region": "us-west-2", "platform:cluster": {**CLUSTER, "name": "other"}, "platform:network": NETWORK}
    assert _loaded("acme", settings, project="platform").cluster.name == "other"


def test_load_stack_config_falls_back_to_the_librarys_namespace():
    settings = {"aws:region": "us-west-2", "eks-gpu-training:cluster": {**CLUSTER, "name": "ours"}, "eks-gpu-training:network": NETWORK}
    assert _loaded("acme", settings).cluster.name == "ours"


def test_load_stack_config_names_keys_in_the_namespace_it_read():
    with pytest.raises(ConfigError, match="cluster: is required"):
        _loaded("acme", {"aws:region": "us-west-2", "acme:network": NETWORK})


def test_a_dict_for_a_field_taking_a_ref_or_a_model_is_checked_into_the_model():
    from eks_gpu_training import EksClusterArgs, NetworkRef

    args = EksClusterArgs(cluster={"name": "research"}, network=NETWORK, system_node_group={}, region="us-west-2", partition="aws")
    assert isinstance(args.network, NetworkConfig)
    assert args.network.subnets[1].id == "subnet-0123456789abcdef1"
    ref = NetworkRef(vpc_id="vpc-0123456789abcdef0", subnets=())
    assert EksClusterArgs(cluster={"name": "research"}, network=ref, system_node_group={}, region="us-west-2", partition="aws").network is ref
    with pytest.raises(ConfigError, match=r"EksClusterArgs.network.vpc: unknown key"):
        EksClusterArgs(cluster={"name": "research"}, network={"vpc": "x"}, system_node_group={}, region="us-west-2", partition="aws")


CONFIG_MODELS = sorted(
    {
        getattr(eks_gpu_training, name)
        for name in eks_gpu_training.__all__
        if isinstance(getattr(eks_gpu_training, name), type) and issubclass(getattr(eks_gpu_training, name), pydantic.BaseModel)
    },
    key=lambda model: model.__name__,
)


@pytest.mark.parametrize("model", CONFIG_MODELS, ids=lambda m: m.__name__)
def test_help_of_every_config_model_shows_snake_case_parameters_with_the_references_descriptions(model):
    import inspect

    parameters = inspect.signature(model).parameters
    assert list(parameters) == list(model.model_fields)
    text = pydoc.render_doc(model, renderer=pydoc.plaintext)
    for name, info in model.model_fields.items():
        # The same text docs/configuration.md's table shows for the key.
        assert f"    {name} (" in text
        assert (info.description or "").replace("\n", " ") in text


def test_a_model_built_with_a_wrong_type_is_a_config_error_with_the_key_path():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupConfig(name="h100", max_size="4", labels=["team"])
    assert sorted(str(p) for p in raised.value.problems) == [
        "GpuNodeGroupConfig.labels: labels must be a dict of label -> value or a pulumi.Output of one, not list",
        "GpuNodeGroupConfig.max_size: must be an integer or a pulumi.Output, not str",
    ]
