"""``PackageAnalyzer``: Pulumi's component analyzer (``pulumi.provider.experimental``) taught the
shapes this library's arguments have, so the package schema comes from the Args classes themselves.

The SDK's analyzer reads ``inspect.get_annotations`` of TypedDicts and plain classes. Ours are
dataclasses and pydantic configuration models in modules with postponed annotations (strings), so
this subclass resolves each annotation in its module, reads a pydantic model's fields under their
stack keys (``instanceTypes``) with their descriptions, turns a ``Literal`` into a string whose
description lists the values, and keeps ``Input`` where ``Optional[Input[T]]`` flattened it. A
field in ``python_only`` is left out of the schema, with the reason the docs give; a component's
outputs are its ``pulumi.Output`` attributes (the others are Python objects for composition)."""

import dataclasses
import inspect
import re
import sys
import typing
from collections.abc import Awaitable, Mapping
from enum import Enum
from typing import Any, Literal, Optional, Union

import pulumi
from pulumi.provider.experimental.analyzer import Analyzer, ComponentDefinition, PropertyDefinition
from pydantic import BaseModel

_NONE = type(None)
_PYTHON_ONLY_NOTE = re.compile(r"\(The [^()]* forms? (is|are) Python-only\.\)")


def resolved(annotation: Any, module: str) -> Any:
    """An annotation as its type: a postponed (string) one evaluated in its module's namespace, with
    ``Output``/``Input`` known even where the module imports them only for type checkers."""
    if not isinstance(annotation, str):
        return annotation
    namespace = {"Output": pulumi.Output, "Input": pulumi.Input, "pulumi": pulumi, **vars(sys.modules[module])}
    return eval(annotation, namespace)  # noqa: S307 - the library's own annotation text


def _is_model(typ: Any) -> bool:
    return isinstance(typ, type) and issubclass(typ, BaseModel)


def _is_input_like(member: Any) -> bool:
    """A member ``pulumi.Input`` adds to a value's type: an Awaitable or an Output of it."""
    return (typing.get_origin(member) in (Awaitable, pulumi.Output) or member is pulumi.Output
            or (isinstance(member, typing.ForwardRef) and member.__forward_arg__.startswith("Output")))


def _is_input_union(members: tuple[Any, ...]) -> bool:
    return any(_is_input_like(m) for m in members)


