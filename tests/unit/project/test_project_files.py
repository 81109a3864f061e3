"""The project's own files agree with the configuration model."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from eks_gpu_training.offline import docs
from eks_gpu_training.config import PROJECT, GpuTrainingPlatformArgs
from tests.support.harness import PROJECT_ROOT, stack_config

STACK_KEYS = {f.alias for n, f in GpuTrainingPlatformArgs.model_fields.items() if n != "region"}


def test_configuration_reference_is_generated_from_the_model():
    document = (PROJECT_ROOT / docs.DOCUMENT).read_text()
    assert document == docs.updated_document(document), "run `python -m eks_gpu_training.offline.docs --write`"


def test_the_readme_keeps_quick_start_architecture_and_examples_and_links_the_docs():
    readme = (PROJECT_ROOT / "README.md").read_text()
    sections = [line[3:] for line in readme.splitlines() if line.startswith("## ")]
    assert sections[:3] == ["Quick start", "Architecture", "Use from your own program"]
    for page in ("docs/architecture.md", "docs/configuration.md", "docs/operations.md", "docs/health.md"):
        assert f"]({page})" in readme


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


def test_the_chart_mirror_is_never_offered_as_an_ecr_pull_through_cache():
    # A cache rule serves one upstream container registry under its own prefix; the charts come from
    # three OCI registries and two HTTPS Helm repositories (docs/mirrors.md, charts.mirror).
    from eks_gpu_training.config.chart_settings import ChartsConfig

    mirror_doc = ChartsConfig.model_fields["mirror"].description or ""
    assert "an ECR pull-through cache cannot be one" in mirror_doc
    for page in ("README.md", "docs/mirrors.md", "docs/configuration.md"):
        text = " ".join((PROJECT_ROOT / page).read_text().split())
        assert "Harbor or an ECR pull-through cache serves" not in text, page
        assert "as an ECR pull-through cache or Harbor serves" not in text, page
    mirrors = " ".join((PROJECT_ROOT / "docs" / "mirrors.md").read_text().split())
    assert "**An ECR pull-through cache cannot be the mirror.**" in mirrors
