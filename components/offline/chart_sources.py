"""Where the offline tools (``render``, ``check``, the local cluster) get each release's chart:
where a user gets it, with Helm's own client. In this order:

1. the stack's ``charts.directory``: the folder or archive a release names, as ``pulumi up``
   installs it (for a chart no release installs from there, such as the node monitoring agent's,
   its ``<chart>-<version>/`` or ``.tgz`` in that folder);
2. the chart cache (``$XDG_CACHE_HOME/eks-gpu-training/charts``, or
   ``$EKS_GPU_TRAINING_CHARTS_CACHE``), filled by earlier pulls;
3. a mirror when one is set (``charts.mirror``, or for one run ``--charts-mirror`` or
   ``$EKS_GPU_TRAINING_CHARTS_MIRROR``): an ``http(s)://`` Helm repository or an ``oci://`` prefix
   holding every pinned chart under its own name; else the chart's own repository.

A pulled archive is kept only when its ``Chart.yaml`` names the chart and version asked for and,
with a ``charts.lock`` beside the stack, its digest is the recorded one (``--lock`` records them).
A chart none of these supplies fails the command before it writes anything, one line per chart:
which chart and version, where it looked, and how to supply it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..addons.chart_archives import CACHE_ENV, LOCK_FILE, ChartLock, archive_digest, default_cache
from ..addons.chart_archives import loopback as _loopback
from ..addons.chart_source import chart_name, local_chart

__all__ = ["CACHE_ENV", "LOCK_FILE", "ChartLock", "ChartSources", "ChartUnavailable", "archive_digest", "chart_name"]

MIRROR_ENV = "EKS_GPU_TRAINING_CHARTS_MIRROR"
HOW_TO_SUPPLY = (
    f"supply it with charts.directory (a folder of the pinned charts), a mirror (charts.mirror, or "
    f"--charts-mirror or ${MIRROR_ENV} for one run: an http(s):// Helm repository or an oci:// prefix "
    "holding every pinned chart), or network access to its repository"
)


class ChartUnavailable(RuntimeError):
    """No source could supply a chart; the message is the one line the user sees for it."""


@dataclass
class ChartSources:
    """Where charts come from (see the module's docstring)."""

    cache: Path = field(default_factory=default_cache)
    mirror: Optional[str] = None
    directory: Optional[Path] = None
    """The stack's ``charts.directory``."""
    lock: Optional[ChartLock] = None
    record: bool = False
    """Record the digests of pulled charts in ``lock`` (``--lock``) instead of checking them."""
    pulled: list[str] = field(default_factory=list)
    """What this run pulled, as ``<chart> <version> from <where>``."""

    @classmethod
    def configured(cls, *, mirror: Optional[str] = None, stack_dir: Optional[Path] = None,
                   record: bool = False) -> "ChartSources":
        """The sources a command uses: ``mirror`` or ``$EKS_GPU_TRAINING_CHARTS_MIRROR``, and the
        lock file of ``stack_dir`` (the folder of the stack files); the stack's own
        ``charts.directory`` and ``charts.mirror`` join them when its render is written."""
        chosen = mirror or os.environ.get(MIRROR_ENV) or None
        if chosen is not None and not chosen.startswith(("http://", "https://", "oci://")):
            raise ChartUnavailable(f"charts mirror {chosen!r}: not an http(s):// Helm repository or an oci:// prefix")
        lock = ChartLock.read(stack_dir / LOCK_FILE) if stack_dir is not None else None
        return cls(mirror=chosen.rstrip("/") if chosen else None, lock=lock, record=record)

    def locate(self, chart: str, version: str, repository: Optional[str] = None) -> Path:
        """The chart's folder or archive; ``ChartUnavailable`` when no source has it."""
        local = Path(chart)
        if not version and (local.is_dir() or local.is_file()):
            # A release installed from charts.directory: its chart is that folder or archive, whose
            # name and version the stack checked before the program registered anything.
            return local
        if not version:
            raise ChartUnavailable(f"chart {chart_name(chart)}: no version pinned, so there is no pinned chart to render")
        name = chart_name(chart)
        if self.directory is not None:
            found, _ = local_chart(self.directory, chart, version)
            if found is not None:
                return found
        key = f"{name}-{version}"
        cached = self.cache / f"{key}.tgz"
        if cached.is_file():
            self._check_digest(key, cached, f"the cache ({self.cache})")
            return cached
        where, pull = self._remote(chart, name, version, repository)
        if pull is None:
            raise ChartUnavailable(f"chart {name} {version}: not in the cache ({self.cache}) and {where}; {HOW_TO_SUPPLY}")
        import helm_python

        self.cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.cache, prefix=".pull-") as folder:
            try:
                pull(folder)
            except helm_python.HelmError as error:
                detail = " ".join(str(error).split())
                raise ChartUnavailable(f"chart {name} {version}: not in the cache ({self.cache}), and {where} "
                                       f"could not supply it ({detail}); {HOW_TO_SUPPLY}") from None
            archives = sorted(Path(folder).glob("*.tgz"))
            if len(archives) != 1:
                raise ChartUnavailable(f"chart {name} {version}: {where} gave {len(archives)} archives, not one")
            loaded = helm_python.Chart.load(archives[0])
            if loaded.name != name or loaded.version.lstrip("v") != version.lstrip("v"):
                raise ChartUnavailable(f"chart {name} {version}: {where} served {loaded.name} {loaded.version}; refused")
            self._check_digest(key, archives[0], where)
            os.replace(archives[0], cached)
        self.pulled.append(f"{name} {version} from {where}")
        return cached

    def _remote(self, chart: str, name: str, version: str, repository: Optional[str]):
        """Where to pull the chart from, and how (None: nowhere to ask)."""
        import helm_python

        if self.mirror is not None and self.mirror.startswith("oci://"):
            ref = f"{self.mirror}/{name}"
            return f"the mirror {ref}", lambda folder: helm_python.pull(
                ref, version=version, destination=folder, plain_http=_loopback(self.mirror or ""))
        if self.mirror is not None:
            return f"the mirror {self.mirror}", lambda folder: helm_python.pull(
                name, repo_url=self.mirror, version=version, destination=folder)
        if chart.startswith("oci://"):
            return f"its registry {chart}", lambda folder: helm_python.pull(
                chart, version=version, destination=folder, plain_http=_loopback(chart))
        if repository:
            return f"its repository {repository}", lambda folder: helm_python.pull(
                name, repo_url=repository, version=version, destination=folder)
        return "no repository is known for it and no mirror is set", None

    def _check_digest(self, key: str, archive: Path, where: str) -> None:
        if self.lock is None:
            return
        digest = archive_digest(archive)
        recorded = self.lock.digests.get(key)
        if self.record and recorded != digest:
            self.lock.digests[key] = digest
            self.lock.write()
        elif recorded is not None and recorded != digest:
            raise ChartUnavailable(f"chart {key.rsplit('-', 1)[0]} {key.rsplit('-', 1)[1]}: {where} holds {digest}, "
                                   f"not the {recorded} {self.lock.path} records; refused (a mirror must serve the "
                                   "same archive; run with --lock to record a new one on purpose)")

    def problems(self, releases: list[dict[str, Any]]) -> list[str]:
        """One line for each release whose chart no source can supply (and the rest are fetched).
        A release that pins no version is left to ``check``, which fails it: a pull would take
        whatever version is newest."""
        lines = []
        for release in releases:
            if not release.get("version") and not Path(str(release.get("chart") or "")).exists():
                continue
            try:
                self.locate(str(release.get("chart") or ""), str(release.get("version") or ""), release.get("repository"))
            except ChartUnavailable as error:
                lines.append(str(error))
        return lines

