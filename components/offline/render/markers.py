"""How a render marks values it cannot know offline."""

from __future__ import annotations

from typing import Any

SECRET = "<secret>"  # noqa: S105 - the text a render shows in place of a secret
"""What a secret value reads in a render (a render is meant to be shared and committed)."""

UNKNOWN_PREFIX = "<unknown: "


def placeholder(attribute: str, type_: str, name: str) -> str:
    """The marker of a value that exists only after deployment: ``<unknown: arn of TYPE NAME>``."""
    return f"{UNKNOWN_PREFIX}{attribute} of {type_} {name}>"


def is_placeholder(value: Any) -> bool:
    """Whether a value is (or contains) a render's marker of a deployment-time or secret value."""
    return isinstance(value, str) and (UNKNOWN_PREFIX in value or value == SECRET)
