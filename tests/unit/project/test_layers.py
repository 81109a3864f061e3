"""The package's folders are layers: each module imports only from its own layer and those below."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.harness import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "components"
LAYERS = ("labeler", "healthgate", "facts", "config", "aws", "addons", "workloads", "platform", "plugin", "offline", "verify", "local")
"""Bottom to top. ``labeler`` and ``healthgate`` are the topology labeler's and the health gate's own
programs (each image copies its folder alone), so they import nothing of the library at all."""
PROGRAMS = ("labeler", "healthgate")


def _layer_of(parts: tuple[str, ...]) -> str | None:
    return parts[0] if parts and parts[0] in LAYERS else None


def _imports(path: Path) -> list[tuple[int, tuple[str, ...]]]:
    """(line, package-relative module parts) of every import of the library in one module."""
    module_parts = path.relative_to(PACKAGE).with_suffix("").parts
    package_parts = module_parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)]
                target = (*base, *(node.module.split(".") if node.module else ()))
                names = [(*target, alias.name) for alias in node.names] if not node.module else [target]
                found += [(node.lineno, t) for t in names]
            elif node.module and node.module.split(".")[0] == "eks_gpu_training":
                found.append((node.lineno, tuple(node.module.split(".")[1:])))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "eks_gpu_training":
                    found.append((node.lineno, tuple(alias.name.split(".")[1:])))
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _layer_of(p.relative_to(PACKAGE).parts))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_its_own_layer_and_those_below(path: Path):
    own = _layer_of(path.relative_to(PACKAGE).parts)
    upward = []
    for line, target in _imports(path):
        layer = _layer_of(target)
        if layer is None:
            upward.append(f"line {line}: imports the package root {'.'.join(target) or '(root)'}")
        elif own in PROGRAMS and layer != own:
            upward.append(f"line {line}: the {own} program imports {'.'.join(target)}")
        elif LAYERS.index(layer) > LAYERS.index(own):
            upward.append(f"line {line}: {own} imports {'.'.join(target)}, a layer above it")
    assert upward == []


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], "modules beside the package root belong in one of the layer folders"


PACKAGES = sorted({path.parent for path in PACKAGE.rglob("*.py")})
"""Every package of the library (the root, the layers and their sub-packages such as ``offline/check``)."""


def _import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's own modules each of its modules imports, by module name (``__init__``
    for the package itself). Imports inside functions and under ``if TYPE_CHECKING`` count: a circle
    that runs only at call time or only for a type checker is still a circle to read."""
    package_parts = package.relative_to(PACKAGE).parts
    modules = {path.stem for path in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        graph[path.stem] = set()
        for _line, target in _imports(path):
            if target[: len(package_parts)] != package_parts:
                continue
            inside = target[len(package_parts) :]
            # ``from .pools import X`` names the module; ``from . import pools`` the module too;
            # ``from . import X`` (or the package by its name) the package's __init__.
            imported = inside[0] if inside and inside[0] in modules else "__init__"
            if imported != path.stem:
                graph[path.stem].add(imported)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle found by a depth-first walk, as the modules along it (first repeated last)."""
    state: dict[str, str] = {}
    circles: list[list[str]] = []

    def walk(module: str, trail: list[str]) -> None:
        state[module] = "open"
        trail.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                circles.append(trail[trail.index(imported) :] + [imported])
            elif imported not in state:
                walk(imported, trail)
        trail.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [])
    return circles


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(PACKAGE)) if p != PACKAGE else "(root)")
def test_no_package_has_modules_importing_each_other_in_a_circle(package: Path):
    assert [" -> ".join(circle) for circle in _circles(_import_graph(package))] == []


def test_the_circle_check_sees_imports_in_functions_and_for_type_checking(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def helper():\n    from .high import Model\n    return Model\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .typed import Hint\nfrom .low import helper\n"
    )
    (package / "typed.py").write_text("from . import high\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert sorted(" -> ".join(circle) for circle in _circles(_import_graph(package))) == [
        "high -> low -> high",
        "high -> typed -> high",
    ]
