"""Training pods' AWS access: the stack's S3 buckets, named once for every feature that needs them,
and the training ServiceAccount whose EKS Pod Identity role reaches them."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _DNS_SUBDOMAIN, _Model
from .inputs import ResourceInput, TextOrOutput, is_unknown

S3_BUCKET_NAME = re.compile(r"^(?!xn--)(?!sthree-)(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""General purpose bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and
ending with a letter or digit, no ``..``, no reserved ``xn--``/``sthree-`` prefix
(docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""

_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[\w+=,.@/-]+$")

BucketName = Annotated[TextOrOutput, ResourceInput(
    S3_BUCKET_NAME.pattern, "an S3 bucket name", "3-63 lowercase letters, digits, '.', '-'; no '..', no xn--/sthree- prefix"
)]
"""An S3 bucket name, or the ``bucket`` Output of a bucket made in the same program."""
PolicyArn = Annotated[TextOrOutput, ResourceInput(_POLICY_ARN.pattern, "an IAM policy ARN", "arn:<partition>:iam::<account or aws>:policy/<name>")]
"""An IAM policy ARN, or the ``arn`` Output of a policy made in the same program."""


class S3BucketConfig(_Model):
    """An S3 bucket of the stack's training data or checkpoints."""

    name: BucketName
    """Bucket name (required)."""
    access: Literal["read", "readWrite"] = "read"
    """What training pods may do with its objects: `read` lists and reads them; `readWrite` also writes and deletes them (checkpoints, multipart uploads included). Default: read."""
    account_id: Optional[str] = Field(default=None, pattern=r"^\d{12}$")
    """The AWS account that owns the bucket (12 digits): the training role reaches the bucket only while that account owns it (IAM condition `s3:ResourceAccount`), so a bucket deleted and re-created under the same name by another account is out of reach. Default: the account the stack deploys into."""


class TrainingServiceAccountConfig(_Model):
    """The ServiceAccount training pods run as, in every training namespace."""

    name: str = Field(default="training", pattern=_DNS_SUBDOMAIN, max_length=253)
    """Its name. Default: training."""
    policy_arns: list[PolicyArn] = []
    """IAM policies (ARNs) its EKS Pod Identity role gets besides access to `s3Buckets`. Default: none (with no bucket either, no role)."""

    @field_validator("policy_arns")
    @classmethod
    def _policy_arns(cls, values: list[str]) -> list[str]:
        known = [value for value in values if not is_unknown(value)]
        if len(set(known)) != len(known):
            raise PydanticCustomError("unique", "lists a policy twice")
        return values


def unique_bucket_names(buckets: list[S3BucketConfig]) -> list[S3BucketConfig]:
    """Refuses a bucket named twice (its access would be ambiguous)."""
    names = [bucket.name for bucket in buckets if not is_unknown(bucket.name)]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise PydanticCustomError("unique", f"names {', '.join(twice)} more than once")
    return buckets
