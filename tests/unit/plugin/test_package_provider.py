"""The package other Pulumi languages use: its schema against the checked-in copy, what every offered
component's inputs say, and constructs through the provider as the engine asks for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from eks_gpu_training.offline.engine import stack_config
from eks_gpu_training.platform import GpuTrainingPlatform
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.plugin import package_provider
from eks_gpu_training.plugin.package_provider import OFFERED, PACKAGE_NAME, PYTHON_ONLY, PackageProvider, package_schema
from tests.support.harness import PROJECT_ROOT, run_program

SCHEMA_FILE = Path(package_provider.__file__).parent / package_provider.SCHEMA_FILE
WRITE = ".venv/bin/python -m eks_gpu_training.plugin.package_provider --write"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return package_schema()


def _properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(owner, property, definition) of every input and output of every resource and type."""
    found = []
    for token, resource in schema["resources"].items():
        for key in ("inputProperties", "properties"):
            found += [(f"{token}.{key}", name, prop) for name, prop in resource.get(key, {}).items()]
    for token, type_ in schema["types"].items():
        found += [(token, name, prop) for name, prop in type_.get("properties", {}).items()]
    return found


def test_the_schema_is_the_checked_in_copy(schema):
    assert json.loads(SCHEMA_FILE.read_text()) == schema, f"an Args class changed the schema: run `{WRITE}` and review the diff"


def test_every_offered_component_is_in_the_schema(schema):
    assert sorted(schema["resources"]) == sorted(f"{PACKAGE_NAME}:index:{c.__name__}" for c in OFFERED)
    assert {"GpuTrainingPlatform", "GpuNodeGroup", "GpuOperator", "EfaDevicePlugin", "Karpenter", "GpuNodePool",
            "TopologyLabeler", "SchedulingPolicies", "KueueQueues", "TrainingJob"} <= {c.__name__ for c in OFFERED}


def test_every_property_is_described_and_typed(schema):
    undescribed = [f"{owner}.{name}" for owner, name, prop in _properties(schema) if not prop.get("description")]
    untyped = [f"{owner}.{name}" for owner, name, prop in _properties(schema) if "Any" in json.dumps(prop)]
    assert (undescribed, untyped) == ([], [])


def test_required_inputs_are_the_fields_without_a_default(schema):
    node_group = schema["resources"][f"{PACKAGE_NAME}:index:GpuNodeGroup"]
    assert sorted(node_group["requiredInputs"]) == ["cluster", "pool"]
    spec = schema["types"][f"{PACKAGE_NAME}:index:TrainingJobSpec"]
    # Optional without a default (``priority_class``) is optional here: an absent one is None.
    assert sorted(spec["required"]) == ["instanceTypes", "name", "namespace", "nodes"]


def test_configuration_models_take_their_stack_keys_with_the_documented_defaults(schema):
    pool = schema["types"][f"{PACKAGE_NAME}:index:GpuNodeGroupConfig"]["properties"]
    assert {"instanceTypes", "maxSize"} <= set(pool)
    assert "Default" in pool["maxSize"]["description"]


def test_a_union_offers_one_form_and_names_the_python_only_ones(schema):
    spec = schema["types"][f"{PACKAGE_NAME}:index:TrainingJobSpec"]["properties"]
    assert spec["env"]["additionalProperties"] == {"type": "string"}
    assert "SecretKeyRef form is Python-only" in spec["env"]["description"]
    cluster = schema["resources"][f"{PACKAGE_NAME}:index:GpuNodeGroup"]["inputProperties"]["cluster"]
    assert cluster["$ref"] == f"#/types/{PACKAGE_NAME}:index:AdoptedCluster"


def test_python_only_fields_stay_out_of_the_schema(schema):
    for (args, field), _reason in PYTHON_ONLY.items():
        component = args.removesuffix("Args")
        camel = field.split("_")[0] + "".join(w.title() for w in field.split("_")[1:])
        assert camel not in schema["resources"][f"{PACKAGE_NAME}:index:{component}"].get("inputProperties", {})


def test_outputs_are_the_components_output_attributes(schema):
    policies = schema["resources"][f"{PACKAGE_NAME}:index:SchedulingPolicies"]
    assert sorted(policies["properties"]) == ["namespaceNames", "priorityClassNames"]


# --- constructs, as the engine asks for them ------------------------------------------------------