def _value_form(members: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """The one form of a union the schema offers, and the forms left to Python. An ``Input[T]``
    (``T | Awaitable[T] | Output[T]``) is ``T``, taken as an Input; otherwise a plain value
    (``str | GpuNodeOs``: the string), a value-or-Output, or else the first class."""
    values = [m for m in members if not _is_input_like(m)]
    if len(values) == 1:
        return values[0], []

    def rank(member: Any) -> int:
        inner = typing.get_args(member)[0] if typing.get_origin(member) is typing.Annotated else member
        if inner in (str, int, float, bool):
            return 0
        return 1 if typing.get_origin(inner) is Union else 2

    chosen = min(values, key=rank)
    # An enum of strings beside ``str`` is the same values: nothing is left to Python.
    return chosen, [m for m in values if m is not chosen and not (chosen is str and isinstance(m, type) and issubclass(m, Enum))]


class PackageAnalyzer(Analyzer):
    """The SDK's analyzer over dataclass Args and pydantic models; ``python_only`` maps
    ``(class name, field name)`` to why that field stays out of the schema, ``field_types`` to the
    type the schema gives a field instead of its Python one."""

    def __init__(self, name: str, python_only: Mapping[tuple[str, str], str], field_types: Mapping[tuple[str, str], Any]):
        super().__init__(name)
        self.python_only = python_only
        self.field_types = field_types

    def analyze_component(self, component: type[pulumi.ComponentResource]) -> ComponentDefinition:
        args = resolved(inspect.get_annotations(component.__init__)["args"], component.__module__)
        args = next(a for a in typing.get_args(args) if a is not _NONE) if typing.get_origin(args) is Union else args
        inputs, inputs_mapping = self.analyze_type(args, is_component_output=False)
        outputs, outputs_mapping = self.analyze_type(component, is_component_output=True)
        return ComponentDefinition(
            name=component.__name__,
            description=self._own_doc(component, args),
            inputs=inputs,
            inputs_mapping=inputs_mapping,
            outputs=outputs,
            outputs_mapping=outputs_mapping,
            module=component.__module__,
        )

    @staticmethod
    def _own_doc(cls: type, args: type) -> Optional[str]:
        """The class's docstring without the fields section ``documented_component`` appends."""
        return inspect.cleandoc(str(cls.__doc__ or "")).split(f"\n\n{args.__name__} fields:")[0] or None

    def _fields(self, typ: type, is_component_output: bool) -> list[tuple[str, str, Any, bool]]:
        """(schema name, Python name, annotation, optional) of each field the schema offers."""
        if is_component_output:
            annotations = {k: resolved(v, typ.__module__) for k, v in typ.__dict__.get("__annotations__", {}).items()}
            return [(self._camel(k), k, v, False) for k, v in annotations.items() if typing.get_origin(v) is pulumi.Output]
        if _is_model(typ):
            return [
                (info.alias or self._camel(name), name, info.annotation, not info.is_required())
                for name, info in typ.model_fields.items()  # type: ignore[attr-defined]
                if (typ.__name__, name) not in self.python_only
            ]
        if dataclasses.is_dataclass(typ):
            return [
                (
                    self._camel(field.name), field.name,
                    self.field_types.get((typ.__name__, field.name), resolved(field.type, typ.__module__)),
                    field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING,
                )
                for field in dataclasses.fields(typ)
                if (typ.__name__, field.name) not in self.python_only
            ]
        raise TypeError(f"{typ.__name__}: neither a dataclass nor a configuration model")

    @staticmethod
    def _camel(name: str) -> str:
        first, *rest = name.split("_")
        return first + "".join(word[:1].upper() + word[1:] for word in rest)

    def analyze_type(self, typ: type, *, is_component_output: bool) -> tuple[dict[str, PropertyDefinition], dict[str, str]]:
        properties: dict[str, PropertyDefinition] = {}
        mapping: dict[str, str] = {}
        for schema_name, py_name, annotation, optional in self._fields(typ, is_component_output):
            prop = self.analyze_property(
                annotation, typ, py_name, can_be_plain=not is_component_output,
                is_component_output=is_component_output, optional=optional,
            )
            for inner in (prop.items, prop.additional_properties):
                # A list's or map's items are described by their field, where a note must show.
                note = _PYTHON_ONLY_NOTE.search(inner.description or "") if inner is not None else None
                if note and note.group(0) not in (prop.description or ""):
                    prop.description = f"{prop.description or ''} {note.group(0)}".strip()
            if (typ.__name__, py_name) in self.field_types:
                form = getattr(typing.get_args(annotation)[0] if typing.get_args(annotation) else annotation, "__name__", "")
                prop.description = f"{prop.description or ''} (Outside Python: {form}.)".strip()
            properties[schema_name] = prop
            mapping[schema_name] = py_name
        return properties, mapping

    def analyze_property(self, arg: Any, typ: type, name: str, *, can_be_plain: bool, is_component_output: bool,
                         optional: Optional[bool] = None) -> PropertyDefinition:
        if isinstance(arg, typing.ForwardRef):
            arg = resolved(arg.__forward_arg__, typ.__module__)
        origin, members = typing.get_origin(arg), typing.get_args(arg)
        if origin is typing.Annotated:
            arg, origin, members = members[0], typing.get_origin(members[0]), typing.get_args(members[0])
        if origin is tuple and members:
            # A tuple of one item type (``tuple[str, ...]``, a pair ``tuple[str, str]``) is a list.
            (item,) = {m for m in members if m is not Ellipsis}
            arg, origin, members = list[item], list, (item,)  # type: ignore[valid-type]
        if origin is Literal:
            values = ", ".join(repr(v) for v in members)
            prop = super().analyze_property(type(members[0]), typ, name, can_be_plain=can_be_plain,
                                            is_component_output=is_component_output, optional=optional)
            prop.description = f"{prop.description or ''} One of: {values}.".strip()
            return prop
        if origin is Union:
            optional = optional or _NONE in members
            members = tuple(m for m in members if m is not _NONE)
            chosen, dropped = _value_form(members)
            prop = self.analyze_property(chosen, typ, name, can_be_plain=can_be_plain and not _is_input_union(members),
                                         is_component_output=is_component_output, optional=optional)
            if dropped:
                forms = ", ".join(getattr(m, "__name__", str(m)) for m in dropped)
                prop.description = f"{prop.description or ''} (The {forms} form is Python-only.)".strip()
            return prop
        if isinstance(arg, type) and _is_model(arg):
            return self._model_property(arg, typ, name, can_be_plain, is_component_output, optional)
        return super().analyze_property(arg, typ, name, can_be_plain=can_be_plain,
                                        is_component_output=is_component_output, optional=optional)

    def _model_property(self, arg: type, typ: type, name: str, can_be_plain: bool, is_component_output: bool,
                        optional: Optional[bool]) -> PropertyDefinition:
        prop = super().analyze_property(arg, typ, name, can_be_plain=can_be_plain,
                                        is_component_output=is_component_output, optional=optional)
        type_def = self.type_definitions[arg.__name__]
        type_def.description = inspect.cleandoc(arg.__dict__.get("__doc__") or "") or None
        return prop

    def get_docstring(self, typ: type, name: str) -> Optional[str]:
        if _is_model(typ):
            info = typ.model_fields.get(name)  # type: ignore[attr-defined]
            return inspect.cleandoc(info.description) if info is not None and info.description else None
        text = super().get_docstring(typ, name)
        return inspect.cleandoc(text) if text else None
