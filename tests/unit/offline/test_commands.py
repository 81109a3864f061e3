"""What the command-line entry points run around a command's ``main``."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from eks_gpu_training.offline import commands

PROJECT_ROOT = Path(__file__).resolve().parents[3]

PROBE = '''
import gc

AT_IMPORT = gc.isenabled()


def main():
    print(AT_IMPORT, gc.isenabled())
    return 3
'''


def test_a_one_shot_command_runs_without_the_collector_from_its_first_import(tmp_path):
    (tmp_path / "probe_command.py").write_text(PROBE)
    run = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom eks_gpu_training.offline.commands import one_shot\n"
         "raise SystemExit(one_shot('probe_command'))"],
        capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": ""}, check=False,
    )
    assert (run.returncode, run.stdout.split()) == (3, ["False", "False"]), run.stderr


@pytest.mark.parametrize("name", ["render", "check", "preflight"])
def test_each_one_shot_entry_point_runs_its_command_module(monkeypatch, name):
    launched = []
    monkeypatch.setattr(commands, "one_shot", launched.append)
    getattr(commands, name)()
    (module,) = launched
    assert callable(importlib.import_module(module).main)
    scripts = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[f"eks-gpu-training-{name}"] == f"eks_gpu_training.offline.commands:{name}"
