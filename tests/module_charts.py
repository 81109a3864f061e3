"""Charts the reference folder does not hold, packaged from their projects' own sources: the JobSet
and Kubeflow Trainer charts live in their Go modules (``charts/<chart>/``, at the release's tag),
which the Go module proxy serves as zips. The module is the one the local control plane builds the
controller from (its wrapper's ``go.mod`` pins it, its ``go.sum`` holds the zip's hash), so the
chart and the controller the cluster tier runs are one release.

Each zip is fetched as ``go mod download`` fetches it (``$GOPROXY/<module>/@v/<version>.zip``, or
the Go build's own download cache when it holds it), checked against its ``h1:`` hash (Go's
``dirhash.Hash1``, as ``go.sum`` records it), and kept in the build cache outside the repository.
A chart with dependencies is packaged as its release is published: each dependency's chart in its
``charts/`` folder (what ``helm dependency build`` puts there).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from eks_gpu_training.config import JOBSET_CHART_VERSIONS, TRAINER_CHART_VERSIONS
from eks_gpu_training.local import build as builds

DEFAULT_PROXY = "https://proxy.golang.org"
FETCH_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class ModuleChart:
    """A chart inside a Go module."""

    name: str
    module: str
    folder: str
    """The chart's folder inside the module."""
    wrapper: Optional[str] = None
    """The local control plane's wrapper module pinning the module (its go.sum holds the hash)."""


JOBSET = ModuleChart("jobset", "sigs.k8s.io/jobset", "charts/jobset", wrapper="jobset")
TRAINER = ModuleChart("kubeflow-trainer", "github.com/kubeflow/trainer/v2", "charts/kubeflow-trainer", wrapper="kubeflow-trainer")
LWS = ModuleChart("lws", "sigs.k8s.io/lws", "charts/lws")
"""LeaderWorkerSet: a dependency of Trainer's chart (for its data cache, off unless asked)."""

DEPENDENCY_MODULES = {"oci://registry.k8s.io/jobset/charts": JOBSET, "oci://registry.k8s.io/lws/charts": LWS}
"""A chart dependency's repository -> the module its chart is in."""

UNPINNED_HASHES = {("sigs.k8s.io/lws", "v0.8.0"): "h1:DdhJ8QabwTfWgbgaHH2gdf8twliioHaoSfmDXRYEVU0="}
"""Hashes of modules no wrapper's go.sum pins (a chart dependency the control plane does not run):
the ``h1:`` hash of the zip the proxy served (the same function reproduces the wrappers' go.sum
hashes), so a changed zip fails the fetch."""


class ModuleUnavailable(RuntimeError):
    """The module could not be fetched (no proxy reachable); the message says which and why."""


def escaped(module: str) -> str:
    """A module path as the proxy protocol spells it: each capital letter as ``!`` and the letter."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def hash1(archive: bytes) -> str:
    """Go's ``dirhash.Hash1`` of a module zip: SHA-256 over the sorted ``<sha256>  <name>`` lines."""
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        lines = "".join(f"{hashlib.sha256(zipped.read(name)).hexdigest()}  {name}\n"
                        for name in sorted(zipped.namelist()))
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def _pinned_hash(chart: ModuleChart, version: str) -> str:
    if chart.wrapper is not None:
        go_sum = builds.WRAPPERS / chart.wrapper / "go.sum"
        for line in go_sum.read_text().splitlines():
            module, pinned, digest = line.split()
            if module == chart.module and pinned == version:
                return digest
        raise ModuleUnavailable(f"{go_sum} holds no hash of {chart.module} {version}")
    if (chart.module, version) not in UNPINNED_HASHES:
        raise ModuleUnavailable(f"no hash pinned for {chart.module} {version} (UNPINNED_HASHES)")
    return UNPINNED_HASHES[(chart.module, version)]


