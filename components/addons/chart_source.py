"""Where a Helm release takes its chart from: the chart's repository, a mirror holding every pinned
chart under its own name (``charts.mirror``), or a local chart folder or archive
(``charts.directory``) for a deployer that cannot reach the repositories. Helm runs in the
Kubernetes provider, where `pulumi up` runs, so that is where the chart is read; the cluster never
fetches one, and its nodes pull the charts' images from their registries as before.

A local chart counts only if its own ``Chart.yaml`` names the chart and the pinned version, so a
stale or mislabelled copy is refused before anything is created, not installed in its place.
Helm installs a local path as it is, without comparing versions (helm.sh/docs/helm/helm_install:
"a path to an unpacked chart directory" or "a path to a packaged chart"), which is why the check
is ours to make.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any, Optional

import pulumi_kubernetes as k8s

from ..facts import yaml_io
from ..config import ConfigError, Problem
from ..config.chart_settings import MIRROR_SCHEMES


def chart_name(chart: str) -> str:
    """``oci://public.ecr.aws/karpenter/karpenter`` or ``gpu-operator`` -> the chart's name."""
    return chart.rstrip("/").rsplit("/", 1)[-1]


def _candidates(directory: Path, name: str, version: str) -> list[Path]:
    bare = version.lstrip("v")
    stems = (f"{name}-{bare}", f"{name}-v{bare}")
    return [directory / stem for stem in stems] + [directory / f"{stem}.tgz" for stem in stems]


def _chart_metadata(source: Path, name: str) -> Optional[dict[str, Any]]:
    """The ``Chart.yaml`` of a chart folder or of an archive (whose top folder is the chart's name)."""
    if source.is_dir():
        manifest = source / "Chart.yaml"
        return yaml_io.load(manifest.read_text()) or {} if manifest.is_file() else None
    try:
        with tarfile.open(source, "r:gz") as archive:
            member = archive.extractfile(f"{name}/Chart.yaml")
            return yaml_io.load(member.read()) or {} if member is not None else None
    except (KeyError, tarfile.TarError, OSError):
        return None


def local_chart(directory: str | Path, chart: str, version: str) -> tuple[Optional[Path], str]:
    """The folder or archive of ``chart`` at ``version`` in ``directory``, and why there is none."""
    name, folder = chart_name(chart), Path(directory)
    if not folder.is_dir():
        return None, f"'{directory}' is not a folder"
    for candidate in _candidates(folder, name, version):
        if not candidate.exists():
            continue
        metadata = _chart_metadata(candidate, name)
        if metadata is None:
            return None, f"{candidate.name} holds no {name}/Chart.yaml"
        if metadata.get("name") == name and str(metadata.get("version", "")).lstrip("v") == version.lstrip("v"):
            return candidate, ""
        return None, f"{candidate.name}'s Chart.yaml is {metadata.get('name')} {metadata.get('version')}, not {name} {version}"
    return None, f"has no {name} {version}: expected {name}-{version}/ or {name}-{version}.tgz in it"


def chart_problems(directory: Optional[str], charts: list[tuple[str, str]], path: str) -> list[Problem]:
    """One problem (at ``path``) per chart of ``charts`` (chart, version) that ``directory`` lacks."""
    if directory is None:
        return []
    if not Path(directory).is_dir():
        return [Problem(path, f"'{directory}' is not a folder; give the folder that holds the charts")]
    problems = []
    for chart, version in charts:
        source, reason = local_chart(directory, chart, version)
        if source is None:
            problems.append(Problem(path, reason))
    return problems


def mirrored_chart(chart: str, mirror: str) -> tuple[str, Optional[str]]:
    """The chart and repository under which ``mirror`` serves ``chart``: an ``oci://`` prefix
    holds it at ``<prefix>/<chart>``, a Helm repository under its name."""
    name = chart_name(chart)
    if mirror.startswith("oci://"):
        return f"{mirror.rstrip('/')}/{name}", None
    return name, mirror


def release_chart(
    chart: str, version: str, repository: Optional[str], directory: Optional[str], path: str,
    mirror: Optional[str] = None,
) -> dict[str, Any]:
    """The ``chart``, ``version`` and ``repository_opts`` of a ``helm.v3.Release``: from
    ``directory``'s copy at the same version when a directory is given, else from ``mirror``, else
    from the repository (``repository`` None for an ``oci://`` chart); raises ``ConfigError``
    naming ``path`` when the directory's copy is missing."""
    if directory is None:
        if mirror is not None:
            if not mirror.startswith(MIRROR_SCHEMES):
                raise ConfigError([Problem(f"{path.rsplit('.', 1)[0]}.mirror",
                                           f"'{mirror}' is neither a Helm repository (https://...) nor an OCI prefix (oci://...)")])
            chart, repository = mirrored_chart(chart, mirror)
        source: dict[str, Any] = {"chart": chart, "version": version}
        if repository is not None:
            source["repository_opts"] = k8s.helm.v3.RepositoryOptsArgs(repo=repository)
        return source
    local, reason = local_chart(directory, chart, version)
    if local is None:
        raise ConfigError([Problem(path, reason)])
    # A local chart is installed as it is; its version was checked above.
    return {"chart": str(local)}
