"""Where a stack's file is: the one place the offline tools, the local cluster and ``verify``
find it.

A stack is named (``dev``) or given by path (``stacks/Pulumi.dev.yaml``). A name is looked up as
Pulumi does: ``Pulumi.<name>.yaml`` in the project's ``stackConfigDir`` (the project's own folder
when ``Pulumi.yaml`` sets none). The project is the folder of the nearest ``Pulumi.yaml`` at or
above the current folder (or above the stack file given by path), never the folder this package
was installed from: an installed package has no project of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from ..config import ConfigError, Problem

PROJECT_FILE = "Pulumi.yaml"


@dataclass(frozen=True)
class StackFile:
    """A stack's file and the project whose program it configures."""

    name: str
    """The stack's name (``Pulumi.<name>.yaml``)."""
    path: Path
    """The stack file."""
    project_dir: Optional[Path]
    """The Pulumi project (the folder of its ``Pulumi.yaml``); None for a stack file outside any."""

    def settings(self) -> dict[str, Any]:
        """The file's ``config``; ``ConfigError`` when there is no such file."""
        if not self.path.is_file():
            raise ConfigError([Problem(str(self.path), "no such stack file")])
        return (yaml.safe_load(self.path.read_text()) or {}).get("config") or {}


def find_project(start: Path) -> Optional[Path]:
    """The folder of the nearest ``Pulumi.yaml`` at or above ``start``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return None


def is_path(stack: Union[str, Path]) -> bool:
    """Whether ``stack`` is a stack file's path rather than a stack name."""
    text = str(stack)
    return isinstance(stack, Path) or text.endswith((".yaml", ".yml")) or "/" in text


def stack_config_dir(project_dir: Path) -> Path:
    """The project's ``stackConfigDir`` (Pulumi's default, and a folder without ``Pulumi.yaml``'s:
    the folder itself)."""
    path = project_dir / PROJECT_FILE
    project = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    return project_dir / str(project.get("stackConfigDir") or ".")


def locate_stack(stack: Union[str, Path], project_dir: Optional[Path] = None) -> StackFile:
    """The stack file of a stack name or path; the project is ``project_dir``, else the one the
    stack file (given by path) or the current folder is in. ``ConfigError`` when a name has no
    project to be looked up in."""
    if is_path(stack):
        path = Path(stack)
        name = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return StackFile(name, path, project_dir or find_project(path.parent) or find_project(Path.cwd()))
    project = project_dir or find_project(Path.cwd())
    if project is None:
        raise ConfigError([Problem(str(stack), f"no Pulumi project ({PROJECT_FILE}) in {Path.cwd()} or a folder above it "
                                               "to find the stack in: run from the project, name its folder, or give "
                                               "the stack file's path")])
    return StackFile(str(stack), stack_config_dir(project) / f"Pulumi.{stack}.yaml", project)
