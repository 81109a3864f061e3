"""A row of the verify report: one check, its verdict, the evidence and, for a fail, what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

PASS: Final = "pass"  # noqa: S105 - a check's status, not a password
FAIL: Final = "fail"
SKIP: Final = "skip"
Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class Row:
    """One check's verdict on the cluster."""

    item: str
    """What is checked, a stable name (``gpu-device-plugin``, ``resource-quota/training``)."""
    status: Status
    """``pass``, ``fail``, or ``skip`` when there is nothing to judge."""
    evidence: str
    """What the cluster shows: which nodes, counts and objects the verdict rests on (for a skip, why)."""
    fix: str = ""
    """For a fail, what to do about it; empty otherwise."""

    @property
    def detail(self) -> str:
        """The evidence, followed for a fail by what to do."""
        return f"{self.evidence} Fix: {self.fix}" if self.fix else self.evidence

    def as_json(self) -> dict[str, str]:
        """The row as ``--json`` prints it."""
        return {"item": self.item, "status": self.status, "detail": self.detail}


def passed(item: str, evidence: str) -> Row:
    return Row(item, PASS, evidence)


def failed(item: str, evidence: str, fix: str) -> Row:
    return Row(item, FAIL, evidence, fix)


def skipped(item: str, reason: str) -> Row:
    return Row(item, SKIP, reason)


def listing(items: list[str], limit: int = 5, separator: str = ", ") -> str:
    """``a, b, c`` with at most ``limit`` entries and the number left out (a fleet has many nodes)."""
    shown = separator.join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
