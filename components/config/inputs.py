"""Configuration values another resource can supply: a string checked like any other key, or a
``pulumi.Output`` accepted as it is (its value is unknown until that resource exists)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Union

import pulumi
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, PlainValidator, WithJsonSchema, WrapValidator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

if TYPE_CHECKING:
    from typing_extensions import TypeIs


def is_unknown(value: object) -> TypeIs[pulumi.Output[Any]]:
    """Whether a configuration value is a ``pulumi.Output`` (known only once its resource exists):
    such values are passed on to AWS as they are, and rules that compare values skip them."""
    return isinstance(value, pulumi.Output)


def joined(*parts: pulumi.Input[str]) -> pulumi.Input[str]:
    """``parts`` as one text: a plain string when every part is one (known at preview, so a rule can
    compare it with what runs), else their ``pulumi.Output.concat``."""
    texts = [part for part in parts if isinstance(part, str)]
    if len(texts) == len(parts):
        return "".join(texts)
    return pulumi.Output.concat(*parts)


def shown(value: Any) -> str:
    """A configuration value as a problem message quotes it; an Output has no text before deployment."""
    return "an Output (known after deployment)" if is_unknown(value) else f"'{value}'"


TextOrOutput = Union[str, pulumi.Output[str]]
"""A string, or an Output of one (the type ``ResourceInput`` checks)."""


@dataclass(frozen=True)
class ResourceInput:
    """The check of a value another resource can supply (a VPC or subnet ID, an ARN, an image): a
    string matching ``pattern``, checked as any other key, or a ``pulumi.Output``, accepted as it is
    because its value is unknown until that resource exists. Stack files can only hold strings. A
    mismatch reports the pattern, or ``'<value>' is not <what> (<hint>)`` when ``hint`` is given.
    pydantic reads it as the ``PlainValidator`` and ``WithJsonSchema`` it stands for."""

    pattern: str
    what: str
    hint: str | None = None

    def check(self, value: Any) -> Any:
        if is_unknown(value):
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("input_type", f"{self.what} must be a string or a pulumi.Output, not {type(value).__name__}")
        if not re.match(self.pattern, value) and self.hint is not None:
            raise PydanticCustomError("resource_input", f"'{value}' is not {self.what} ({self.hint})")
        if not re.match(self.pattern, value):
            raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": self.pattern})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return PlainValidator(self.check).__get_pydantic_core_schema__(source, handler)

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return WithJsonSchema({"type": "string", "pattern": self.pattern}).__get_pydantic_json_schema__(schema, handler)


def _text_or_output(value: Any) -> Any:
    if is_unknown(value) or isinstance(value, str):
        return value
    raise PydanticCustomError("input_type", f"must be a string or a pulumi.Output, not {type(value).__name__}")


InputText = Annotated[Union[str, pulumi.Output[str]], PlainValidator(_text_or_output), WithJsonSchema({"type": "string"})]
"""A tag or label value: text, checked by the rules of its map, or an Output, passed on unchecked."""


def count_input(minimum: int) -> Any:
    """The field type of a node count a program may compute: an int of at least ``minimum``, or an
    Output, passed on unchecked (the rules that compare sizes skip it)."""

    def check(value: Any) -> Any:
        if is_unknown(value):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise PydanticCustomError("input_type", f"must be an integer or a pulumi.Output, not {type(value).__name__}")
        if value < minimum:
            raise PydanticCustomError("greater_than_equal", f"Input should be greater than or equal to {minimum}")
        return value

    return Annotated[Union[int, pulumi.Output[int]], PlainValidator(check), WithJsonSchema({"type": "integer", "minimum": minimum})]


NodeCount = count_input(0)
"""A node count (0 or more), or an Output."""
PositiveNodeCount = count_input(1)
"""A node count of at least 1, or an Output."""


def _labels_or_output(value: Any, handler: Any) -> Any:
    if is_unknown(value):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError(
            "input_type", f"labels must be a dict of label -> value or a pulumi.Output of one, not {type(value).__name__}")
    return handler(value)  # each value checked as InputText, with its key in the problem's path


InputLabels = Annotated[
    dict[str, InputText],
    WrapValidator(_labels_or_output),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "string"}}),
]
"""Node labels: a map checked key by key, or an Output of a whole map (another stack's, say), passed
on unchecked: EKS checks it when the node group is created."""


@dataclass(frozen=True)
class _MapOrOutput:
    """The check of a map a program may give whole as an Output: a dict checked key by key as
    ``dict[str, InputText]``, or an Output passed on unchecked. Only the dict is checked by pydantic;
    the Output in the annotation is for the package schema, which then offers the map as an Input."""

    what: str
    """What a key of the map is, for the refusal (``tag``)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def check(value: Any, checked: Any) -> Any:
            if is_unknown(value):
                return value
            if not isinstance(value, dict):
                raise PydanticCustomError(
                    "input_type", f"must be a dict of {self.what} -> value or a pulumi.Output of one, not {type(value).__name__}")
            return checked(value)  # each value checked as InputText, with its key in the problem's path

        return core_schema.no_info_wrap_validator_function(check, handler.generate_schema(dict[str, InputText]))


InputTags = Annotated[
    Union[dict[str, InputText], pulumi.Output[dict[str, str]]],
    _MapOrOutput("tag"),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "string"}}),
]
"""Tags: a map checked key by key, or an Output of a whole map (cost tags read from another stack),
passed on unchecked: AWS checks it when each resource is tagged."""
