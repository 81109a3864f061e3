"""Components' arguments given as plain data: a dict where a configuration model is expected is
checked into the model, and pydantic's errors become one ``ConfigError`` with camelCase key paths."""

from __future__ import annotations

import collections.abc
import dataclasses
import sys
import typing
from typing import Any, Optional, TypeVar

import pulumi
import pydantic
from pydantic import BaseModel

from .problems import ConfigError, Problem

ModelT = TypeVar("ModelT", bound=BaseModel)

OUTPUT_REFUSED = (
    "is an Output, known only at deployment, but this key is read before anything is created (its rules, "
    "and the names and settings made from it); give its value"
)
"""Why a key that takes no Output refuses one (keys that take one say so in their description)."""


def _key_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class under ``root`` that holds the key at ``loc`` (for listing the keys it allows)."""
    model: Any = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        annotation = fields[part].annotation
        candidates = [annotation, *typing.get_args(annotation)]
        candidates += [a for c in list(candidates) for a in typing.get_args(c)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def problems_from_validation_error(error: pydantic.ValidationError, root: type[BaseModel], prefix: str = "") -> list[Problem]:
    """Pydantic's errors as problems, with camelCase key paths (under ``prefix``) and what each key allows."""
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = ".".join(p for p in (prefix, _key_path(loc)) if p).replace(".[", "[") or "(stack configuration)"
        if item["type"] == "extra_forbidden":
            model = _model_at(root, loc)
            allowed = ", ".join(f.alias or n for n, f in model.model_fields.items()) if model else "see docs/configuration.md"
            problems.append(Problem(path, f"unknown key; allowed: {allowed}"))
        elif item["type"] == "missing":
            problems.append(Problem(path, "is required"))
        elif isinstance(item.get("input"), pulumi.Output):
            problems.append(Problem(path, OUTPUT_REFUSED))
        elif item["type"] in ("string_pattern_mismatch",):
            problems.append(Problem(path, f"{item['input']!r} does not match {item['ctx']['pattern']}"))
        else:
            problems.append(Problem(path, item["msg"]))
    return problems


def as_model(value: Any, model: type[ModelT], path: str) -> ModelT:
    """``value`` as a ``model`` instance: the instance itself, or a dict of its keys (camelCase or
    snake_case) checked into one; anything else, or a dict with bad keys, raises one ``ConfigError``
    whose problems name the key path under ``path``."""
    if isinstance(value, model):
        return value
    if isinstance(value, dict):
        try:
            return model.model_validate(value)
        except pydantic.ValidationError as error:
            raise ConfigError(problems_from_validation_error(error, model, path)) from None
    if isinstance(value, pulumi.Output):
        raise ConfigError([Problem(path, f"is an Output, known only at deployment, but its keys are checked and used before "
                                         f"anything is created; give a {model.__name__} (or a dict of its keys)")])
    raise ConfigError([Problem(path, f"expected a {model.__name__} (or a dict of its keys), got {type(value).__name__}")])


def check_model_fields(args: Any, problems: Optional[list[Problem]] = None) -> None:
    """Turn every field of the dataclass ``args`` that is declared as a configuration model (or a list
    of them) into that model, so a component given a dict gets its keys checked; every problem of
    every field is raised together in one ``ConfigError`` naming ``<ArgsClass>.<field>.<key>``. A
    component's Args call this in ``__post_init__``, passing the ``problems`` their own checks found
    so that all are raised together."""
    namespace = vars(sys.modules[type(args).__module__])
    problems = list(problems or [])

    def checked(value: Any, model: type[BaseModel], path: str) -> Any:
        try:
            return as_model(value, model, path)
        except ConfigError as error:
            problems.extend(error.problems)
            return value

    for field in dataclasses.fields(args):
        annotation = field.type
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - the dataclass's own annotation
            except NameError:  # a name imported only for type checkers names no configuration model
                continue
        value = getattr(args, field.name)
        path = f"{type(args).__name__}.{field.name}"
        if isinstance(value, pulumi.Output) and typing.get_origin(annotation) in (dict, collections.abc.Mapping):
            # Tags are merged with the component's own, digests looked up by image: the keys are needed now.
            problems.append(Problem(path, "is an Output of a whole map, but the component reads its keys before anything "
                                          "is created (merging them with its own, or looking values up by them); give a dict"))
            continue
        members = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else ()
        union_models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            object.__setattr__(args, field.name, checked(value, annotation, path))
        elif len(union_models) == 1 and isinstance(value, dict):
            # e.g. a network given as a ref or as its configuration: a dict can only be the configuration.
            object.__setattr__(args, field.name, checked(value, union_models[0], path))
        elif typing.get_origin(annotation) in (list, collections.abc.Sequence):
            (item,) = typing.get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel) and isinstance(value, (list, tuple)):
                models = [checked(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
                object.__setattr__(args, field.name, models if isinstance(value, list) else tuple(models))
    if problems:
        raise ConfigError(problems)
