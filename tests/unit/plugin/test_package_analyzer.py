"""What the analyzer makes of the shapes our Args have, on small classes of the test's own: postponed
annotations, Literal, unions, Optional Inputs, tuples, configuration models, Python-only fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Union

import pulumi
from pydantic import BaseModel, ConfigDict, Field

from eks_gpu_training.plugin.package_analyzer import PackageAnalyzer


class SecretRef(BaseModel):
    """A secret's key."""

    model_config = ConfigDict(populate_by_name=True)

    secret_name: str = Field(alias="secretName", description="The Secret. Required.")


@dataclass
class ExampleArgs:
    """Arguments of ``Example``."""

    name: str
    """Its name."""
    mode: Literal["Job", "JobSet"] = "Job"
    """What runs it. Default: Job."""
    image: Optional[pulumi.Input[str]] = None
    """Its image. Default: none."""
    env: dict[str, Union[pulumi.Input[str], SecretRef]] = field(default_factory=dict)
    """Its environment. Default: none."""
    ports: tuple[int, ...] = ()
    """Its ports. Default: none."""
    secret: Optional[SecretRef] = None
    """A secret. Default: none."""
    after: tuple[pulumi.Resource, ...] = ()
    """What it waits for. Default: nothing."""


class Example(pulumi.ComponentResource):
    """An example component."""

    url: pulumi.Output[str]
    """Where it answers."""
    children: list[pulumi.Resource]
    """Its children, for Python programs only."""

    def __init__(self, name: str, args: Optional[ExampleArgs] = None, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("test:index:Example", name, None, opts)


def _analyzed():
    analyzer = PackageAnalyzer("test", {("ExampleArgs", "after"): "give them as dependsOn"}, {})
    result = analyzer.analyze([Example])
    return result["component_definitions"]["Example"], result["type_definitions"]


def test_postponed_annotations_are_read_and_required_fields_marked():
    component, _ = _analyzed()
    assert sorted(component.inputs) == ["env", "image", "mode", "name", "ports", "secret"]
    assert [name for name, prop in component.inputs.items() if not prop.optional] == ["name"]
    assert component.description == "An example component."


def test_a_literal_is_a_string_that_lists_its_values():
    component, _ = _analyzed()
    mode = component.inputs["mode"]
    assert (mode.type.value, mode.description) == ("string", "What runs it. Default: Job. One of: 'Job', 'JobSet'.")


def test_an_optional_input_stays_an_input_and_a_tuple_is_a_list():
    component, _ = _analyzed()
    assert (component.inputs["image"].plain, component.inputs["image"].optional) == (None, True)
    assert (component.inputs["ports"].type.value, component.inputs["ports"].items.type.value) == ("array", "integer")


def test_a_union_offers_its_value_form_and_names_the_python_only_one():
    component, _ = _analyzed()
    env = component.inputs["env"]
    assert env.additional_properties.type.value == "string"
    assert env.description.endswith("(The SecretRef form is Python-only.)")


def test_a_model_is_read_under_its_stack_keys_with_its_descriptions():
    _, types = _analyzed()
    secret = types["SecretRef"]
    assert list(secret.properties) == ["secretName"]
    assert secret.properties_mapping == {"secretName": "secret_name"}
    assert secret.properties["secretName"].description == "The Secret. Required."


def test_outputs_are_the_output_attributes_only():
    component, _ = _analyzed()
    assert list(component.outputs) == ["url"]