def _proxies() -> list[str]:
    """The proxies of ``$GOPROXY`` (``go env`` default: proxy.golang.org), skipping ``direct`` and ``off``."""
    setting = os.environ.get("GOPROXY") or DEFAULT_PROXY
    return [p.rstrip("/") for p in re.split(r"[,|]", setting) if p.startswith(("http://", "https://"))]


def _download(module: str, version: str) -> bytes:
    cached = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod") / "cache" / "download" / escaped(module) / "@v" / f"{version}.zip"
    if cached.is_file():
        return cached.read_bytes()
    failures = []
    for proxy in _proxies():
        url = f"{proxy}/{escaped(module)}/@v/{version}.zip"
        try:
            with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as answer:  # noqa: S310 - the Go module proxy's https URL
                return answer.read()
        except OSError as error:
            failures.append(f"{url}: {error}")
    raise ModuleUnavailable(f"{module} {version} could not be fetched: {'; '.join(failures) or 'GOPROXY names no proxy'}")


def module_source(chart: ModuleChart, version: str) -> Path:
    """The module's files at ``version``, unpacked in the build cache (fetched and checked once)."""
    folder = builds.cache_root() / "modules" / f"{escaped(chart.module).replace('/', '+')}@{version}"
    if folder.is_dir():
        return folder
    archive = _download(chart.module, version)
    expected = _pinned_hash(chart, version)
    if hash1(archive) != expected:
        raise ModuleUnavailable(f"{chart.module} {version}: the zip's hash {hash1(archive)} is not the pinned {expected}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as work:
        prefix = f"{chart.module}@{version}/"
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            for name in zipped.namelist():
                target = Path(work) / "source" / name.removeprefix(prefix)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zipped.read(name))
        try:
            (Path(work) / "source").rename(folder)
        except OSError:
            if not folder.is_dir():  # another worker unpacked it first, which is as good
                raise
    return folder


def package_chart(chart: ModuleChart, version: str, destination: Path) -> Path:
    """The chart at ``version`` (module tag ``v<version>``) packaged into ``destination``, its
    dependencies packaged into its ``charts/`` first."""
    import helm_python

    source = module_source(chart, f"v{version}") / chart.folder
    metadata = yaml.safe_load((source / "Chart.yaml").read_text())
    # Some projects stamp the chart's version when they publish it (LeaderWorkerSet's source says
    # 0.1.0, appVersion v0.8.0; its release packages it as 0.8.0): the tag's chart is the release.
    stamped = metadata["version"] != version
    if stamped and metadata.get("appVersion") != f"v{version}":
        raise ModuleUnavailable(f"{chart.module} v{version} holds chart {chart.name} {metadata['version']}, not {version}")
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / chart.name
        shutil.copytree(source, copy)
        for dependency in metadata.get("dependencies") or []:
            module_chart = DEPENDENCY_MODULES.get(dependency["repository"])
            if module_chart is None:
                raise ModuleUnavailable(f"chart {chart.name} depends on {dependency['repository']}, which no module holds here")
            package_chart(module_chart, dependency["version"], copy / "charts")
        return Path(helm_python.package(copy, destination=destination, version=version if stamped else None))


def package_module_charts(destination: Path) -> list[Path]:
    """Every pinned JobSet and Trainer chart, packaged into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    return [package_chart(chart, version, destination)
            for chart, versions in ((JOBSET, JOBSET_CHART_VERSIONS), (TRAINER, TRAINER_CHART_VERSIONS))
            for version in versions]


def pinned_chart_folders() -> list[Path]:
    """The pinned JobSet and Trainer charts' folders, in their modules' sources."""
    return [module_source(chart, f"v{version}") / chart.folder
            for chart, versions in ((JOBSET, JOBSET_CHART_VERSIONS), (TRAINER, TRAINER_CHART_VERSIONS))
            for version in versions]


if __name__ == "__main__":
    # For scripts/generate_package_data.py --chart.
    print("\n".join(str(folder) for folder in pinned_chart_folders()))
