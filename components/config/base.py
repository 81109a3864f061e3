"""Shared pieces of the configuration model: constants, problems, the base model, AWS enum checks."""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import sys
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Union

import pulumi
import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from ..facts.gpu_nodes import GPU_NODE_ROLE_LABEL, SYSTEM_NODE_ROLE_LABEL
from ..facts.quantity import QUANTITY_PATTERN

PROJECT = "eks-gpu-training"
"""The Pulumi project name; stack configuration keys live in this namespace."""

NVIDIA_AMI_TYPES = ("AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA_FIPS")
"""x86_64 EKS AMI types that ship the NVIDIA driver (the GPU catalog lists x86_64 types only)."""

END_OF_LIFE_AMI_TYPES = {
    "AL2_x86_64_GPU": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; "
    "use AL2023_x86_64_NVIDIA (driver, container toolkit, fabric manager and EFA included)",
    "AL2_x86_64": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; use AL2023_x86_64_STANDARD",
    "AL2_ARM_64": "Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26; use AL2023_ARM_64_STANDARD",
}
"""AMI types EKS still accepts but this library refuses, with the reason."""

SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36")
"""EKS Kubernetes versions in standard or extended support on the EKS release calendar
(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html) that this library is tested for."""


class ConfigError(ValueError):
    """Invalid stack configuration: every problem, each with its key path."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        super().__init__(f"invalid configuration ({count}), rejected before registering any resource:\n{lines}")


@dataclass(frozen=True)
class Problem:
    """One configuration problem: where (key path) and what is wrong or allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


def _enum_error(value: str, allowed: frozenset[str], what: str, source: str) -> PydanticCustomError:
    hint = aws_enums.suggestion(value, allowed)
    return PydanticCustomError("aws_enum", f"'{value}' is not {what} ({source}){hint}")


def supported_version(allowed: tuple[str, ...]) -> AfterValidator:
    """A validator that accepts only the versions this library is tested with."""

    def check(value: str) -> str:
        if value not in allowed:
            raise PydanticCustomError("version", f"'{value}' is not supported; allowed: {', '.join(allowed)}")
        return value

    return AfterValidator(check)


def _check_instance_type(value: str) -> str:
    if value not in aws_enums.ec2_instance_types():
        raise _enum_error(value, aws_enums.ec2_instance_types(), "an EC2 instance type", "botocore ec2 InstanceType")
    return value


def _check_ami_type(value: str) -> str:
    if value not in aws_enums.eks_ami_types():
        raise _enum_error(value, aws_enums.eks_ami_types(), "an EKS AMI type", "botocore eks AMITypes")
    if value in END_OF_LIFE_AMI_TYPES:
        raise PydanticCustomError("end_of_life", f"'{value}' is refused: {END_OF_LIFE_AMI_TYPES[value]}")
    return value


InstanceType = Annotated[str, AfterValidator(_check_instance_type)]
"""An EC2 instance type name, checked against botocore."""
AmiType = Annotated[str, AfterValidator(_check_ami_type)]
"""An EKS AMI type, checked against botocore; end-of-life types refused."""

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_AZ = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d[a-z]$"

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN)]
"""A Kubernetes resource quantity such as ``400``, ``500m``, ``4Ti``, ``1.5Gi``."""

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


ProblemSink = Callable[[str, str], None]
"""Records one problem: the key under the pool's path, and the message."""


def _collector(path: str) -> tuple[list[Problem], ProblemSink]:
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(f"{path}.{key}", message))

    return problems, problem


def is_unknown(value: Any) -> bool:
    """Whether a configuration value is a ``pulumi.Output`` (known only once its resource exists):
    such values are passed on to AWS as they are, and rules that compare values skip them."""
    return isinstance(value, pulumi.Output)


def shown(value: Any) -> str:
    """A configuration value as a problem message quotes it; an Output has no text before deployment."""
    return "an Output (known after deployment)" if is_unknown(value) else f"'{value}'"


def resource_input(pattern: str, what: str, hint: str | None = None) -> Any:
    """The field type of a value another resource can supply (a VPC or subnet ID, an ARN, an image):
    a string matching ``pattern``, checked as any other key, or a ``pulumi.Output``, accepted as it is
    because its value is unknown until that resource exists. Stack files can only hold strings. A
    mismatch reports the pattern, or ``'<value>' is not <what> (<hint>)`` when ``hint`` is given."""
    compiled = re.compile(pattern)

    def check(value: Any) -> Any:
        if is_unknown(value):
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("input_type", f"{what} must be a string or a pulumi.Output, not {type(value).__name__}")
        if not compiled.match(value) and hint is not None:
            raise PydanticCustomError("resource_input", f"'{value}' is not {what} ({hint})")
        if not compiled.match(value):
            raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": pattern})
        return value

    return Annotated[Union[str, pulumi.Output[str]], PlainValidator(check), WithJsonSchema({"type": "string", "pattern": pattern})]


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
        elif item["type"] in ("string_pattern_mismatch",):
            problems.append(Problem(path, f"{item['input']!r} does not match {item['ctx']['pattern']}"))
        else:
            problems.append(Problem(path, item["msg"]))
    return problems


def as_model(value: Any, model: type[BaseModel], path: str) -> BaseModel:
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
    raise ConfigError([Problem(path, f"expected a {model.__name__} (or a dict of its keys), got {type(value).__name__}")])


def check_model_fields(args: Any) -> None:
    """Turn every field of the dataclass ``args`` that is declared as a configuration model (or a list
    of them) into that model, so a component given a dict gets its keys checked; every problem of
    every field is raised together in one ``ConfigError`` naming ``<ArgsClass>.<field>.<key>``. A
    component's Args call this in ``__post_init__``."""
    namespace = vars(sys.modules[type(args).__module__])
    problems: list[Problem] = []

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
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            object.__setattr__(args, field.name, checked(value, annotation, path))
        elif typing.get_origin(annotation) in (list, collections.abc.Sequence):
            (item,) = typing.get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel) and isinstance(value, (list, tuple)):
                models = [checked(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
                object.__setattr__(args, field.name, models if isinstance(value, list) else tuple(models))
    if problems:
        raise ConfigError(problems)
