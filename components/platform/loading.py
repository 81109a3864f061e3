"""Reading a stack's configuration: plain data in, a checked ``GpuTrainingPlatformArgs`` or one
``ConfigError`` out."""

from __future__ import annotations

import json
from typing import Any, Mapping

import pydantic

from ..config import PROJECT, ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import problems_from_validation_error as config_problems
from .validation import validate_stack


def problems_from_validation_error(error: pydantic.ValidationError) -> list[Problem]:
    """Pydantic's errors of ``GpuTrainingPlatformArgs`` as problems, with camelCase key paths and
    what each key allows."""
    return config_problems(error, GpuTrainingPlatformArgs)


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


def platform_args_from_settings(settings: Mapping[str, Any], project: str = PROJECT) -> GpuTrainingPlatformArgs:
    """Check a stack's settings (``<project>:cluster``, ..., ``aws:region``), as a stack file's
    ``config`` holds them or the Pulumi CLI hands them over (structured values as JSON)."""
    prefix = f"{project}:"
    raw: dict[str, Any] = {
        key[len(prefix):]: _decode(value) if isinstance(value, str) else value
        for key, value in settings.items()
        if key.startswith(prefix)
    }
    if "region" in raw:
        raise ConfigError([Problem(f"{project}:region", "set the region with aws:region, not in the project namespace")])
    region = settings.get("aws:region")
    if region is None:
        raise ConfigError([Problem("aws:region", "is required (e.g. us-west-2)")])
    return parse_platform_args({**raw, "region": region})


def config_namespace(settings: Mapping[str, Any], project: str | None) -> str:
    """The namespace ``load_stack_config`` reads: ``project`` when given, else the running program's
    project when the stack sets keys there (a program named ``acme`` keeps its settings under
    ``acme:``), else this library's own ``eks-gpu-training``."""
    if project is not None:
        return project
    import pulumi

    current = pulumi.get_project()
    if current and any(key.startswith(f"{current}:") for key in settings):
        return current
    return PROJECT


def load_stack_config(project: str | None = None) -> GpuTrainingPlatformArgs:
    """Read the current stack's configuration (the keys of one project namespace plus
    ``aws:region``) and check it. ``project`` names the namespace; by default the running program's
    own (``pulumi.get_project()``) when the stack sets keys in it, else ``eks-gpu-training``."""
    import pulumi.runtime.config as runtime_config

    settings = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return platform_args_from_settings(settings, config_namespace(settings, project))