def _construct(component: str, inputs: dict[str, Any], options: pulumi.ResourceOptions | None = None):
    provider = PackageProvider()

    def program() -> None:
        result = provider.construct("team", f"{PACKAGE_NAME}:index:{component}", inputs, options)
        pulumi.export("urn", result.urn)
        pulumi.export("state", result.state)

    return run_program(program)


QUOTA = {"gpus": 16, "cpu": "384", "memory": "3Ti", "persistentVolumeClaims": 20}


def test_a_construct_builds_the_component_from_schema_inputs():
    graph = _construct("SchedulingPolicies", {"namespaces": [{"name": "training", "quota": QUOTA}], "serviceAccount": "trainer"})
    assert graph.error is None
    quota = graph.one("kubernetes:core/v1:ResourceQuota")
    assert quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"
    assert graph.exports["state"]["namespaceNames"] == ["training"]


def test_a_training_job_construct_takes_lists_as_the_specs_tuples():
    job = {"name": "llama", "nodes": 2, "instanceTypes": ["p5.48xlarge"], "priorityClass": "training-critical",
           "namespace": "training", "image": "registry.example/trainer:1", "command": ["torchrun"], "args": ["train.py"]}
    graph = _construct("TrainingJob", {"job": job})
    assert graph.error is None
    created = graph.one("kubernetes:batch/v1:Job")
    assert created.inputs["spec"]["parallelism"] == 2


def test_a_bad_argument_comes_back_as_property_errors_with_the_path():
    job = {"name": "llama", "nodes": 2, "instanceTypes": ["p5.48xlarge"], "priorityClass": "training-critical",
           "namespace": "training", "image": "registry.example/trainer:1", "kind": "CronJob"}
    graph = _construct("TrainingJob", {"job": job})
    # Property errors alone: not a RunError, which the provider server would report as a crash.
    assert type(graph.error) is pulumi.InputPropertiesError
    assert graph.error.errors == [{"property_path": "TrainingJob(team).kind", "reason": "'CronJob' is not a job kind; allowed: Job, JobSet, TrainJob"}]


def test_a_missing_required_input_names_its_property():
    graph = _construct("TrainingJob", {})
    assert isinstance(graph.error, pulumi.InputPropertyError)
    assert graph.error.property_path == "job"


def _with_config(value: Any, config: dict[str, str]) -> Any:
    """A YAML program's value with its ``${config}`` references replaced."""
    if isinstance(value, str) and value.startswith("${") and value[2:-1] in config:
        return config[value[2:-1]]
    if isinstance(value, dict):
        return {k: _with_config(v, config) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_config(v, config) for v in value]
    return value


def test_the_yaml_examples_components_construct_through_the_provider():
    """examples/yaml's components, each constructed as the engine asks the provider for it (the
    cluster tier deploys the program itself): every input it gives is one the schema offers."""
    program = yaml.safe_load((PROJECT_ROOT / "examples" / "yaml" / "Pulumi.yaml").read_text())
    config = {"kubeconfig": "kubeconfig.yaml", "chartMirror": "https://charts.example.com"}
    provider = PackageProvider()

    def run() -> None:
        cluster = k8s.Provider("cluster", kubeconfig="kubeconfig.yaml")
        for name, resource in program["resources"].items():
            if resource["type"].startswith(f"{PACKAGE_NAME}:"):
                inputs = _with_config(resource.get("properties", {}), config)
                provider.construct(name, resource["type"], inputs, pulumi.ResourceOptions(providers={"kubernetes": cluster}))

    graph = run_program(run)
    assert graph.error is None
    assert graph.one("kubernetes:batch/v1:Job").inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert graph.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs["metadata"]["name"] == "training"


