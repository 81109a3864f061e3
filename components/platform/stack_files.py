"""Where a stack's file is: the one place the offline tools, the local cluster and ``verify``
find it.

A stack is named (``dev``) or given by path (``stacks/Pulumi.dev.yaml``). A name is looked up as
Pulumi does: ``Pulumi.<name>.yaml`` in the project's ``stackConfigDir`` (the project's own folder
when ``Pulumi.yaml`` sets none). The project is the folder of the nearest ``Pulumi.yaml`` at or
above the current folder (or above the stack file given by path), never the folder this package
was installed from: an installed package has no project of its own.

The settings are read from one configuration namespace, as a running program reads them
(``loading.load_stack_config``): the project's own name (``name:`` in ``Pulumi.yaml``, what Pulumi
prefixes a project's keys with), else this library's ``eks-gpu-training``, else the one other
namespace the file sets keys in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union


from ..facts import yaml_io
from ..config.image_lock import with_image_lock
from ..config import PROJECT, ConfigError, GpuTrainingPlatformArgs, Problem

PROJECT_FILE = "Pulumi.yaml"
STACK_FILE_PREFIX, STACK_FILE_SUFFIX = "Pulumi.", ".yaml"
"""Pulumi's stack files: ``Pulumi.<stack>.yaml``."""


def stack_file_name(stack: str) -> str:
    """The file name of stack ``stack``'s settings."""
    return f"{STACK_FILE_PREFIX}{stack}{STACK_FILE_SUFFIX}"


def stack_name_of(path: Path) -> str:
    """The stack a stack file is named for (``Pulumi.dev.yaml``: ``dev``)."""
    return path.name.removeprefix(STACK_FILE_PREFIX).rsplit(".", 1)[0]


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
        settings = (yaml_io.load(self.path.read_text()) or {}).get("config") or {}
        # images.lock beside the stack file (its images by digest), as the stack program reads it.
        return with_image_lock(settings, self._namespace(settings), self.path.parent)

    def namespace(self) -> str:
        """The configuration namespace the stack's settings are read from: the project's name when
        the file sets keys under it, else ``eks-gpu-training`` when it does, else the one other
        namespace it sets keys in (``aws:`` aside), else ``eks-gpu-training``."""
        return self._namespace((yaml_io.load(self.path.read_text()) or {}).get("config") or {}) if self.path.is_file() else PROJECT

    def _namespace(self, settings: dict[str, Any]) -> str:
        namespaces = {str(key).split(":", 1)[0] for key in settings if ":" in str(key)} - {"aws"}
        project = project_name(self.project_dir) if self.project_dir is not None else None
        if project is not None and project in namespaces:
            return project
        if PROJECT in namespaces or len(namespaces) != 1:
            return PROJECT
        return namespaces.pop()

    def platform_args(self) -> GpuTrainingPlatformArgs:
        """The stack's checked arguments, read from its namespace; ``ConfigError`` with every problem."""
        from .loading import platform_args_from_settings

        return platform_args_from_settings(self.settings(), self.namespace())


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


def _project(project_dir: Path) -> dict[str, Any]:
    path = project_dir / PROJECT_FILE
    return (yaml_io.load(path.read_text()) or {}) if path.is_file() else {}


def project_name(project_dir: Path) -> Optional[str]:
    """The project's ``name`` (its configuration namespace); None without a ``Pulumi.yaml``."""
    name = _project(project_dir).get("name")
    return str(name) if name else None


def stack_config_dir(project_dir: Path) -> Path:
    """The project's ``stackConfigDir`` (Pulumi's default, and a folder without ``Pulumi.yaml``'s:
    the folder itself)."""
    return project_dir / str(_project(project_dir).get("stackConfigDir") or ".")


def stack_names(project_dir: Path) -> list[str]:
    """The stacks whose files are in the project's ``stackConfigDir``, sorted."""
    folder = stack_config_dir(project_dir)
    return sorted(stack_name_of(path) for path in folder.glob(stack_file_name("*")))


def locate_stack(stack: Union[str, Path], project_dir: Optional[Path] = None) -> StackFile:
    """The stack file of a stack name or path; the project is ``project_dir``, else the one the
    stack file (given by path) or the current folder is in. ``ConfigError`` when a name has no
    project to be looked up in."""
    if is_path(stack):
        path = Path(stack)
        return StackFile(stack_name_of(path), path, project_dir or find_project(path.parent) or find_project(Path.cwd()))
    project = project_dir or find_project(Path.cwd())
    if project is None:
        raise ConfigError([Problem(str(stack), f"no Pulumi project ({PROJECT_FILE}) in {Path.cwd()} or a folder above it "
                                               "to find the stack in: run from the project, name its folder, or give "
                                               "the stack file's path")])
    return StackFile(str(stack), stack_config_dir(project) / stack_file_name(str(stack)), project)
