"""Training pods' AWS access: the stack's S3 buckets, named once for every feature that needs them,
and the training ServiceAccount whose EKS Pod Identity role reaches them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _DNS_SUBDOMAIN, _Model

S3_BUCKET_NAME = re.compile(r"^(?!xn--)(?!sthree-)(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""General purpose bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and
ending with a letter or digit, no ``..``, no reserved ``xn--``/``sthree-`` prefix
(docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""

_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[\w+=,.@/-]+$")


class S3BucketConfig(_Model):
    """An S3 bucket of the stack's training data or checkpoints."""

    name: str
    """Bucket name (required)."""
    access: Literal["read", "readWrite"] = "read"
    """What training pods may do with its objects: `read` lists and reads them; `readWrite` also writes and deletes them (checkpoints, multipart uploads included). Default: read."""

    @field_validator("name")
    @classmethod
    def _bucket_name(cls, value: str) -> str:
        if not S3_BUCKET_NAME.match(value):
            raise PydanticCustomError(
                "bucket", f"'{value}' is not an S3 bucket name (3-63 lowercase letters, digits, '.', '-'; no '..', no xn--/sthree- prefix)"
            )
        return value


class TrainingServiceAccountConfig(_Model):
    """The ServiceAccount training pods run as, in every training namespace."""

    name: str = Field(default="training", pattern=_DNS_SUBDOMAIN, max_length=253)
    """Its name. Default: training."""
    policy_arns: list[str] = []
    """IAM policies (ARNs) its EKS Pod Identity role gets besides access to `s3Buckets`. Default: none (with no bucket either, no role)."""

    @field_validator("policy_arns")
    @classmethod
    def _policy_arns(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _POLICY_ARN.match(value):
                raise PydanticCustomError("arn", f"'{value}' is not an IAM policy ARN (arn:<partition>:iam::<account or aws>:policy/<name>)")
        if len(set(values)) != len(values):
            raise PydanticCustomError("unique", "lists a policy twice")
        return values


def unique_bucket_names(buckets: list[S3BucketConfig]) -> list[S3BucketConfig]:
    """Refuses a bucket named twice (its access would be ambiguous)."""
    names = [bucket.name for bucket in buckets]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise PydanticCustomError("unique", f"names {', '.join(twice)} more than once")
    return buckets
