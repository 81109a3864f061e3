"""The tree is named after its concepts: no module name repeats across folders, a component lives
in the file named after it, and each unit test file is named after a module of its layer.

Why: a newcomer finds a concept by its name, not by grep (``kueue_queues.py`` holds ``KueueQueues``
and its tests are ``test_kueue_queues*.py``); a name that repeats across folders (three
``storage.py``) says the layer, not the concept."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.support.harness import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "components"
UNIT_TESTS = PROJECT_ROOT / "tests" / "unit"
PROJECT_TESTS = "project"
"""Checks of the repository as a whole (layers, docs, budgets, the public API): named after what
they check, not after a module."""
EXEMPT = {"__init__", "__main__"}


def _in_package(path: Path) -> bool:
    """Whether ``path`` is a module of the package: every folder from the package down to it has
    an ``__init__.py`` (a virtual environment or data folder under ``components/`` does not)."""
    folder = path.parent
    while folder != PACKAGE:
        if not (folder / "__init__.py").is_file():
            return False
        folder = folder.parent
    return True


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _in_package(p))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def test_snake_case_of_a_class_name():
    assert [_snake(n) for n in ("EksCluster", "KueueQueues", "GpuTrainingInCluster", "EfaDevicePlugin")] == [
        "eks_cluster", "kueue_queues", "gpu_training_in_cluster", "efa_device_plugin"]


def test_no_module_name_repeats_across_folders():
    folders = defaultdict(list)
    for path in MODULES:
        if path.stem not in EXEMPT:
            folders[path.name].append(str(path.parent.relative_to(PACKAGE)))
    repeated = {name: sorted(where) for name, where in folders.items() if len(where) > 1}
    assert repeated == {}, "name each module after the concept it holds, not its layer"


def _components(path: Path) -> list[str]:
    """Classes of ``path`` whose bases name ``ComponentResource`` (``pulumi.ComponentResource``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base).split(".")[-1] == "ComponentResource"
                                                  for base in node.bases):
            found.append(node.name)
    return found


def _named_after(stem: str, component: str) -> bool:
    """``stem`` is ``component`` in snake case; where the words join is free, so a name spelt as
    one word upstream stays one (``multikueue_manager.py`` for ``MultiKueueManager``)."""
    return stem.replace("_", "") == _snake(component).replace("_", "")


def test_every_component_lives_in_the_file_named_after_it():
    misplaced = [f"{component} is in {path.relative_to(PACKAGE)}, not {_snake(component)}.py"
                 for path in MODULES for component in _components(path) if not _named_after(path.stem, component)]
    assert misplaced == []


def test_a_file_is_named_after_its_component_however_the_words_join():
    assert _named_after("multikueue_manager", "MultiKueueManager")
    assert not _named_after("queues", "KueueQueues")


def test_components_are_found():
    found = {component for path in MODULES for component in _components(path)}
    assert {"EksCluster", "KueueQueues", "JobSetController", "TrainerController", "GpuTrainingPlatform"} <= found


def _module_names(layer: Path, modules: list[Path]) -> set[str]:
    """Module stems and sub-package names of a layer, any depth."""
    stems = {p.stem for p in modules if p.is_relative_to(layer) and p.stem not in EXEMPT}
    packages = {p.parent.name for p in modules if p.is_relative_to(layer) and p.parent != layer}
    return stems | packages


def unnamed_test_files(tests: Path, package: Path, modules: list[Path]) -> list[str]:
    """Test files under ``tests/<layer>/`` not named ``test_<module>*.py`` after a module (or
    sub-package) of ``components/<layer>/``; a folder with no layer of that name is named too."""
    offenders = []
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and p.name not in (PROJECT_TESTS, "__pycache__")):
        layer = package / folder.name
        names = _module_names(layer, modules) if layer.is_dir() else set()
        for test_file in sorted(folder.glob("test_*.py")):
            stem = test_file.stem.removeprefix("test_")
            if not any(stem == name or stem.startswith(f"{name}_") for name in names):
                offenders.append(str(test_file.relative_to(tests)))
    return offenders


def test_every_unit_test_file_is_named_after_a_module_of_its_layer():
    assert unnamed_test_files(UNIT_TESTS, PACKAGE, MODULES) == [], (
        "name a layer's test file test_<module>*.py after the module of components/<layer>/ it tests")


def test_a_test_file_named_after_no_module_of_its_layer_is_named(tmp_path):
    (tmp_path / "components" / "aws").mkdir(parents=True)
    (tmp_path / "tests" / "aws").mkdir(parents=True)
    (tmp_path / "tests" / "aws" / "test_network_routes.py").write_text("")
    (tmp_path / "tests" / "aws" / "test_tags.py").write_text("")
    modules = [tmp_path / "components" / "aws" / "network.py"]
    assert unnamed_test_files(tmp_path / "tests", tmp_path / "components", modules) == ["aws/test_tags.py"]
