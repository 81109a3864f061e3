"""Charts from an ``oci://`` mirror: the pinned charts pushed by Helm's own client to a real OCI
registry on loopback (the CNCF Distribution registry, built from its Go module like the control
plane), and the chart client pulling every release's chart from there, as it does from the HTTP
mirror the rest of the tests use.

Here, not in the unit tier, because the registry is a Go binary; like the rest of this tier, a
machine that can neither find nor build it fails, and says why."""

from __future__ import annotations

import pytest

from tests.support.chart_mirror import OciChartMirror, package_charts, render_with_stack_mirror
from tests.support.go_tools import DISTRIBUTION
from tests.support.harness import REFERENCE

from eks_gpu_training.local import build as builds
from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.chart_sources import ChartSources, ChartUnavailable, chart_name


@pytest.fixture(scope="module")
def oci_mirror(tmp_path_factory):
    """Every chart of the reference folder, packaged by Helm, in the registry on 127.0.0.1 under
    ``oci://127.0.0.1:PORT/charts``; the registry is stopped by its pid however the tests end."""
    if not REFERENCE.is_dir():
        pytest.fail(f"the OCI mirror tests cannot run: no reference charts at {REFERENCE} to push", pytrace=False)
    try:
        registry = builds.build(DISTRIBUTION, log=print) / "registry"
    except builds.BuildError as error:
        pytest.fail(f"the OCI mirror tests cannot run: {error}", pytrace=False)
    work = tmp_path_factory.mktemp("oci-mirror")
    archives = package_charts(REFERENCE, work / "packaged")
    mirror = OciChartMirror(registry, work / "registry")
    try:
        mirror.push(archives)
        yield mirror
    finally:
        mirror.stop()


def _pulled_from(mirror: OciChartMirror, summary) -> list[str]:
    """What ``ChartSources.pulled`` says when every chart of ``summary`` came from ``mirror``."""
    return sorted(f"{chart_name(c.chart)} {c.version} from the mirror {mirror.url}/{chart_name(c.chart)}"
                  for c in summary.charts)


def test_the_stacks_oci_charts_mirror_alone_supplies_every_chart(oci_mirror, tmp_path, monkeypatch):
    """No mirror set for the run and an empty cache: the stack's ``charts.mirror: oci://...``
    supplies every chart of prod, the add-on's too, each pulled from the registry, and the render
    passes ``check``. (A mirror given for the run takes the same path: it replaces the stack's.)"""
    sources, summary = render_with_stack_mirror(oci_mirror.url, tmp_path, monkeypatch)
    assert sorted(sources.pulled) == _pulled_from(oci_mirror, summary)
    report = check_render(tmp_path / "out")
    assert report.ok, report.failures


def test_a_chart_version_the_oci_mirror_lacks_is_unavailable_naming_the_chart_and_the_mirror(oci_mirror, tmp_path):
    sources = ChartSources(cache=tmp_path, mirror=oci_mirror.url)
    with pytest.raises(ChartUnavailable) as refused:
        sources.locate("gpu-operator", "v99.0.0", "https://helm.ngc.nvidia.com/nvidia")
    message = str(refused.value)
    assert message.startswith(f"chart gpu-operator v99.0.0: not in the cache ({tmp_path}), and the mirror "
                              f"{oci_mirror.url}/gpu-operator could not supply it (")
    assert f"{oci_mirror.url.removeprefix('oci://')}/gpu-operator:v99.0.0: not found)" in message  # the registry's answer
    assert "supply it with charts.directory" in message
    assert sources.pulled == []
    assert not list(tmp_path.glob("*.tgz"))
