"""The tests are a package: their shared helpers live in ``tests/support`` and are imported by
package name (``tests.support.<module>``), a test module never imports another test module or a
private name of the tests, and nothing under ``tests/`` rebinds another module's attribute when it
is imported.

Why: helpers on a flat import path shadowed other modules by name (``from kueue import ...`` loaded a
test helper, not anything of Kueue's), a test that imported another test's private helpers broke
when that test changed, and a conftest that rebound ``yaml.safe_load`` ran the product's own calls
differently under test than in use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.harness import PROJECT_ROOT

TESTS = PROJECT_ROOT / "tests"
SUPPORT = "support"
BENCHMARKS = "benchmarks"
"""Scripts run from the command line (``python tests/benchmarks/<script>.py``): each may import a
sibling script by its bare name, since a script's own folder is first on its import path."""


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _bare_names(root: Path, *, support: bool) -> set[str]:
    """The names modules under the tests folder ``root`` have when their folder is on the import
    path: those of ``support`` (helpers), or all the others (test modules, conftests, benchmarks)."""
    return {p.stem for p in _python_files(root)
            if p.stem != "__init__" and (p.relative_to(root).parts[0] == SUPPORT) == support}


def import_problems(path: Path, root: Path) -> list[str]:  # noqa: C901 - one branch per import rule the layout test states
    """What ``path``, a module under the tests folder ``root``, imports against the rule."""
    relative = path.relative_to(root)
    in_benchmarks = relative.parts[0] == BENCHMARKS
    in_support = relative.parts[0] == SUPPORT
    bare_test_modules = _bare_names(root, support=False) - {path.stem}
    bare_helpers = _bare_names(root, support=True)
    siblings = {p.stem for p in path.parent.glob("*.py")} if in_benchmarks else set()
    problems = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            if not in_support:
                problems.append(f"line {node.lineno}: a relative import; import helpers as tests.support.<module>")
            continue
        if isinstance(node, ast.ImportFrom):
            modules, names = [node.module or ""], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [alias.name for alias in node.names], []
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == root.name:
                if parts[1:2] != [SUPPORT]:
                    problems.append(f"line {node.lineno}: imports {module}, a test module; shared helpers belong in tests/support")
                private = [name for name in names if name.startswith("_")]
                if private:
                    problems.append(f"line {node.lineno}: imports {', '.join(private)} from {module}, a private name of the tests")
            elif parts[0] in siblings:
                continue
            elif parts[0] in bare_test_modules:
                problems.append(f"line {node.lineno}: imports {module}, a test module, by its bare name")
            elif parts[0] in bare_helpers:
                problems.append(f"line {node.lineno}: imports the helper {module} by its bare name; import tests.support.{module}")
    return problems


def global_patches(path: Path) -> list[str]:
    """Attributes of other modules that ``path`` rebinds as it is imported (at module level,
    outside any function or class): ``yaml.safe_load = ...`` changes every caller's behaviour."""
    found = []

    def walk(statements):
        for statement in statements:
            if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                found.extend(f"line {statement.lineno}: rebinds {ast.unparse(t)}" for t in targets if isinstance(t, ast.Attribute))
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and isinstance(statement.value.func, ast.Name) \
                    and statement.value.func.id == "setattr":
                found.append(f"line {statement.lineno}: {ast.unparse(statement.value)}")
            elif isinstance(statement, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    walk(getattr(statement, field, []))
            elif isinstance(statement, ast.ExceptHandler):
                walk(statement.body)

    walk(ast.parse(path.read_text(), str(path)).body)
    return found


MODULES = _python_files(TESTS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_imports_another_test_module_or_a_private_helper(path: Path):
    assert import_problems(path, TESTS) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_of_the_tests_patches_another_module_as_it_is_imported(path: Path):
    assert global_patches(path) == []


def test_every_helper_lives_in_tests_support():
    """Outside ``tests/support`` only test modules, conftests, package markers and the benchmark
    scripts."""
    loose = [
        str(p.relative_to(TESTS)) for p in MODULES
        if p.relative_to(TESTS).parts[0] not in (SUPPORT, BENCHMARKS)
        and not (p.name.startswith("test_") or p.name in ("conftest.py", "__init__.py"))
    ]
    assert loose == []
    assert (TESTS / "__init__.py").is_file()
    assert (TESTS / SUPPORT / "__init__.py").is_file()


def test_the_tests_import_path_is_the_repository_root_alone(pytestconfig):
    """No folder of the tests on pytest's path: a helper is found by its package name only."""
    assert [Path(p).resolve() for p in pytestconfig.getini("pythonpath")] == [PROJECT_ROOT]


def test_the_check_sees_a_test_importing_another_and_a_private_helper(tmp_path, monkeypatch):
    root = tmp_path / "tests"
    (root / "support").mkdir(parents=True)
    (root / "unit").mkdir()
    (root / "support" / "helpers.py").write_text("")
    (root / "unit" / "test_other.py").write_text("def _made(): ...\n")
    module = root / "unit" / "test_one.py"
    module.write_text(
        "from test_other import _made\n"
        "from tests.unit.test_other import _made\n"
        "from helpers import thing\n"
        "from tests.support.helpers import _private, public\n"
        "import yaml\n"
        "yaml.safe_load = None\n"
        "def fixture():\n"
        "    yaml.safe_dump = None  # inside a function: a fixture's own business, undone by it\n"
    )
    assert import_problems(module, root) == [
        "line 1: imports test_other, a test module, by its bare name",
        "line 2: imports tests.unit.test_other, a test module; shared helpers belong in tests/support",
        "line 2: imports _made from tests.unit.test_other, a private name of the tests",
        "line 3: imports the helper helpers by its bare name; import tests.support.helpers",
        "line 4: imports _private from tests.support.helpers, a private name of the tests",
    ]
    assert global_patches(module) == ["line 6: rebinds yaml.safe_load"]
