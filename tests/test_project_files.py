"""The project's own files agree with the configuration model."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from eks_gpu_training.offline import docs
from eks_gpu_training.config import PROJECT, GpuTrainingPlatformArgs
from harness import PROJECT_ROOT, run_program, stack_config

STACK_KEYS = {f.alias for n, f in GpuTrainingPlatformArgs.model_fields.items() if n != "region"}


def test_readme_configuration_reference_is_generated_from_the_model():
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert readme == docs.updated_readme(readme), "run `python -m eks_gpu_training.offline.docs --write`"


def test_pulumi_yaml_declares_every_top_level_key_of_the_model():
    project = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == PROJECT
    assert project["stackConfigDir"] == "stacks"
    assert set(project["config"]) == STACK_KEYS
    assert all(entry["description"] for entry in project["config"].values())


def test_every_stack_file_sets_every_declared_key():
    # Pulumi requires each declared project key without a default to be set by every stack.
    for stack in ("dev", "prod"):
        keys = {k.split(":", 1)[1] for k in stack_config(stack) if k.startswith(f"{PROJECT}:")}
        assert keys == STACK_KEYS, stack


def test_no_tracked_file_holds_a_merge_conflict_marker():
    tracked = subprocess.run(["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: no list of tracked files")
    markers = ("<<<<<<< ", ">>>>>>> ")
    offenders = [
        name
        for name in tracked.stdout.split()
        if (PROJECT_ROOT / name).suffix in (".py", ".md", ".yaml", ".toml", ".txt")
        and any(line.startswith(markers) for line in (PROJECT_ROOT / name).read_text().splitlines())
    ]
    assert offenders == []


def test_readme_composition_example_builds_under_the_mock_engine():
    readme = (PROJECT_ROOT / "README.md").read_text()
    usage = readme[readme.index("## Using the components in your own program") :]
    example = usage[usage.index("```python\n") + len("```python\n") : usage.index("```", usage.index("```python\n") + 3)]
    graph = run_program(lambda: exec(compile(example, "README example", "exec"), {}))
    assert graph.error is None, repr(graph.error)
    assert graph.one("eks:index:Cluster").inputs["name"] == "research"
    assert [r.inputs["nodeGroupNamePrefix"] for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")] == ["h100-"]
