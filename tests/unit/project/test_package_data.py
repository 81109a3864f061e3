"""The facts the package ships (``scripts/generate_package_data.py``) are exactly what their
upstream sources say: regenerated from the reference folder, they match the shipped files."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.support.harness import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "generate_package_data.py"


def _script():
    spec = importlib.util.spec_from_file_location("generate_package_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return _script()


def test_the_shipped_facts_are_what_the_upstream_files_say(script, reference_dir):
    from tests.support.module_charts import pinned_chart_folders

    for name, text in script.generate(reference_dir, tuple(pinned_chart_folders())).items():
        shipped = script.OUTPUTS[name]
        assert shipped.read_text() == text, (
            f"{shipped.relative_to(PROJECT_ROOT)} differs from its source; run "
            f"python scripts/generate_package_data.py --reference <reference folder> --chart ... (python -m tests.support.module_charts)")


def test_each_shipped_file_names_its_source(script):
    for path in script.OUTPUTS.values():
        source = json.loads(path.read_text())["source"]
        assert source
        assert all(line.strip() for line in ([source] if isinstance(source, str) else source.values()))

