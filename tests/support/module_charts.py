"""Charts the reference folder does not hold, packaged from their projects' own sources: the JobSet
and Kubeflow Trainer charts live in their Go modules (``charts/<chart>/``, at the release's tag),
which the Go module proxy serves as zips. The module is the one the local control plane builds the
controller from (its wrapper's ``go.mod`` pins it, its ``go.sum`` holds the zip's hash), so the
chart and the controller the cluster tier runs are one release. Karpenter's ``karpenter`` and
``karpenter-crd`` charts after the reference's 1.14.1 come the same way from
``github.com/aws/karpenter-provider-aws``, prepared as its release script publishes them
(``KARPENTER``).

Each zip is fetched as ``go mod download`` fetches it (``$GOPROXY/<module>/@v/<version>.zip``, or
the Go build's own download cache when it holds it), checked against its ``h1:`` hash (Go's
``dirhash.Hash1``, as ``go.sum`` records it), and kept in the build cache outside the repository.
A chart with dependencies is packaged as its release is published: each dependency's chart in its
``charts/`` folder (what ``helm dependency build`` puts there).
"""

from __future__ import annotations

import base64
import contextlib
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
from typing import Callable, Optional

import yaml

from eks_gpu_training.config import JOBSET_CHART_VERSIONS, KARPENTER_CHART_VERSIONS, TRAINER_CHART_VERSIONS
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
    links: tuple[tuple[str, str], ...] = ()
    """Folders of the chart that are symbolic links in the project's repository, which a module zip
    does not hold (Go leaves symbolic links out of module zips): (the folder inside the chart, the
    module folder it links to). The chart is prepared with that folder's files in their place, as a
    checkout of the tag has them."""
    publish: Optional[Callable[[Path, str], None]] = None
    """What the project's release does to the chart folder before it packages it at a version
    (stamps the version, names the release's image), applied to a copy; None: the tag's chart is
    the release."""


JOBSET = ModuleChart("jobset", "sigs.k8s.io/jobset", "charts/jobset", wrapper="jobset")
TRAINER = ModuleChart("kubeflow-trainer", "github.com/kubeflow/trainer/v2", "charts/kubeflow-trainer", wrapper="kubeflow-trainer")
LWS = ModuleChart("lws", "sigs.k8s.io/lws", "charts/lws")
"""LeaderWorkerSet: a dependency of Trainer's chart (for its data cache, off unless asked)."""

KARPENTER_MODULE = "github.com/aws/karpenter-provider-aws"
KARPENTER_IMAGE = "public.ecr.aws/karpenter/controller"
"""The controller image the release publishes: ``ko publish ./cmd/controller`` to
``public.ecr.aws/karpenter/`` (``hack/release/common.sh``, ``RELEASE_REPO_ECR``)."""


def _set_scalar(text: str, key: str, old: str, new: str) -> str:
    """``text`` with the one line ``<indent><key>: <old>`` set to ``new``, comments and layout kept
    (as ``yq e -i`` keeps them)."""
    pattern = re.compile(rf"^(\s*{re.escape(key)}: ){re.escape(old)}$", re.MULTILINE)
    if len(pattern.findall(text)) != 1:
        raise ModuleUnavailable(f"expected one line '{key}: {old}' to set to {new!r}")
    return pattern.sub(lambda m: m.group(1) + new, text)


def publish_karpenter_chart(folder: Path, version: str) -> None:
    """Karpenter's release (``hack/release/common.sh`` at the tag: ``build`` and
    ``publishHelmChart``) sets ``version`` and ``appVersion`` in each chart's Chart.yaml (the tag's
    say the previous minor, 1.13.0) and, in the controller chart's values, ``controller.image``'s
    repository, tag and digest from ``ko publish``'s output. The digest is the one the registry gave
    the pushed image, which no source file records: the prepared chart names the image by its tag
    (digest empty, which the chart's ``karpenter.controller.image`` helper allows) rather than keep
    the tag's digest, which is the previous release's image."""
    chart = folder / "Chart.yaml"
    metadata = yaml.safe_load(chart.read_text())
    text = _set_scalar(chart.read_text(), "version", str(metadata["version"]), version)
    chart.write_text(_set_scalar(text, "appVersion", str(metadata["appVersion"]), version))
    if metadata["name"] != "karpenter":
        return
    values_file = folder / "values.yaml"
    image = yaml.safe_load(values_file.read_text())["controller"]["image"]
    if image["repository"] != KARPENTER_IMAGE:
        raise ModuleUnavailable(f"karpenter {version}: controller.image.repository is {image['repository']}, not {KARPENTER_IMAGE}")
    text = _set_scalar(values_file.read_text(), "tag", str(image["tag"]), version)
    values_file.write_text(_set_scalar(text, "digest", str(image["digest"]), '""'))


KARPENTER = ModuleChart(
    "karpenter", KARPENTER_MODULE, "charts/karpenter",
    # charts/karpenter/crds is a link to ../../pkg/apis/crds (the CRDs `make verify` generates);
    # charts/karpenter-crd/templates are copies of them with Helm annotations added, real files
    # the zip holds. With the link resolved the chart has the reference 1.14.1 chart's layout.
    links=(("crds", "pkg/apis/crds"),),
    publish=publish_karpenter_chart,
)
KARPENTER_CRD = ModuleChart("karpenter-crd", KARPENTER_MODULE, "charts/karpenter-crd", publish=publish_karpenter_chart)
KARPENTER_REFERENCE_VERSIONS = ("1.14.1",)
"""Karpenter chart versions the reference folder holds (``charts/karpenter-<version>``); the
others of ``KARPENTER_CHART_VERSIONS`` are prepared from the module."""

