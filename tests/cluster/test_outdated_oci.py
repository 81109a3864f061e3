"""``eks-gpu-training-check --outdated`` against an ``oci://`` mirror: charts pushed by Helm's own
client to the CNCF Distribution registry on loopback (built from its Go module, as for the chart
mirror tests), their releases listed from the registry's tags.

Here, not in the unit tier, because the registry is a Go binary; like the rest of this tier, a
machine that can neither find nor build it fails, and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
import semver

from tests.support.chart_mirror import OciChartMirror
from tests.support.go_tools import DISTRIBUTION
from tests.support.harness import PROJECT_ROOT

from eks_gpu_training.local import build as builds
from eks_gpu_training.offline.chart_sources import MIRROR_ENV
from eks_gpu_training.offline.check.__main__ import main as check_main
from eks_gpu_training.offline.check.outdated import pin_sources
from eks_gpu_training.platform.stack_files import locate_stack


def newer_patch(version: str) -> str:
    return ("v" if version.startswith("v") else "") + str(semver.Version.parse(version.removeprefix("v")).bump_patch())


@pytest.fixture(scope="module")
def oci_mirror(tmp_path_factory):
    """Each chart the dev stack pins, at its pin and at the next patch, under ``oci://127.0.0.1:PORT/charts``."""
    import helm_python

    try:
        binary = builds.build(DISTRIBUTION, log=print) / "registry"
    except builds.BuildError as error:
        pytest.fail(f"the outdated tests cannot run: {error}", pytrace=False)
    work = tmp_path_factory.mktemp("outdated-oci")
    pins = {source.chart: source.version for source in pin_sources(locate_stack("dev", PROJECT_ROOT).platform_args(), None)}
    archives: list[Path] = []
    (work / "charts").mkdir()
    for chart, version in pins.items():
        with helm_python.Chart.create(chart, work / "charts"):
            pass
        archives += [Path(helm_python.package(work / "charts" / chart, destination=work / "archives", version=pushed))
                     for pushed in (version, newer_patch(version))]
    mirror = OciChartMirror(binary, work / "registry")
    try:
        mirror.push(archives)
        yield mirror, pins
    finally:
        mirror.stop()


def test_an_oci_mirror_lists_the_newer_patch_of_each_pin_from_its_tags(oci_mirror, capsys, monkeypatch):
    mirror, pins = oci_mirror
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    code = check_main(["--outdated", "dev", "--project-dir", str(PROJECT_ROOT), "--charts-mirror", mirror.url])
    out, err = capsys.readouterr()
    assert (code, err) == (1, "")
    assert out.splitlines()[:-1] == [
        f"{chart} {version}: newer patch on its {'.'.join(version.removeprefix('v').split('.')[:2])} line: "
        f"{newer_patch(version)} ({mirror.url}/{chart})" for chart, version in pins.items()]
