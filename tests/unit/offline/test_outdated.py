"""``eks-gpu-training-check --outdated``: which chart pins have a newer release where the stack's charts
come from, a newer patch on the pin's line apart from a newer line."""

from __future__ import annotations

from pathlib import Path

import pytest
import semver
import yaml

from tests.support.chart_mirror import ChartMirror
from eks_gpu_training.local.processes import free_port
from eks_gpu_training.offline.chart_sources import MIRROR_ENV
from eks_gpu_training.offline.check.__main__ import main as check_main
from eks_gpu_training.offline.check.outdated import PinSource, compare, lists, pin_sources, release_line
from eks_gpu_training.platform.stack_files import locate_stack
from tests.support.harness import PROJECT_ROOT


@pytest.fixture(autouse=True)
def _no_mirror_from_the_environment(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def pin(version: str, chart: str = "karpenter") -> PinSource:
    return PinSource(chart, version, "https://charts.example.com", mirror=True)


def test_a_newer_patch_on_the_pinned_line_is_reported_apart_from_a_newer_line():
    status = compare(pin("1.14.1"), ["1.14.3", "1.14.2", "1.15.0", "1.13.9", "1.14.1"])
    assert (status.newest_on_line, status.newest, status.newer_patch, status.newer_line) == ("1.14.3", "1.15.0", True, True)


def test_a_newer_line_alone_is_not_a_newer_patch():
    status = compare(pin("v26.7.1", "gpu-operator"), ["v26.7.1", "v26.10.0", "v25.10.1"])
    assert (status.newest_on_line, status.newest, status.newer_patch, status.newer_line) == ("v26.7.1", "v26.10.0", False, True)


def test_versions_compare_as_semver_not_as_text():
    status = compare(pin("0.9.2", "kueue"), ["0.10.0", "0.9.10", "0.9.9"])
    assert (status.newest_on_line, status.newest) == ("0.9.10", "0.10.0")


def test_pre_releases_and_tags_that_are_not_semver_are_left_out():
    status = compare(pin("2.4.0", "kubeflow-trainer"), ["2.4.1-rc.0", "2.5.0-alpha.1", "latest", "sha256-abc.sig", "2.4.0"])
    assert (status.newest_on_line, status.newest, status.newer_patch, status.newer_line) == ("2.4.0", "2.4.0", False, False)


def test_the_line_is_the_major_and_minor():
    assert release_line("v26.7.1") == (26, 7)


def test_a_current_pin_says_so_and_a_behind_one_names_both_releases():
    current = compare(pin("1.14.3"), ["1.14.3", "1.14.2"])
    behind = compare(pin("1.14.1"), ["1.14.3", "1.15.0"])
    assert (current.describe(), behind.describe()) == (
        "karpenter 1.14.3: newest (https://charts.example.com)",
        "karpenter 1.14.1: newer patch on its 1.14 line: 1.14.3; newer line: 1.15.0 (https://charts.example.com)",
    )


def dev_args():
    return locate_stack("dev", PROJECT_ROOT).platform_args()


def test_each_pin_is_listed_where_a_pull_would_take_it_from():
    args = dev_args()
    upstream = {source.chart: source.location for source in pin_sources(args, None)}
    helm_mirror = {source.location for source in pin_sources(args, "https://mirror.example.com/charts")}
    oci_mirror = {source.chart: source.location for source in pin_sources(args, "oci://mirror.example.com/charts")}
    assert (upstream["gpu-operator"], upstream["kueue"]) == (
        "https://helm.ngc.nvidia.com/nvidia", "oci://registry.k8s.io/kueue/charts/kueue")
    assert helm_mirror == {"https://mirror.example.com/charts"}
    assert oci_mirror == {chart: f"oci://mirror.example.com/charts/{chart}" for chart in upstream}


def index_entry(chart: str, version: str) -> dict:
    return {"apiVersion": "v2", "name": chart, "version": version, "appVersion": version.lstrip("v"),
            "created": "2026-01-01T00:00:00Z", "digest": "0" * 64, "urls": [f"{chart}-{version}.tgz"]}


def serve_index(folder: Path, versions: dict[str, list[str]]) -> ChartMirror:
    """A Helm repository on loopback whose ``index.yaml`` lists ``versions`` of each chart."""
    index = {"apiVersion": "v1", "generated": "2026-01-01T00:00:00Z",
             "entries": {chart: [index_entry(chart, v) for v in listed] for chart, listed in versions.items()}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.yaml").write_text(yaml.safe_dump(index))
    return ChartMirror(folder)


def bumped(version: str, part: str) -> str:
    prefix = "v" if version.startswith("v") else ""
    return prefix + str(getattr(semver.Version.parse(version.removeprefix("v")), f"bump_{part}")())


def run_outdated(capsys, mirror: str) -> tuple[int, list[str], list[str]]:
    code = check_main(["--outdated", "dev", "--project-dir", str(PROJECT_ROOT), "--charts-mirror", mirror])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_a_mirror_with_newer_releases_lists_each_pin_behind_and_exits_1(tmp_path, capsys):
    pins = {source.chart: source.version for source in pin_sources(dev_args(), None)}
    versions = {chart: [version, bumped(version, "patch"), bumped(version, "minor"), bumped(version, "minor") + "-rc.1"]
                for chart, version in pins.items()}
    mirror = serve_index(tmp_path / "repo", versions)
    try:
        code, out, err = run_outdated(capsys, mirror.url)
    finally:
        mirror.stop()
    kueue = pins["kueue"]
    assert code == 1, err
    assert (f"kueue {kueue}: newer patch on its {'.'.join(map(str, release_line(kueue)))} line: {bumped(kueue, 'patch')}; "
            f"newer line: {bumped(kueue, 'minor')} ({mirror.url})") in out
    assert out[-1] == f"outdated: {len(pins)} pin(s) listed, {len(pins)} with a newer release, 0 source(s) unreadable"


def test_a_mirror_with_nothing_newer_exits_0(tmp_path, capsys):
    pins = {source.chart: source.version for source in pin_sources(dev_args(), None)}
    mirror = serve_index(tmp_path / "repo", {chart: [version] for chart, version in pins.items()})
    try:
        code, out, err = run_outdated(capsys, mirror.url)
    finally:
        mirror.stop()
    assert (code, err) == (0, [])
    assert out[:-1] == [f"{chart} {version}: newest ({mirror.url})" for chart, version in pins.items()]


def test_a_pin_the_index_does_not_list_is_named_and_exits_2(tmp_path, capsys):
    pins = {source.chart: source.version for source in pin_sources(dev_args(), None)}
    versions = {chart: [version] for chart, version in pins.items() if chart != "kueue"}
    mirror = serve_index(tmp_path / "repo", {**versions, "kueue": [bumped(pins["kueue"], "patch")]})
    try:
        code, _, err = run_outdated(capsys, mirror.url)
    finally:
        mirror.stop()
    assert (code, err) == (2, [f"outdated: {mirror.url}: lists no kueue {pins['kueue']} (the pin) among 1 release(s) of it"])


def test_the_pin_is_found_among_the_listed_releases_as_semver():
    assert (lists(["26.7.1", "latest"], "v26.7.1"), lists(["v26.7.2"], "v26.7.1")) == (True, False)


def test_an_unreachable_helm_repository_is_one_line_without_a_traceback_and_exits_2(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run_outdated(capsys, url)
    charts = ", ".join(source.chart for source in pin_sources(dev_args(), url))
    assert (code, len(err)) == (2, 1)
    assert err[0].startswith(f"outdated: {url}: could not list the releases of {charts}: ")
    assert "Traceback" not in "\n".join(out + err)


def test_an_unreachable_oci_mirror_is_one_line_per_chart_and_exits_2(capsys):
    prefix = f"oci://127.0.0.1:{free_port()}/charts"
    code, _, err = run_outdated(capsys, prefix)
    charts = [source.chart for source in pin_sources(dev_args(), prefix)]
    assert code == 2
    assert [line.split(": could not")[0] for line in err] == [f"outdated: {prefix}/{chart}" for chart in charts]