DEPENDENCY_MODULES = {"oci://registry.k8s.io/jobset/charts": JOBSET, "oci://registry.k8s.io/lws/charts": LWS}
"""A chart dependency's repository -> the module its chart is in."""

UNPINNED_HASHES = {
    ("sigs.k8s.io/lws", "v0.8.0"): "h1:DdhJ8QabwTfWgbgaHH2gdf8twliioHaoSfmDXRYEVU0=",
    # As `go mod download -json` reports it, checked against the checksum database (sum.golang.org).
    (KARPENTER_MODULE, "v1.14.3"): "h1:XS61hMCoPL0sXWh5JtJeyTCZLN5Y1So1uNU70pmLccY=",
}
"""Hashes of modules no wrapper's go.sum pins (a chart dependency the control plane does not run,
Karpenter's AWS provider whose core alone the control plane builds): the ``h1:`` hash of the zip
the proxy served (the same function reproduces the wrappers' go.sum hashes), so a changed zip fails
the fetch."""


class ModuleUnavailable(RuntimeError):
    """The module could not be had (not fetched, or not the pinned zip); the message says which and why."""


class ProxyUnreachable(ModuleUnavailable):
    """No proxy of ``$GOPROXY`` served the module (none reachable, or each refused it)."""


@contextlib.contextmanager
def proxy_or_skip():
    """For tests: a module no proxy serves here skips the test with the reason; a zip whose hash
    is not the pinned one still fails it."""
    import pytest

    try:
        yield
    except ProxyUnreachable as error:
        pytest.skip(f"the Go module proxy did not serve a chart's module: {error}")


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
    raise ProxyUnreachable(f"{module} {version} could not be fetched: {'; '.join(failures) or 'GOPROXY names no proxy'}")


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


def chart_folder(chart: ModuleChart, version: str) -> Path:
    """The chart's folder at ``version`` (module tag ``v<version>``): the module's own when the tag's
    chart is the release, else a copy in the build cache with its linked folders filled in and the
    release's changes made (``ModuleChart.links``, ``ModuleChart.publish``), made once from the
    checked module."""
    source = module_source(chart, f"v{version}")
    if not chart.links and chart.publish is None:
        return source / chart.folder
    folder = builds.cache_root() / "module-charts" / f"{chart.name}-{version}"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as work:
        copy = Path(work) / chart.name
        shutil.copytree(source / chart.folder, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        for inside, target in chart.links:
            if (copy / inside).exists():
                raise ModuleUnavailable(f"{chart.module} v{version} holds {chart.folder}/{inside}; it was a link to {target}")
            shutil.copytree(source / target, copy / inside)
        if chart.publish is not None:
            chart.publish(copy, version)
        try:
            copy.rename(folder)
        except OSError:
            if not folder.is_dir():  # another worker prepared it first, which is as good
                raise
    return folder


def karpenter_chart_folder(reference: Path, name: str, version: str) -> Path:
    """The ``karpenter`` or ``karpenter-crd`` chart's folder at ``version``: the reference folder's
    (``charts/<name>-<version>``) for the versions it holds, else prepared from the module."""
    if version in KARPENTER_REFERENCE_VERSIONS:
        return reference / "charts" / f"{name}-{version}"
    return chart_folder({KARPENTER.name: KARPENTER, KARPENTER_CRD.name: KARPENTER_CRD}[name], version)


def package_chart(chart: ModuleChart, version: str, destination: Path) -> Path:
    """The chart at ``version`` (module tag ``v<version>``) packaged into ``destination``, its
    dependencies packaged into its ``charts/`` first."""
    import helm_python

    source = chart_folder(chart, version)
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


def pinned_module_charts() -> list[tuple[ModuleChart, str]]:
    """(chart, version) of every pinned chart the reference folder lacks: JobSet's, Trainer's, and
    Karpenter's two at each version besides the reference's."""
    karpenter = [version for version in KARPENTER_CHART_VERSIONS if version not in KARPENTER_REFERENCE_VERSIONS]
    return [(chart, version)
            for chart, versions in ((JOBSET, JOBSET_CHART_VERSIONS), (TRAINER, TRAINER_CHART_VERSIONS),
                                    (KARPENTER_CRD, karpenter), (KARPENTER, karpenter))
            for version in versions]


def images_named_by_tag() -> set[str]:
    """``repository:tag`` of each image a prepared chart names by tag where its published release
    names it by digest (``publish_karpenter_chart``: a digest no source records). A test of digest
    pinning excludes exactly these, since the chart's default digest is what pins them for a user."""
    return {f"{KARPENTER_IMAGE}:{version}" for chart, version in pinned_module_charts() if chart is KARPENTER}


def package_module_charts(destination: Path) -> list[Path]:
    """Every pinned chart the reference folder lacks (``pinned_module_charts``), packaged into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    return [package_chart(chart, version, destination) for chart, version in pinned_module_charts()]


def pinned_chart_folders() -> list[Path]:
    """The folders of every pinned chart the reference folder lacks, as their releases package them."""
    return [chart_folder(chart, version) for chart, version in pinned_module_charts()]


if __name__ == "__main__":
    # For scripts/generate_package_data.py --chart.
    print("\n".join(str(folder) for folder in pinned_chart_folders()))
