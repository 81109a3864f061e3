"""The package's folders are layers: each module imports only from its own layer and those below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "components"
LAYERS = ("labeler", "facts", "config", "aws", "addons", "workloads", "platform", "offline", "verify", "local")
"""Bottom to top. ``labeler`` is the topology labeler's own program (its image copies the folder
alone), so it imports nothing of the library at all."""


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
        elif own == "labeler" and layer != "labeler":
            upward.append(f"line {line}: the labeler program imports {'.'.join(target)}")
        elif LAYERS.index(layer) > LAYERS.index(own):
            upward.append(f"line {line}: {own} imports {'.'.join(target)}, a layer above it")
    assert upward == []


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], "modules beside the package root belong in one of the layer folders"
