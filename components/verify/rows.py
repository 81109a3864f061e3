"""A row of the verify report: one check, its verdict, the evidence and, for a fail, what to do.

On a fleet, many objects fail a check for the same reason; ``group`` counts them per reason and
keeps the first few names (``EXAMPLES``), so a row reads "412 nodes of pool p5-training without
network-node-layer-3 (p5-training-0, p5-training-1, p5-training-2 and 409 more)" whatever the
fleet's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable, Literal

PASS: Final = "pass"  # noqa: S105 - a check's status, not a password
FAIL: Final = "fail"
SKIP: Final = "skip"
Status = Literal["pass", "fail", "skip"]

EXAMPLES = 3
"""Objects named per group of a row (``--examples``); the rest are only counted."""


@dataclass(frozen=True)
class Group:
    """Objects a check says the same thing of: how many, and the first few by name."""

    noun: str
    """What the objects are, singular (``node``, ``pod``, ``job``)."""
    reason: str
    """What is said of each, read after the count and the noun (``without network-node-layer-3``);
    the same for every object of the group, so it names none of them."""
    count: int
    """How many objects it is said of."""
    examples: tuple[str, ...]
    """The first of them by name (qualified where names repeat across namespaces), at most the
    number of examples asked for."""

    def __str__(self) -> str:
        counted = f"{self.count} {self.noun}{'' if self.count == 1 else 's'} {self.reason}"
        if not self.examples:
            return counted
        left_out = self.count - len(self.examples)
        return f"{counted} ({', '.join(self.examples)}{f' and {left_out} more' if left_out else ''})"

    def as_json(self) -> dict[str, Any]:
        return {"noun": self.noun, "reason": self.reason, "count": self.count, "examples": list(self.examples)}


def group(noun: str, said: Iterable[tuple[str, str]], examples: int = EXAMPLES) -> tuple[Group, ...]:
    """``(object, reason)`` pairs as groups by reason, the largest first (ties in the order their
    reason first came), each naming its first ``examples`` objects in the order they came."""
    names: dict[str, list[str]] = {}
    for obj, reason in said:
        names.setdefault(reason, []).append(obj)
    ranked = sorted(names.items(), key=lambda entry: -len(entry[1]))
    return tuple(Group(noun, reason, len(objs), tuple(objs[:examples])) for reason, objs in ranked)


def described(groups: Iterable[Group]) -> str:
    """The groups as one clause each, joined by semicolons."""
    return "; ".join(str(g) for g in groups)


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
    failures: tuple[Group, ...] = ()
    """For a fail, the failing objects the evidence counts, grouped by reason (each group's full
    count and its examples); empty when the failure is not about many objects of one kind."""

    @property
    def detail(self) -> str:
        """The evidence, followed for a fail by what to do."""
        return f"{self.evidence} Fix: {self.fix}" if self.fix else self.evidence

    def as_json(self) -> dict[str, Any]:
        """The row as ``--json`` prints it."""
        return {"item": self.item, "status": self.status, "detail": self.detail, "failures": [g.as_json() for g in self.failures]}


def passed(item: str, evidence: str) -> Row:
    return Row(item, PASS, evidence)


def failed(item: str, evidence: str, fix: str, failures: Iterable[Group] = ()) -> Row:
    return Row(item, FAIL, evidence, fix, tuple(failures))


def skipped(item: str, reason: str) -> Row:
    return Row(item, SKIP, reason)


def listing(items: list[str], limit: int = 5, separator: str = ", ") -> str:
    """``a, b, c`` with at most ``limit`` entries and the number left out (a fleet has many nodes)."""
    shown = separator.join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