def test_a_pools_tags_come_through_the_schema_as_an_input_of_a_whole_map(schema):
    tags = schema["resources"][f"{PACKAGE_NAME}:index:GpuNodeGroup"]["inputProperties"]["tags"]
    assert (tags["type"], tags.get("plain")) == ("object", None)

    def program() -> None:
        owner = pulumi.Output.from_input({"owner": "ml-platform"})
        pool = {"name": "h100", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2a"}
        network = {"vpcId": "vpc-0123456789abcdef0", "subnets": [
            {"id": "subnet-0123456789abcdef0", "availabilityZone": "us-west-2a"},
            {"id": "subnet-0123456789abcdef1", "availabilityZone": "us-west-2b"}]}
        inputs = {"cluster": {"name": "research", "region": "us-west-2"}, "pool": pool, "network": network, "tags": owner}
        PackageProvider().construct("h100", f"{PACKAGE_NAME}:index:GpuNodeGroup", inputs, pulumi.ResourceOptions())

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    node_group = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert node_group.inputs["tags"] == {"owner": "ml-platform"}


def _platform_inputs(stack: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stack file's settings as the platform's schema inputs (its stack keys are the property
    names), and the engine configuration to run them with."""
    config = stack_config(stack)
    inputs = {key.split(":", 1)[1]: value for key, value in config.items() if key.startswith(f"{PACKAGE_NAME}:")}
    inputs["region"] = config["aws:region"]
    return inputs, {"aws:region": config["aws:region"]}


def test_the_whole_platform_through_the_provider_plans_what_the_python_program_does():
    """The AWS half too, under the engine's mocks: dev's stack file given as the schema's inputs
    (its stack keys are the property names) registers the resources the Python component does."""
    config = stack_config("dev")
    inputs, settings = _platform_inputs("dev")
    through_provider = run_program(
        lambda: PackageProvider().construct("gpu-training", f"{PACKAGE_NAME}:index:GpuTrainingPlatform", inputs, None), settings)
    in_python = run_program(lambda: GpuTrainingPlatform("gpu-training", platform_args_from_settings(config)), settings)
    assert (through_provider.error, in_python.error) == (None, None)
    assert sorted((r.type, r.name) for r in through_provider.resources) == sorted((r.type, r.name) for r in in_python.resources)
    assert len(through_provider.of_type("aws:eks/nodeGroup:NodeGroup")) >= 2


def test_the_platforms_tags_come_through_the_schema_as_an_input_of_a_whole_map(schema):
    """Cost tags read from another stack: one Output of a map, which the engine hands the provider
    as an Output, reach the platform's AWS resources as the plain map does."""
    for component in ("GpuTrainingPlatform", "GpuTrainingInCluster"):
        tags = schema["resources"][f"{PACKAGE_NAME}:index:{component}"]["inputProperties"]["tags"]
        assert (tags["type"], tags.get("plain")) == ("object", None)
    inputs, settings = _platform_inputs("dev")
    plain = dict(inputs["tags"])

    def program() -> None:
        whole_map = pulumi.Output.from_input("dev").apply(lambda _: plain)
        PackageProvider().construct("gpu-training", f"{PACKAGE_NAME}:index:GpuTrainingPlatform", {**inputs, "tags": whole_map}, None)

    graph = run_program(program, settings)
    assert graph.error is None, repr(graph.error)
    for token in ("aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role", "aws:ec2/vpc:Vpc", "eks:index:Cluster"):
        resources = graph.of_type(token)
        assert resources, token
        assert all(plain.items() <= r.inputs["tags"].items() for r in resources), token


def test_the_library_page_names_every_python_only_component_and_field():
    """docs/library.md says what other languages cannot use: each component left out of the schema
    and each field of ``PYTHON_ONLY``, by name."""
    import eks_gpu_training

    page = (PROJECT_ROOT / "docs" / "library.md").read_text()
    section = page.split("## From another language\n", 1)[1].split("\n## ", 1)[0]
    exported = (getattr(eks_gpu_training, name) for name in eks_gpu_training.__all__)
    components = {value.__name__ for value in exported if isinstance(value, type) and issubclass(value, pulumi.ComponentResource)}
    python_only = sorted(components - {c.__name__ for c in OFFERED})
    assert python_only
    assert [name for name in python_only if f"`{name}`" not in section] == []
    assert [field for _, field in PYTHON_ONLY if f"`{field}`" not in section] == []


def test_an_output_of_a_map_whose_keys_are_needed_now_is_refused_saying_why():
    """The labeler pins its base images by looking their digests up before anything is created: an
    Output of the whole map cannot be read then, and the property error says so."""

    def program() -> None:
        digests = pulumi.Output.from_input({"public.ecr.aws/docker/library/python:3.12-slim": "sha256:" + "0" * 64})
        inputs = {"cluster": {"name": "research", "region": "us-west-2"}, "config": {}, "imageDigests": digests}
        PackageProvider().construct("labeler", f"{PACKAGE_NAME}:index:TopologyLabeler", inputs, pulumi.ResourceOptions())

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert type(graph.error) is pulumi.InputPropertiesError
    [error] = graph.error.errors
    assert error["property_path"] == "TopologyLabelerArgs.image_digests"
    assert error["reason"].startswith("is an Output of a whole map, but the component reads its keys before anything is created")
