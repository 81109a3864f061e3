"""Field docstrings made visible to ``help()`` and editors.

Args dataclasses document each field with a docstring under it, as the configuration models do;
Python keeps those strings only in the source. ``documented_args`` reads them back (with ``ast``)
and appends an ``Args:`` section to the class docstring, and ``documented_component`` appends the
same section to a component's docstring, so ``help(GpuNodeGroup)`` lists every argument with its
type, default and meaning.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any, Callable, TypeVar

T = TypeVar("T", bound=type)


def field_docstrings(cls: type) -> dict[str, str]:
    """The docstring under each annotated attribute of ``cls``'s own source, by attribute name."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (e.g. a class made at run time): nothing to read
        return {}
    body = ast.parse(source).body[0]
    docs: dict[str, str] = {}
    statements = getattr(body, "body", [])
    for statement, following in zip(statements, statements[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _type_text(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))


def args_section(args_cls: type) -> str:
    """A section listing each field of an Args dataclass (or a configuration model) with its type
    and docstring."""
    lines = [f"{args_cls.__name__} fields:"]
    model_fields = getattr(args_cls, "model_fields", None)
    if model_fields is not None:
        for name, info in model_fields.items():
            text = (info.description or "").replace("\n", " ")
            lines.append(f"    {name} ({_type_text(info.annotation)}): {text}")
        return "\n".join(lines)
    docs = field_docstrings(args_cls)
    for field in dataclasses.fields(args_cls):
        text = docs.get(field.name, "").replace("\n", " ")
        lines.append(f"    {field.name} ({_type_text(field.type)}): {text}")
    return "\n".join(lines)


def _append(doc: str | None, section: str) -> str:
    return f"{inspect.cleandoc(doc or '')}\n\n{section}\n"


def documented_args(cls: T) -> T:
    """Class decorator for an Args dataclass: its docstring gains the fields and their docstrings."""
    cls.__doc__ = _append(cls.__doc__, args_section(cls))
    return cls


def outputs_section(component_cls: type) -> str:
    """The component's documented attributes (its outputs for composition), with their docstrings."""
    docs = field_docstrings(component_cls)
    annotations = component_cls.__dict__.get("__annotations__", {})
    lines = [f"{component_cls.__name__} attributes:"]
    lines += [f"    {name} ({_type_text(annotations.get(name))}): {text.replace(chr(10), ' ')}" for name, text in docs.items()]
    return "\n".join(lines)


def documented_component(args_cls: type) -> Callable[[T], T]:
    """Class decorator for a component: its docstring gains the fields of ``args_cls`` and the
    component's own documented attributes, and ``__init__`` says what it takes (instead of showing
    ``ComponentResource``'s own parameters)."""

    def decorate(cls: T) -> T:
        sections = [args_section(args_cls)]
        if field_docstrings(cls):
            sections.append(outputs_section(cls))
        cls.__doc__ = _append(cls.__doc__, "\n\n".join(sections))
        init = cls.__dict__.get("__init__")
        if init is not None and init.__doc__ is None:
            init.__doc__ = (
                f"Register the component. ``name``: its Pulumi name (children are ``<name>-<role>``); "
                f"``args``: its ``{args_cls.__name__}`` (fields above); ``opts``: its resource options."
            )
        return cls

    return decorate
