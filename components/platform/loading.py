"""Reading a stack's configuration: plain data in, a checked ``GpuTrainingPlatformArgs`` or one
``ConfigError`` out."""

from __future__ import annotations

import json
from typing import Any, Mapping

import pydantic
from pydantic import BaseModel

from ..config import PROJECT, ConfigError, GpuTrainingPlatformArgs, Problem
from .validation import validate_stack


def _key_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the key at ``loc`` (for listing the keys it allows)."""
    model: Any = GpuTrainingPlatformArgs
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        if part not in fields:
            return None
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def problems_from_validation_error(error: pydantic.ValidationError) -> list[Problem]:
    """Pydantic's errors as problems, with camelCase key paths and what each key allows."""
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _key_path(loc) or "(stack configuration)"
        if item["type"] == "extra_forbidden":
            model = _model_at(loc)
            allowed = ", ".join(f.alias or n for n, f in model.model_fields.items()) if model else "see README"
            problems.append(Problem(path, f"unknown key; allowed: {allowed}"))
        elif item["type"] == "missing":
            problems.append(Problem(path, "is required"))
        elif item["type"] in ("string_pattern_mismatch",):
            problems.append(Problem(path, f"{item['input']!r} does not match {item['ctx']['pattern']}"))
        else:
            problems.append(Problem(path, item["msg"]))
    return problems


def parse_platform_args(raw: dict[str, Any]) -> GpuTrainingPlatformArgs:
    """Build and check the typed arguments from plain data (camelCase keys); raise ``ConfigError``."""
    try:
        args = GpuTrainingPlatformArgs.model_validate(raw)
    except pydantic.ValidationError as error:
        raise ConfigError(problems_from_validation_error(error)) from None
    problems = validate_stack(args)
    if problems:
        raise ConfigError(problems)
    return args


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def platform_args_from_settings(settings: Mapping[str, Any]) -> GpuTrainingPlatformArgs:
    """Check a stack's settings (``eks-gpu-training:cluster``, ..., ``aws:region``), as a stack
    file's ``config`` holds them or the Pulumi CLI hands them over (structured values as JSON)."""
    prefix = f"{PROJECT}:"
    raw: dict[str, Any] = {
        key[len(prefix):]: _decode(value) if isinstance(value, str) else value
        for key, value in settings.items()
        if key.startswith(prefix)
    }
    if "region" in raw:
        raise ConfigError([Problem(f"{PROJECT}:region", "set the region with aws:region, not in the project namespace")])
    region = settings.get("aws:region")
    if region is None:
        raise ConfigError([Problem("aws:region", "is required (e.g. us-west-2)")])
    return parse_platform_args({**raw, "region": region})


def load_stack_config() -> GpuTrainingPlatformArgs:
    """Read the current stack's configuration (project keys plus ``aws:region``) and check it."""
    import pulumi.runtime.config as runtime_config

    return platform_args_from_settings({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})
