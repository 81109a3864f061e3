"""The configuration schema's own refusals, read from the pydantic models: required keys, allowed
values, bounds, patterns and validators, each under its key path. Pydantic makes them; the
package's ``problems_from_validation_error`` only words them, so ``refusals`` skips it and the
"Refused by" table of ``docs/configuration.md`` takes these rows instead."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
import typing
from typing import Any, Callable, Iterator

from pydantic import AfterValidator, BaseModel, BeforeValidator, PlainValidator, WrapValidator
from pydantic.fields import FieldInfo

from ..config import GpuTrainingPlatformArgs
from ..config.inputs import ResourceInput
from .refusals import Refusal, message_text

VALIDATORS = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)

BOUNDS = {
    "Ge": ("ge", "at least {}"),
    "Gt": ("gt", "more than {}"),
    "Le": ("le", "at most {}"),
    "Lt": ("lt", "less than {}"),
    "MinLen": ("min_length", "at least {} long"),
    "MaxLen": ("max_length", "at most {} long"),
}
"""Each bound pydantic keeps in a field's metadata (``annotated_types`` classes, by name), with its
attribute and how a reader says it."""


def _module(obj: Any) -> str:
    """``config/pools.py`` for an object of ``eks_gpu_training.config.pools``."""
    return obj.__module__.split(".", 1)[1].replace(".", "/") + ".py"


def validator_messages(func: Callable[..., Any]) -> list[str]:
    """What a validator says when it refuses: the message of each error it raises, or builds with a
    helper of its module, or else that the helpers it calls raise; placeholders as ``…``, the text
    of the values a factory closed over (``resource_input(pattern, what, hint)``) written in."""
    # A check that is a method (``ResourceInput.check``) reads its values from its instance.
    owner = getattr(func, "__self__", None)
    if isinstance(owner, type):  # a classmethod validator: nothing of its class is a value it shows
        owner = None
    func = inspect.unwrap(getattr(func, "__func__", func))
    closed_over = {k: v for k, v in inspect.getclosurevars(func).nonlocals.items() if isinstance(v, str)}
    if owner is not None:
        closed_over |= {f"self.{k}": v for k, v in vars(owner).items() if isinstance(v, str)}
    return _raised_messages(func, 0, closed_over) or [(func.__doc__ or "see its source").strip().splitlines()[0]]


def _function_node(func: Callable[..., Any]) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    except (OSError, TypeError, SyntaxError):
        return None


def _raised_messages(func: Callable[..., Any], depth: int, constants: dict[str, str]) -> list[str]:
    node = _function_node(func)
    if node is None or depth > 2:
        return []
    module = inspect.getmodule(func)
    closed_over = inspect.getclosurevars(func).nonlocals

    def function_named(name: str) -> Any:
        return closed_over.get(name, getattr(module, name, None))

    body = [n for statement in node.body for n in ast.walk(statement)]  # type: ignore[attr-defined]  # a validator's source parses to a def node
    messages: list[str] = []
    raising: set[ast.AST] = set()
    for raised in body:
        call = raised.exc if isinstance(raised, ast.Raise) else raised.value if isinstance(raised, ast.Return) and depth else None
        if not isinstance(call, ast.Call) or not call.args:
            continue
        raising.add(call)
        name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
        helper = function_named(name)
        if name == "PydanticCustomError" and len(call.args) > 1:
            messages += _returned(call.args[1], node, function_named) or [message_text(_with_constants(call.args[1], constants), node)]
        elif name[:1].isupper():  # ValueError(...) and the like
            messages.append(message_text(_with_constants(call.args[0], constants), node))
        elif callable(helper):  # ``raise _enum_error(value, allowed, "an EC2 instance type", ...)``
            messages += _raised_messages(helper, depth + 1, _constant_arguments(helper, call))
    for handed in body:
        if not isinstance(handed, ast.Call) or not isinstance(handed.func, ast.Name) or handed in raising:
            continue
        helper = function_named(handed.func.id)
        if inspect.isfunction(helper) and helper is not func:  # a check the validator hands the value to
            messages += _raised_messages(helper, depth + 1, {})
    return list(dict.fromkeys(messages))


def _returned(message: ast.expr, node: ast.AST, function_named: Callable[[str], Any]) -> list[str]:
    """The texts a message variable holds when a helper returned it (``problem = image_reference_problem(value)``)."""
    if not isinstance(message, ast.Name):
        return []
    for assign in ast.walk(node):
        if (
            isinstance(assign, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == message.id for t in assign.targets)
            and isinstance(assign.value, ast.Call)
            and isinstance(assign.value.func, ast.Name)
        ):
            helper = _function_node(function_named(assign.value.func.id)) if callable(function_named(assign.value.func.id)) else None
            returns = [r.value for r in ast.walk(helper) if isinstance(r, ast.Return) and r.value is not None] if helper else []
            return [message_text(r, helper) for r in returns if isinstance(r, ast.JoinedStr) or (isinstance(r, ast.Constant) and isinstance(r.value, str))]
    return []


def _constant_arguments(helper: Callable[..., Any], call: ast.Call) -> dict[str, str]:
    names = list(inspect.signature(helper).parameters)
    return {n: a.value for n, a in zip(names, call.args, strict=False) if isinstance(a, ast.Constant) and isinstance(a.value, str)}


def _with_constants(expr: ast.expr, constants: dict[str, str]) -> ast.expr:
    """``expr`` with the helper's parameters the call gave as text written in."""
    if not isinstance(expr, ast.JoinedStr) or not constants:
        return expr
    values = [ast.Constant(constants[name]) if (name := _named(v)) in constants else v for v in expr.values]
    return ast.JoinedStr(values=values)


