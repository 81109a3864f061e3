"""Field docstrings made visible to ``help()`` and editors, and the calling convention components share.

Args dataclasses document each field with a docstring under it, as the configuration models do;
Python keeps those strings only in the source. ``documented_args`` reads them back (with ``ast``)
and appends an ``Args:`` section to the class docstring, and ``documented_component`` appends the
same section to a component's docstring, so ``help(GpuNodeGroup)`` lists every argument with its
type, default and meaning. Reading the source is slow next to the rest of an import (a render or a
``pulumi up`` never shows a docstring), so the longer docstring is built the first time it is read.

The calling convention is pulumi-eks's: ``Name(name, args=NameArgs(...), opts=...)`` or the same
fields as keywords. Each component's constructor says so itself, in its first lines::

    def __init__(self, name, args=None, opts=None, **fields):
        args = component_args(NameArgs, "Name", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"Name({name})")

``component_args`` builds the Args from either form, and ``with_cluster_provider`` (in components
that take a ``cluster``) puts the cluster's Kubernetes provider in ``opts``. A decorator that did
both behind the constructor's back would hide what a component does with its arguments; the
decorator here only documents, and leaves the constructor the class defines in place.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any, Callable, Optional, TypeVar

import pulumi

from .problems import ConfigError, Problem

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
    for statement, following in zip(statements, statements[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def type_text(annotation: Any, markdown: bool = False) -> str:
    """A configuration field's type as the reference (``docs/configuration.md``, ``markdown``) and
    ``help()`` show it: ``list of str``, ``str (optional)``, ``object`` for a nested model."""
    import types
    import typing

    from pydantic import BaseModel

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0], markdown)
    if origin in (typing.Union, types.UnionType):
        # A program may pass an Output where a value comes from another resource; a stack file holds text.
        names = [type_text(a, markdown) for a in args if a is not type(None) and (typing.get_origin(a) or a) is not pulumi.Output]
        return " | ".join(names) + (" (optional)" if type(None) in args else "")
    if origin is typing.Literal:
        return (" \\| " if markdown else " | ").join(f"`{a}`" if markdown else repr(a) for a in args)
    if origin in (list, typing.List):
        return f"list of {type_text(args[0], markdown)}"
    if origin in (dict, typing.Dict):
        return f"map of {type_text(args[1], markdown)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object" if markdown else annotation.__name__
    return getattr(annotation, "__name__", str(annotation))


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
            key = f"; stack key {info.alias}" if info.alias and info.alias != name else ""
            lines.append(f"    {name} ({type_text(info.annotation)}{key}): {text}")
        return "\n".join(lines)
    docs = field_docstrings(args_cls)
    for field in dataclasses.fields(args_cls):
        text = docs.get(field.name, "").replace("\n", " ")
        lines.append(f"    {field.name} ({_type_text(field.type)}): {text}")
    return "\n".join(lines)


def _append(doc: str | None, section: str) -> str:
    return f"{inspect.cleandoc(doc or '')}\n\n{section}\n"


class _LazyDoc:
    """A class's ``__doc__`` built on first read. ``cls.__doc__`` (what ``help()``, ``inspect.getdoc``
    and editors read) calls ``__get__`` of a descriptor in the class's own ``__dict__``, as an
    instance's attribute lookup does."""

    def __init__(self, build: Callable[[], str]):
        self._build: Optional[Callable[[], str]] = build
        self._text = ""

    def __get__(self, instance: Any, owner: Optional[type] = None) -> str:
        if self._build is not None:
            self._text, self._build = self._build(), None
        return self._text


def documented_args(cls: T) -> T:
    """Class decorator for an Args dataclass: its docstring gains the fields and their docstrings."""
    own = cls.__doc__
    cls.__doc__ = _LazyDoc(lambda: _append(own, args_section(cls)))  # type: ignore[assignment]  # a descriptor: the text is built when read
    return cls


def outputs_section(component_cls: type) -> str:
    """The component's documented attributes (its outputs for composition), with their docstrings."""
    docs = field_docstrings(component_cls)
    annotations = component_cls.__dict__.get("__annotations__", {})
    lines = [f"{component_cls.__name__} attributes:"]
    lines += [f"    {name} ({_type_text(annotations.get(name))}): {text.replace(chr(10), ' ')}" for name, text in docs.items()]
    return "\n".join(lines)


