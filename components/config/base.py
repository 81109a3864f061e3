"""Shared pieces of the configuration model: constants, the base model, AWS enum checks. The problems
and the error that reports them live one module down, in ``problems``."""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Annotated, Mapping, cast

import pulumi
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from ..facts.kubernetes_versions import EKS_KUBERNETES_VERSIONS
from ..facts.quantity import QUANTITY_PATTERN
from .arguments import problems_from_validation_error
from .documented import args_section, type_text
from .problems import ConfigError, Problem

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

SUPPORTED_KUBERNETES_VERSIONS = tuple(EKS_KUBERNETES_VERSIONS)
"""EKS Kubernetes versions in standard or extended support on the EKS release calendar
(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html) that this library is tested for;
``facts.kubernetes_versions`` says what each needs."""


if TYPE_CHECKING:
    # What type(BaseModel) is; the type checker cannot take a call as a base class.
    from pydantic._internal._model_construction import ModelMetaclass as _PydanticModelMeta
else:
    _PydanticModelMeta = type(BaseModel)


class _ModelMeta(_PydanticModelMeta):
    def __call__(cls, *args: object, **kwargs: object) -> object:
        # A model built in a program with a wrong value is refused like a stack file's: one
        # ConfigError naming each key path, not pydantic's own error. Only a program's own call
        # comes through here; pydantic validates nested models and model_validate without it.
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as error:
            # Every class this metaclass makes is a model class (_Model and its subclasses).
            model = cast("type[BaseModel]", cls)
            raise ConfigError(problems_from_validation_error(error, model, cls.__name__)) from None


class _Model(BaseModel, metaclass=_ModelMeta):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: object) -> None:
        """``help()`` and editors show what a program passes: snake_case parameters, each with the
        one-line description docs/configuration.md shows (both read the field docstrings)."""
        super().__pydantic_init_subclass__(**kwargs)
        cls.__signature__ = inspect.Signature(
            [
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True),
                    annotation=type_text(info.annotation),
                )
                for name, info in cls.model_fields.items()
            ]
        )
        own = (cls.__dict__.get("__doc__") or "").split("\n\n" + cls.__name__ + " fields:")[0]
        cls.__doc__ = f"{inspect.cleandoc(own)}\n\n{args_section(cls)}\n"


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


TAG_KEY_LIMITS = aws_enums.string_limits("iam", "tagKeyType")
"""Length limits of a tag key, from IAM's model (1-128; EC2's and EKS's are the same)."""
TAG_VALUE_LIMITS = aws_enums.string_limits("iam", "tagValueType")
"""Length limits of a tag value, from IAM's model (0-256; EC2's and EKS's are the same)."""


Tags = pulumi.Input[Mapping[str, pulumi.Input[str]]]
"""A component's tags as pulumi-aws takes them: a map whose values may be Outputs, or an Output of a
whole map (cost tags read from another stack)."""


def tag_map(tags: Tags) -> Tags:
    """``tags`` as a resource's ``tags`` input: a copy of a plain map; an Output passed on as it is."""
    return dict(tags) if isinstance(tags, Mapping) else tags


def tags_output(tags: Tags) -> pulumi.Output[Mapping[str, pulumi.Input[str]]]:
    """``tags`` as one Output of the map, for what is done with its keys once they are known."""
    return pulumi.Output.from_input(tags)


def merged_tags(tags: Tags, own: Mapping[str, pulumi.Input[str]]) -> Tags:
    """``tags`` with a resource's ``own`` over them (its ``Name``): one map, or, for an Output of a
    whole map, an Output of the merged map."""
    if isinstance(tags, Mapping):
        return {**tags, **own}
    return tags_output(tags).apply(lambda known: pulumi.Output.from_input({**known, **own}))


def validate_tags(tags: Tags, path: str = "tags") -> list[Problem]:
    """Tags every AWS resource of the stack carries, IAM roles included: lengths, IAM's alphabet
    (no comma, no ``#``, ...), no reserved ``aws:`` prefix, and no two keys IAM would take as one
    (IAM tag keys are case-insensitive: docs.aws.amazon.com/IAM/latest/UserGuide/id_tags.html).
    An Output of a whole map is known only at deployment, where AWS checks it."""
    problems: list[Problem] = []
    if not isinstance(tags, Mapping):
        return problems
    alphabet = aws_enums.iam_tag_alphabet()
    seen: dict[str, str] = {}
    for key, value in tags.items():
        if not TAG_KEY_LIMITS[0] <= len(key) <= TAG_KEY_LIMITS[1]:
            problems.append(Problem(f"{path}.{key}", f"tag keys have {TAG_KEY_LIMITS[0]}-{TAG_KEY_LIMITS[1]} characters ({len(key)} here)"))
        if key.lower().startswith("aws:"):
            problems.append(Problem(f"{path}.{key}", "tag keys starting with 'aws:' are reserved for AWS"))
        if not aws_enums.iam_tag_text_ok(key):
            problems.append(Problem(f"{path}.{key}", f"the key has characters IAM refuses in tags; allowed: {alphabet}"))
        if not isinstance(value, str):
            pass  # an Output, known only once its resource exists: AWS checks it
        elif len(value) > TAG_VALUE_LIMITS[1]:
            problems.append(Problem(f"{path}.{key}", f"tag values have at most {TAG_VALUE_LIMITS[1]} characters ({len(value)} here)"))
        if isinstance(value, str) and not aws_enums.iam_tag_text_ok(value):
            problems.append(
                Problem(
                    f"{path}.{key}",
                    f"'{value}' has characters IAM refuses in tag values (CreateRole fails on it); allowed: {alphabet}; "
                    "e.g. join list items with ':' or '+' instead of ','",
                )
            )
        if key.lower() in seen:
            problems.append(Problem(f"{path}.{key}", f"and '{seen[key.lower()]}' differ only in case; IAM takes them as one key and refuses both"))
        seen.setdefault(key.lower(), key)
    return problems