def _named(value: ast.expr) -> str | None:
    """The name an f-string's placeholder shows: ``what`` for ``{what}``, ``self.what`` for ``{self.what}``."""
    if not isinstance(value, ast.FormattedValue):
        return None
    if isinstance(value.value, ast.Name):
        return value.value.id
    if isinstance(value.value, ast.Attribute) and isinstance(value.value.value, ast.Name):
        return f"{value.value.value.id}.{value.value.attr}"
    return None


def _validator_name(func: Callable[..., Any]) -> str:
    """A validator's name; one a factory made (``count_input.<locals>.check``) by its factory's, a
    method (``ResourceInput.check``) by its class's."""
    owner = getattr(func, "__self__", None)
    if owner is not None and not isinstance(owner, type):
        return type(owner).__name__
    func = inspect.unwrap(getattr(func, "__func__", func))
    return func.__qualname__.split(".<locals>")[0].rsplit(".", 1)[-1]


def _metadata(annotation: Any) -> Iterator[tuple[str, Any]]:
    """Each ``(suffix, constraint)`` inside an annotation: ``""`` for the value itself, ``[*]`` for
    a list's items, ``.<key>`` for a map's values."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        for item in annotation.__metadata__:
            yield "", item
        yield from _metadata(args[0])
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _metadata(arg)
    elif origin in (list, typing.List):
        yield from (("[*]" + suffix, item) for suffix, item in _metadata(args[0]))
    elif origin in (dict, typing.Dict):
        yield from ((".<key>" + suffix, item) for suffix, item in _metadata(args[1]))
    elif origin is typing.Literal:
        yield "", args


def _nested(annotation: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models inside an annotation, with the suffix their keys go under."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, typing.List):
        yield from (("[*]" + s, m) for s, m in _nested(args[0]))
    elif origin in (dict, typing.Dict):
        yield from ((".<key>" + s, m) for s, m in _nested(args[1]))
    else:
        for arg in args:
            yield from _nested(arg)


def _field_rows(model: type[BaseModel], name: str, key: str) -> Iterator[Refusal]:
    field = model.model_fields[name]
    rules, validators = _metadata_rules(field)
    for decorator in model.__pydantic_decorators__.field_validators.values():
        if name in decorator.info.fields:
            validators.append(("", decorator.func))
    for suffix, parts in rules.items():
        yield Refusal((key + suffix,), "`schema`: " + "; ".join(dict.fromkeys(parts)), _module(model))
    for suffix, func in dict.fromkeys(validators):
        for message in validator_messages(func):
            yield Refusal((key + suffix,), f"`{_validator_name(func)}`: {message}", _module(inspect.unwrap(getattr(func, "__func__", func))))


def _metadata_rules(field: FieldInfo) -> tuple[dict[str, list[str]], list[tuple[str, Callable[..., Any]]]]:
    """What a field's constraints (its own and its annotation's, by key suffix) refuse: the rules the
    schema states (is required, allowed values, bounds, patterns) and the validators whose messages say the rest."""
    rules: dict[str, list[str]] = {"": ["is required"]} if field.is_required() else {}
    validators: list[tuple[str, Callable[..., Any]]] = []
    for suffix, item in [*(("", m) for m in field.metadata), *_metadata(field.annotation)]:
        if isinstance(item, tuple):
            rules.setdefault(suffix, []).append("one of " + ", ".join(f"`{v}`" for v in item))
        elif type(item).__name__ in BOUNDS:
            attribute, wording = BOUNDS[type(item).__name__]
            rules.setdefault(suffix, []).append(wording.format(getattr(item, attribute)))
        elif isinstance(item, ResourceInput):
            validators.append((suffix, item.check))
        elif getattr(item, "pattern", None):
            rules.setdefault(suffix, []).append(f"matches `{item.pattern}`")
        elif isinstance(item, VALIDATORS):
            validators.append((suffix, item.func))
    return rules, validators


def schema_refusals(model: type[BaseModel] = GpuTrainingPlatformArgs, prefix: str = "") -> list[Refusal]:
    """Every refusal of the configuration schema under ``model``, by stack key path."""
    rows: list[Refusal] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        rows.extend(_field_rows(model, name, key))
        for suffix, nested in dict.fromkeys(_nested(field.annotation)):
            rows.extend(schema_refusals(nested, f"{key}{suffix}."))
    return rows
