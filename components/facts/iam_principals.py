"""Which IAM principal an ARN names.

An IAM role or user is ``arn:<partition>:iam::<account>:<role|user>/<path><name>``. Its name is
unique in the account whatever the path, and IAM does not tell names apart by case ("you can't
create groups named both ADMINS and admins", IAM name requirements,
docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html). So two ARNs name the same
principal when account, kind and name agree, case aside, even where their paths differ; EKS keeps
one access entry per principal (docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

PRINCIPAL_ARN_PATTERN = r"^arn:(aws[a-z-]*):iam::(\d{12}):(role|user)/(?:[\w+=,.@/-]*/)?([\w+=,.@-]+)$"
"""An IAM role or user ARN, path included; the groups are partition, account, kind and name (IAM
role and user names are ``[\\w+=,.@-]+``, botocore iam ``roleNameType``, ``userNameType``)."""

_PRINCIPAL_ARN = re.compile(PRINCIPAL_ARN_PATTERN)


@dataclass(frozen=True)
class IamPrincipal:
    """An IAM role or user, as its ARN names it."""

    partition: str
    """ARN partition: ``aws``, ``aws-cn``, ``aws-us-gov``."""
    account: str
    """12-digit account ID."""
    kind: str
    """``role`` or ``user``."""
    name: str
    """The name, path left out, as written."""

    @property
    def key(self) -> str:
        """``<account>-<kind>-<name in lower case>``: the same for every ARN of this principal, and
        only characters of IAM names (``[\\w+=,.@-]``), so it can be part of a Pulumi resource name."""
        return f"{self.account}-{self.kind}-{self.name.lower()}"

    @property
    def arn(self) -> str:
        """The principal's ARN without a path: at most 102 characters (a 64-character name)."""
        return f"arn:{self.partition}:iam::{self.account}:{self.kind}/{self.name}"


def iam_principal(arn: Any) -> Optional[IamPrincipal]:
    """The role or user ``arn`` names; None for anything else (another kind of ARN, the account's
    root, an Output, a placeholder of the offline render)."""
    match = _PRINCIPAL_ARN.match(arn) if isinstance(arn, str) else None
    return IamPrincipal(*match.groups()) if match else None


def same_principal(arn: Any, other: Any) -> bool:
    """Whether two ARNs name the same role or user (path and case of the name aside); otherwise
    whether they are the same text."""
    principal, other_principal = iam_principal(arn), iam_principal(other)
    if principal is not None and other_principal is not None:
        return principal.key == other_principal.key
    return isinstance(arn, str) and arn == other
