"""The package as another project gets it: `pip install`ed, imported as ``eks_gpu_training`` beside
the project's own ``components/`` folder, with everything it needs at run time inside it."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.harness import PROJECT_ROOT

tomllib = pytest.importorskip("tomllib", reason="tomllib (Python 3.11+) reads pyproject.toml")

CONSUMER_PROGRAM = """
import pathlib, sys
import components
from components.network import vpc_name
import eks_gpu_training
from eks_gpu_training import ClusterRef, GpuNodeGroup, GpuTrainingPlatform, NetworkConfig, SubnetConfig
from eks_gpu_training.aws import labeler_image

installed = pathlib.Path(eks_gpu_training.__file__).parent
assert vpc_name() == "consumer-vpc", vpc_name()
assert installed.parent == pathlib.Path(sys.argv[1]), installed
assert (installed / "py.typed").is_file()
assert labeler_image.LABELER_DIR == installed / "labeler"
assert labeler_image.build_context_files() and (installed / "labeler" / "Dockerfile").is_file()
# The facts the offline tools read ship inside the package (scripts/generate_package_data.py).
from eks_gpu_training.local import instance_types
from eks_gpu_training.offline import agent_data
assert instance_types.instance_type("p5.48xlarge").allocatable["nvidia.com/gpu"] == "8"
assert agent_data.DATA.is_relative_to(installed) and agent_data.reasons()
from eks_gpu_training.facts import images
assert images.chart_images("kueue", "0.19.2")
print(labeler_image.build_context_tag())
"""


def _can_build_wheels_offline() -> bool:
    version = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
    return version >= (70, 1)


@pytest.fixture(scope="module")
def installed_package(tmp_path_factory):
    """This repository `pip install`ed (not editable) into a folder of its own."""
    if not _can_build_wheels_offline():
        pytest.skip("setuptools < 70.1 cannot build the wheel offline; reinstall the test extras (pip install -e '.[test]')")
    # Built from a copy of what the package is made of, so the build leaves nothing in the checkout
    # (setuptools writes build/ beside the sources) and no earlier build leaks into this one.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, source / name)
    shutil.copytree(PROJECT_ROOT / "components", source / "components", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path_factory.mktemp("site-packages")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
        cwd=target,
    )
    return target


def test_a_project_with_its_own_components_package_imports_the_installed_library(installed_package, tmp_path):
    consumer = tmp_path / "acme-platform"
    (consumer / "components").mkdir(parents=True)
    (consumer / "components" / "__init__.py").write_text("")
    (consumer / "components" / "network.py").write_text("def vpc_name():\n    return 'consumer-vpc'\n")
    (consumer / "__main__.py").write_text(CONSUMER_PROGRAM)
    # The installed copy comes first on the path, ahead of this checkout's editable install.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(consumer), str(installed_package)])}
    result = subprocess.run(
        [sys.executable, str(consumer / "__main__.py"), str(installed_package)], cwd=consumer, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    from eks_gpu_training.aws import labeler_image

    # The installed labeler sources are the ones the image is built from here.
    assert result.stdout.strip() == labeler_image.build_context_tag()


def test_every_subpackage_is_listed_for_installation():
    configured = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    source = PROJECT_ROOT / configured["package-dir"]["eks_gpu_training"]
    on_disk = {
        ".".join(("eks_gpu_training", *init.parent.relative_to(source).parts))
        for init in source.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert set(configured["packages"]) == on_disk
