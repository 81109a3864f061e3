"""What the storage tests share: the file system's resource type and a stack's FSx settings."""

from __future__ import annotations

from typing import Any




FILE_SYSTEM = "aws:fsx/lustreFileSystem:LustreFileSystem"


def fsx(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["storage"]["fsx"]
