"""Reading a stack's configuration: plain data in, a checked ``GpuTrainingPlatformArgs`` or one
``ConfigError`` out."""

from __future__ import annotations

import json
from pathlib import Path
import typing
from typing import Any, Iterable, Mapping

import pulumi
import pydantic

from ..config import PROJECT, ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.arguments import problems_from_validation_error as config_problems
from ..config.chart_settings import plain_credential_problems
from ..config.inputs import InputText
from ..config.image_lock import with_image_lock
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


def _carries_text(annotation: Any, metadata: Iterable[Any] = ()) -> bool:
    """Whether a field of this type holds ``InputText`` (somewhere inside it): free text passed on to
    resources as it is (an environment value, a tag, a label), which may be an Output."""
    if annotation == InputText or typing.get_args(InputText)[1] in metadata:
        return True
    return any(_carries_text(argument) for argument in typing.get_args(annotation))


def _secret_texts(value: Any, annotation: Any) -> Any:
    """``value`` with every text a ``pulumi.Output`` may stand for made a secret Output; the very
    object when nothing in it is (a model copied with an update counts the key as set)."""
    if isinstance(value, pydantic.BaseModel):
        update = {}
        for field_name, info in type(value).model_fields.items():
            old = getattr(value, field_name)
            texts = _carries_text(info.annotation, info.metadata)
            if texts or isinstance(old, (pydantic.BaseModel, list, dict)):
                new = _secret_texts(old, InputText if texts and isinstance(old, str) else info.annotation)
                if new is not old:
                    update[field_name] = new
        return value.model_copy(update=update) if update else value
    if isinstance(value, list):
        items = [_secret_texts(item, annotation) for item in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
    if isinstance(value, dict):
        entries = {key: _secret_texts(item, annotation) for key, item in value.items()}
        return entries if any(entries[key] is not item for key, item in value.items()) else value
    if isinstance(value, str) and _carries_text(annotation):
        return pulumi.Output.secret(value)
    return value


def keep_secrets(args: GpuTrainingPlatformArgs, secret_keys: Iterable[str]) -> GpuTrainingPlatformArgs:
    """``args`` with the secretness of ``secret_keys`` (top-level keys, camelCase, set with
    ``pulumi config set --secret``) kept: every free text of theirs passed on to resources as it is
    (``InputText``: an environment value, a tag, a label) becomes a secret Output, so it reaches
    resource inputs, outputs and state encrypted. Pulumi marks a whole top-level key secret, even when
    ``--path`` names one leaf; the rest of it (names, numbers, choices, images, bucket names, ARNs)
    is read by the platform to shape resources and stays plain: a secret belongs in an ``env`` value
    or, better, a Secret the value names (``secretKeyRef``)."""
    fields = {info.alias or name: name for name, info in GpuTrainingPlatformArgs.model_fields.items()}
    update = {}
    for key in secret_keys:
        if key in fields:
            old = getattr(args, fields[key])
            new = _secret_texts(old, GpuTrainingPlatformArgs.model_fields[fields[key]].annotation)
            if new is not old:
                update[fields[key]] = new
    return args.model_copy(update=update) if update else args


def platform_args_from_settings(
    settings: Mapping[str, Any], project: str = PROJECT, secret_keys: Iterable[str] = ()
) -> GpuTrainingPlatformArgs:
    """Check a stack's settings (``<project>:cluster``, ..., ``aws:region``), as a stack file's
    ``config`` holds them or the Pulumi CLI hands them over (structured values as JSON). The values of
    ``secret_keys`` (full keys, ``<project>:<key>``) stay secret (``keep_secrets``)."""
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
    plain = plain_credential_problems(raw.get("charts"), f"{prefix}charts" in secret_keys)
    if plain:
        raise ConfigError(plain)
    args = parse_platform_args({**raw, "region": region})
    return keep_secrets(args, [key[len(prefix):] for key in secret_keys if key.startswith(prefix)])


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


def load_stack_config(project: str | None = None, stack_dir: Path | None = None) -> GpuTrainingPlatformArgs:
    """Read the current stack's configuration (the keys of one project namespace plus
    ``aws:region``) and check it. ``project`` names the namespace; by default the running program's
    own (``pulumi.get_project()``) when the stack sets keys in it, else ``eks-gpu-training``.
    ``stack_dir``: the folder of the stack files, whose ``images.lock`` the stack's images are
    deployed by (default: none read)."""
    import pulumi.runtime.config as runtime_config

    settings = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = {key for key in settings if runtime_config.is_config_secret(key)} | set(runtime_config.get_config_secret_keys_env())
    namespace = config_namespace(settings, project)
    settings = with_image_lock(settings, namespace, stack_dir)
    return platform_args_from_settings(settings, namespace, secret_keys)