def _field_names(args_cls: type) -> tuple[list[str], list[str]]:
    """All field names of an Args dataclass or configuration model, and the required ones."""
    model_fields = getattr(args_cls, "model_fields", None)
    if model_fields is not None:
        return list(model_fields), [n for n, f in model_fields.items() if f.is_required()]
    fields = dataclasses.fields(args_cls)
    required = [
        f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return [f.name for f in fields], required


def component_args(args_cls: type, component: str, name: str, args: Any, fields: dict[str, Any]) -> Any:
    """The ``args_cls`` instance a component was called with: ``args`` as given, or built from the
    keyword ``fields``; giving both, unknown keywords or missing required ones are one ``ConfigError``
    naming ``<Component>(<name>).<field>``, raised before anything is registered."""
    path = f"{component}({name})"
    if args is not None and fields:
        raise ConfigError([Problem(path, f"give args= or the fields as keywords, not both (keywords: {', '.join(fields)})")])
    if args is not None:
        return args
    names, required = _field_names(args_cls)
    aliases = {f.alias: n for n, f in getattr(args_cls, "model_fields", {}).items() if f.alias}
    problems = [
        Problem(f"{path}.{key}", f"unknown argument; allowed: {', '.join(names)}")
        for key in fields
        if key not in names and key not in aliases
    ]
    given = {aliases.get(key, key) for key in fields}
    problems += [Problem(f"{path}.{key}", "is required") for key in required if key not in given]
    if problems:
        raise ConfigError(problems)
    if hasattr(args_cls, "model_fields"):
        return dict(fields)  # the component checks a dict into its model, with key paths
    return args_cls(**fields)


def _kubernetes_provider_in(opts: Any) -> Any:
    if opts is None:
        return None
    if getattr(opts.provider, "package", None) == "kubernetes":
        return opts.provider
    providers = opts.providers
    if isinstance(providers, dict):
        return providers.get("kubernetes")
    return next((p for p in providers or () if getattr(p, "package", None) == "kubernetes"), None)


def with_cluster_provider(opts: Any, cluster: Any, path: str) -> Any:
    """The one provider convention: a component given a cluster puts its Kubernetes objects on the
    cluster's provider, which its ``opts`` then carry for every child; one without takes the provider
    in ``opts``, like any Pulumi component. A different Kubernetes provider in ``opts`` beside a
    cluster, or an AWS provider for another region than the cluster's, is a ``ConfigError``, never
    silently ignored."""
    check_aws_provider = getattr(cluster, "check_aws_provider", None)
    if check_aws_provider is not None:
        check_aws_provider(opts, path)
    provider = getattr(cluster, "provider", None)
    if provider is None:
        return opts
    given = _kubernetes_provider_in(opts)
    if given is not None and given is not provider:
        raise ConfigError(
            [Problem(f"{path}.opts", "names a Kubernetes provider other than its cluster's; pass one of them, not both")]
        )
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers={"kubernetes": provider}))


def _signature(args_cls: type) -> inspect.Signature:
    """``(name, args=None, opts=None, *, <field>=<default>, ...)`` for ``help()`` and editors."""
    names, required = _field_names(args_cls)
    parameters = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        inspect.Parameter("args", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=Optional[args_cls]),
        inspect.Parameter("opts", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="Optional[pulumi.ResourceOptions]"),
    ]
    parameters += [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=inspect.Parameter.empty if n in required else _default(args_cls, n))
        for n in names
    ]
    return inspect.Signature(parameters)


def _default(args_cls: type, field_name: str) -> Any:
    """The default of an optional field, for display."""
    model_fields = getattr(args_cls, "model_fields", None)
    if model_fields is not None:
        return model_fields[field_name].get_default(call_default_factory=True)
    field = next(f for f in dataclasses.fields(args_cls) if f.name == field_name)
    factory = field.default_factory
    return factory() if field.default is dataclasses.MISSING and callable(factory) else field.default


def documented_component(args_cls: type) -> Callable[[T], T]:
    """Class decorator for a component: documentation only, the constructor stays the one the class
    defines. The class docstring gains the fields of ``args_cls`` and the component's own documented
    attributes; the constructor, which takes ``**fields`` and passes them to ``component_args``,
    gets ``__signature__`` ``(name, args=None, opts=None, *, <field>=<default>, ...)`` so that
    ``help()`` and editors list each field it takes as a keyword, and, when it has no docstring of
    its own, one saying so (rather than ``ComponentResource``'s, whose parameters it does not take).
    A constructor without ``**fields`` is a ``TypeError`` here: that signature would then be false."""

    def decorate(cls: T) -> T:
        own = cls.__doc__

        def doc() -> str:
            sections = [args_section(args_cls)]
            if field_docstrings(cls):
                sections.append(outputs_section(cls))
            return _append(own, "\n\n".join(sections))

        cls.__doc__ = _LazyDoc(doc)  # type: ignore[assignment]  # a descriptor: the text is built when read
        init = cls.__dict__["__init__"]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(init).parameters.values()):
            raise TypeError(f"{cls.__name__}.__init__ takes no **fields: call component_args({args_cls.__name__}, ...) with them")
        if init.__doc__ is None:
            init.__doc__ = (
                f"Register the component. ``name``: its Pulumi name (children are ``<name>-<role>``); "
                f"``args``: its ``{args_cls.__name__}`` (fields above), or the same fields as keywords; "
                "``opts``: its resource options."
            )
        init.__signature__ = _signature(args_cls)  # what inspect.signature reads
        return cls

    return decorate
