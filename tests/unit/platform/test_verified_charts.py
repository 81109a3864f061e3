"""`pulumi up` installs only the chart archives ``charts.lock`` records: with a lock beside the stack
files, each pinned archive is got and checked before any Release registers, and the Release takes
it by path; a different digest, a chart without an entry and an unpacked folder are refused. The
mirror's settings: ``http://`` only on loopback or when allowed, credentials never in its URL and
only as secrets, and never in a resource's inputs."""

from __future__ import annotations

import tarfile
import traceback
from pathlib import Path

import helm_python
import pytest
import yaml

from tests.support.chart_mirror import ChartMirror
from eks_gpu_training import ConfigError
from eks_gpu_training.addons.chart_archives import LOCK_FILE, ChartLock, archive_digest, lock_key
from eks_gpu_training.addons.chart_source import chart_name
from eks_gpu_training.config.chart_settings import ChartsConfig, chart_mirror_problems
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.releases import stack_charts
from eks_gpu_training.platform.verified_charts import project_lock, verified_chart_folder
from tests.support.harness import PROJECT_ROOT, run_main, stack_config

PROJECT = "eks-gpu-training"
RELEASE = "kubernetes:helm.sh/v3:Release"


def archive(folder: Path, name: str, version: str, note: str = "") -> Path:
    """A chart archive as `helm package` writes it: ``<name>/Chart.yaml`` (and a changed file when
    ``note`` is given: the same chart and version, other bytes)."""
    source = folder.parent / f"{folder.name}-sources" / f"{name}-{version}{'-changed' if note else ''}" / name
    source.mkdir(parents=True)
    (source / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    if note:
        (source / "NOTES.txt").write_text(note)
    target = folder / f"{name}-{version}.tgz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(source, arcname=name)
    return target


def project_with_lock(root: Path, digests: dict[str, str]) -> Path:
    """A project folder (``Pulumi.yaml`` with ``stackConfigDir: stacks``) whose lock holds ``digests``."""
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text(yaml.safe_dump({"name": PROJECT, "runtime": "python", "stackConfigDir": "stacks"}))
    ChartLock(root / "stacks" / LOCK_FILE, digests).write()
    return root


@pytest.fixture
def prod_charts(tmp_path) -> tuple[dict, Path, dict[str, str]]:
    """Prod's settings with every chart it installs as an archive in ``charts.directory``, and their digests."""
    config = stack_config("prod")
    folder = tmp_path / "charts"
    folder.mkdir()
    digests = {lock_key(chart, version): archive_digest(archive(folder, chart_name(chart), version))
               for chart, version in stack_charts(platform_args_from_settings(config))}
    config[f"{PROJECT}:charts"] = {"directory": str(folder)}
    return config, folder, digests


def test_with_a_lock_every_release_installs_its_checked_archive_by_path(tmp_path, monkeypatch):
    from eks_gpu_training.addons.chart_archives import CACHE_ENV

    config = stack_config("prod")
    pins = [(chart_name(chart), version) for chart, version in stack_charts(platform_args_from_settings(config))]
    mirror = mirror_of(tmp_path / "mirror", pins)
    digests = {f"{name}-{version}": archive_digest(tmp_path / "mirror" / f"{name}-{version}.tgz") for name, version in pins}
    config[f"{PROJECT}:charts"] = {"mirror": mirror.url}
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(project_with_lock(tmp_path / "project", digests))
    try:
        graph = run_main(config, project_root=PROJECT_ROOT)
    finally:
        mirror.stop()
    assert graph.error is None, "".join(traceback.format_exception(graph.error))
    releases = graph.of_type(RELEASE)
    assert len(releases) == len(digests)
    for release in releases:
        # A path and nothing else: Helm installs the file as it is and fetches no chart.
        assert "repositoryOpts" not in release.inputs
        assert "version" not in release.inputs
        assert Path(release.inputs["chart"]).parent == tmp_path / "cache"
        assert archive_digest(Path(release.inputs["chart"])) in digests.values()


def test_an_archive_with_other_bytes_than_the_lock_records_registers_nothing(prod_charts, tmp_path, monkeypatch):
    config, folder, digests = prod_charts
    reviewed = next(key for key in digests if key.startswith("gpu-operator-"))
    version = reviewed.removeprefix("gpu-operator-")
    (folder / f"{reviewed}.tgz").unlink()
    served = archive_digest(archive(folder, "gpu-operator", version, note="another archive"))
    monkeypatch.chdir(project_with_lock(tmp_path / "project", digests))
    graph = run_main(config, project_root=PROJECT_ROOT)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    [problem] = graph.error.problems
    assert problem.path == f"charts.lock[{reviewed}]"
    assert served in problem.message
    assert digests[reviewed] in problem.message
    assert f"gpu-operator {version}" in problem.message


def test_a_chart_the_lock_has_no_entry_for_is_refused(prod_charts, tmp_path, monkeypatch):
    config, _, digests = prod_charts
    unlisted = next(key for key in digests if key.startswith("kueue-"))
    monkeypatch.chdir(project_with_lock(tmp_path / "project", {k: v for k, v in digests.items() if k != unlisted}))
    graph = run_main(config, project_root=PROJECT_ROOT)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [p.path for p in graph.error.problems] == [f"charts.lock[{unlisted}]"]
    assert "has no entry for kueue" in graph.error.problems[0].message


def test_an_unpacked_chart_folder_cannot_be_checked_and_is_refused(tmp_path):
    config = stack_config("dev")
    folder = tmp_path / "charts"
    folder.mkdir()
    config[f"{PROJECT}:charts"] = {"directory": str(folder)}
    pins = [(chart_name(chart), version) for chart, version in stack_charts(platform_args_from_settings(stack_config("dev")))]
    digests = {}
    for name, version in pins:
        digests[f"{name}-{version}"] = archive_digest(archive(folder, name, version))
    first_name, first_version = pins[0]
    (folder / f"{first_name}-{first_version}.tgz").unlink()
    unpacked = folder / f"{first_name}-{first_version}"
    unpacked.mkdir()
    (unpacked / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": first_name, "version": first_version}))
    args = platform_args_from_settings(config)
    _, problems = verified_chart_folder(args, ChartLock(tmp_path / LOCK_FILE, digests))
    assert [(p.path, "is an unpacked chart" in p.message) for p in problems] == [("charts.directory", True)]


def mirror_of(folder: Path, charts: list[tuple[str, str]], note: str = "") -> ChartMirror:
    """A Helm repository on loopback serving ``charts`` (their archives, with ``note`` when given)."""
    folder.mkdir(parents=True)
    for name, version in charts:
        archive(folder, name, version, note)
    helm_python.repo_index_generate(folder)
    return ChartMirror(folder)


def test_a_pulled_archive_is_kept_and_installed_only_when_its_digest_is_the_locks(tmp_path):
    config = stack_config("dev")
    args = platform_args_from_settings(config)
    pins = [(chart_name(chart), version) for chart, version in stack_charts(args)]
    reviewed = mirror_of(tmp_path / "reviewed", pins)
    other = mirror_of(tmp_path / "other", pins, note="served under the same version")
    try:
        digests = {f"{name}-{version}": archive_digest(tmp_path / "reviewed" / f"{name}-{version}.tgz") for name, version in pins}
        lock = ChartLock(tmp_path / LOCK_FILE, digests)
        refused_cache = tmp_path / "cache-a"
        tampered = args.model_copy(update={"charts": ChartsConfig(mirror=other.url)})
        folder, problems = verified_chart_folder(tampered, lock, cache=refused_cache)
        assert len(problems) == len(pins)
        assert all(f"the mirror {other.url} holds" in p.message for p in problems)
        assert list(refused_cache.glob("*.tgz")) == []  # nothing the lock refuses is kept
        cache = tmp_path / "cache-b"
        folder, problems = verified_chart_folder(args.model_copy(update={"charts": ChartsConfig(mirror=reviewed.url)}), lock, cache=cache)
        assert problems == []
        assert folder == str(cache)
        assert {archive_digest(p) for p in cache.glob("*.tgz")} == set(digests.values())
    finally:
        reviewed.stop()
        other.stop()


def test_without_a_lock_the_releases_keep_their_sources(tmp_path, monkeypatch):
    args = platform_args_from_settings(stack_config("dev"))
    project_with_lock(tmp_path / "project", {})
    (tmp_path / "project" / "stacks" / LOCK_FILE).unlink()
    monkeypatch.chdir(tmp_path / "project")
    assert project_lock() is None
    assert verified_chart_folder(args, None) == (None, [])


@pytest.mark.parametrize(("charts", "paths"), [
    ({"mirror": "http://charts.corp.example/helm"}, ["charts.mirror"]),
    ({"mirror": "http://charts.corp.example/helm", "allowInsecureMirror": True}, []),
    ({"mirror": "http://127.0.0.1:8080"}, []),
    ({"mirror": "http://localhost:8080"}, []),
    ({"mirror": "https://deploy:token@charts.corp.example/helm"}, ["charts.mirror"]),
    ({"mirror": "https://charts.corp.example/helm", "mirrorUsername": "deploy"}, ["charts.mirrorPassword"]),
    ({"mirrorCaFile": "corp-ca.pem"}, ["charts.mirrorCaFile"]),
    ({"mirror": "https://charts.corp.example/helm", "mirrorCaFile": "corp-ca.pem"}, []),
])
def test_mirror_settings_are_refused_or_allowed(charts, paths):
    assert [p.path for p in chart_mirror_problems(ChartsConfig.model_validate(charts))] == paths


def test_a_mirror_password_in_plain_text_is_refused_and_a_secret_one_accepted():
    config = stack_config("dev")
    config[f"{PROJECT}:charts"] = {"mirror": "https://charts.corp.example/helm", "mirrorUsername": "deploy",
                                   "mirrorPassword": "s3cr3t-token"}
    with pytest.raises(ConfigError) as refused:
        platform_args_from_settings(config)
    assert [p.path for p in refused.value.problems] == ["charts.mirrorUsername", "charts.mirrorPassword"]
    args = platform_args_from_settings(config, secret_keys=[f"{PROJECT}:charts"])
    assert (args.charts.mirror_username, args.charts.mirror_password) == ("deploy", "s3cr3t-token")
    # A stack file read without its passphrase (the offline tools) holds the ciphertext: not read there.
    encrypted = {**config, f"{PROJECT}:charts": {"mirror": "https://charts.corp.example/helm",
                                                 "mirrorUsername": {"secure": "v1:abc"}, "mirrorPassword": {"secure": "v1:def"}}}
    assert platform_args_from_settings(encrypted).charts.mirror_password is None


def test_a_mirror_with_credentials_is_pulled_from_by_the_program_and_they_reach_no_resource_input(tmp_path, monkeypatch):
    from eks_gpu_training import GpuTrainingPlatform
    from eks_gpu_training.addons.chart_archives import CACHE_ENV
    from tests.support.harness import run_program

    config = stack_config("prod")
    pins = [(chart_name(chart), version) for chart, version in stack_charts(platform_args_from_settings(config))]
    mirror = mirror_of(tmp_path / "mirror", pins)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    try:
        config[f"{PROJECT}:charts"] = {"mirror": mirror.url, "mirrorUsername": "deploy-user-7", "mirrorPassword": "s3cr3t-token-9"}
        args = platform_args_from_settings(config, secret_keys=[f"{PROJECT}:charts"])
        graph = run_program(lambda: GpuTrainingPlatform("gpu-training", args))
    finally:
        mirror.stop()
    assert graph.error is None, "".join(traceback.format_exception(graph.error))
    # No lock here: the program pulls with the credentials Helm in the provider would not have.
    assert {Path(r.inputs["chart"]).parent for r in graph.of_type(RELEASE)} == {tmp_path / "cache"}
    text = repr([(r.inputs, r.name) for r in graph.resources])
    assert "s3cr3t-token-9" not in text
    assert "deploy-user-7" not in text


def test_the_mirror_ca_bundle_is_handed_to_helms_client(tmp_path):
    # A CA file that cannot be read fails the pull before any connection: Helm's client was given it.
    config = stack_config("dev")
    config[f"{PROJECT}:charts"] = {"mirror": "https://127.0.0.1:9", "mirrorCaFile": str(tmp_path / "absent-ca.pem")}
    folder, problems = verified_chart_folder(platform_args_from_settings(config), None, cache=tmp_path / "cache")
    assert folder == str(tmp_path / "cache")
    assert problems
    assert all("can't read CA file" in p.message and "absent-ca.pem" in p.message for p in problems)
