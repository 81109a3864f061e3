"""Configuration problems and the one error that reports them all.

The lowest module of the configuration package: every other module reports through these, so this
one imports none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pulumi


class ConfigError(pulumi.InputPropertiesError, pulumi.RunError, ValueError):
    """Invalid stack configuration: every problem, each with its key path.

    A ``pulumi.InputPropertiesError``, the form Pulumi's own tools report input problems in: its
    ``errors`` hold one ``{"property_path", "reason"}`` per problem, which the SDK's component
    provider host (``pulumi.provider.experimental``) sends to the engine as property errors. A
    ``pulumi.RunError`` too, because Pulumi's Python language host (``pulumi-language-python-exec``)
    logs only the message of a ``RunError`` a program raises, and a full traceback for any other
    exception, which would bury the problems under the library's stack frames. Still a
    ``ValueError`` for programs that catch it as one."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
        super().__init__(
            f"invalid configuration ({count}), rejected before registering any resource:\n{lines}",
            errors=[{"property_path": p.path, "reason": p.message} for p in problems],
        )


@dataclass(frozen=True)
class Problem:
    """One configuration problem: where (key path) and what is wrong or allowed."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


ProblemSink = Callable[[str, str], None]
"""Records one problem: the key under the pool's path, and the message."""


def _collector(path: str) -> tuple[list[Problem], ProblemSink]:
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(f"{path}.{key}", message))

    return problems, problem
