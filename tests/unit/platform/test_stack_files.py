"""One home for stack files (``platform.stack_files``): a stack found by name or path, in the
project's ``stackConfigDir``, its settings read from the project's configuration namespace, by
every command that reads one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from eks_gpu_training import ConfigError
from eks_gpu_training.platform.stack_files import (
    locate_stack,
    project_name,
    stack_file_name,
    stack_names,
)
from eks_gpu_training.verify.stack import load_stack_args
from tests.support.harness import PROJECT_ROOT, stack_config, stack_file

PACKAGE = PROJECT_ROOT / "components"


def acme_project(tmp_path: Path, *, stack_config_dir: str = "config") -> Path:
    """A project named ``acme`` whose dev stack keeps this library's settings under ``acme:`` in
    its own ``stackConfigDir``, with this project's program."""
    project = tmp_path / "acme"
    (project / stack_config_dir).mkdir(parents=True)
    document = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    document.update(name="acme", stackConfigDir=stack_config_dir)
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(document))
    shutil.copy(PROJECT_ROOT / "__main__.py", project / "__main__.py")
    settings = {key.replace("eks-gpu-training:", "acme:"): value for key, value in stack_config("dev").items()}
    (project / stack_config_dir / stack_file_name("dev")).write_text(yaml.safe_dump({"config": settings}))
    return project


def test_a_stack_name_is_found_in_the_projects_stack_config_dir(tmp_path):
    project = acme_project(tmp_path, stack_config_dir="config")
    located = locate_stack("dev", project)
    assert (located.name, located.path, located.project_dir) == ("dev", project / "config" / "Pulumi.dev.yaml", project)
    assert stack_names(project) == ["dev"]
    assert project_name(project) == "acme"


def test_a_stack_files_path_names_its_stack_and_finds_the_project_above_it(tmp_path):
    project = acme_project(tmp_path)
    located = locate_stack(project / "config" / "Pulumi.dev.yaml")
    assert (located.name, located.project_dir) == ("dev", project)


def test_this_projects_stacks_are_listed_from_its_stack_config_dir():
    assert stack_names(PROJECT_ROOT) == ["dev", "prod"]
    assert stack_file("prod", PROJECT_ROOT) == PROJECT_ROOT / "stacks" / "Pulumi.prod.yaml"


def test_the_settings_come_from_the_projects_own_namespace(tmp_path):
    project = acme_project(tmp_path)
    located = locate_stack("dev", project)
    assert located.namespace() == "acme"
    assert located.platform_args() == locate_stack("dev", PROJECT_ROOT).platform_args()
    assert load_stack_args("dev", project) == load_stack_args("dev", PROJECT_ROOT)


def test_the_librarys_namespace_is_read_when_the_project_sets_none_of_its_own(tmp_path):
    project = acme_project(tmp_path)
    (project / "config" / stack_file_name("lib")).write_text(yaml.safe_dump({"config": stack_config("dev")}))
    assert locate_stack("lib", project).namespace() == "eks-gpu-training"


def test_a_name_without_a_project_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        locate_stack("dev")
    assert [p.path for p in error.value.problems] == ["dev"]
    assert "give the stack file's path" in error.value.problems[0].message


def test_render_reads_a_stack_of_a_project_with_its_own_namespace_and_stack_config_dir(tmp_path):
    from eks_gpu_training.offline.render.registrations import render_stack

    project = acme_project(tmp_path)
    acme = render_stack("dev", project_root=project)
    ours = render_stack("dev", project_root=PROJECT_ROOT)
    assert acme.kubernetes_version == ours.kubernetes_version
    assert sorted(r.name for r in acme.resources) == sorted(r.name for r in ours.resources)


def test_the_stack_file_pattern_is_written_once_in_the_package():
    pattern = re.compile(r"""f?["']Pulumi\.(\{|\*|["'])""")
    spelled = [
        f"{path.relative_to(PROJECT_ROOT)}:{number}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "stack_files.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert spelled == []
