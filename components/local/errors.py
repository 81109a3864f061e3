"""The one kind of failure the local cluster reports: what failed, and how to fix it.

The standard library only: ``build.py`` raises it when CI runs that module as a script, before
the package is installed.
"""

from __future__ import annotations

from typing import Optional


class LocalError(Exception):
    """A failure of ``eks-gpu-training-local``: ``what`` failed, ``fix`` says what to do about it,
    ``details`` (a log's tail, the pods left pending) back it up. ``str()`` is what failed and its
    details; ``line()`` is the line the command prints first, the details under it."""

    fix = "read the details, and the processes' logs in the cluster's state folder"
    """What to do about it, when the failure gives no better advice of its own."""

    def __init__(self, what: str, fix: Optional[str] = None, details: str = ""):
        # A message of several lines (a configuration's problems, one a line) keeps its first as
        # what failed and the rest as details.
        first, _, rest = what.strip().partition("\n")
        super().__init__(first)
        self.what = first
        if fix is not None:
            self.fix = fix
        self.details = "\n".join(part for part in (rest, details) if part)

    def __str__(self) -> str:
        return self.what + (f"\n{self.details}" if self.details else "")

    def line(self) -> str:
        """What failed and its fix, on one line."""
        return f"{self.what.rstrip(':')} — {self.fix}"


class LocalClusterError(LocalError):
    """The cluster came up, but not as the stack says it should."""
