"""Chart archives and the lock that pins them: the digest of an archive, ``charts.lock`` (each pinned
archive's digest, kept beside the stack files), the chart cache they are pulled into, and one pull
through Helm's own client with a mirror's credentials. ``pulumi up`` (``platform.verified_charts``)
and the offline tools (``offline.chart_sources``) check archives with the same code.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from ..config.chart_settings import loopback
from ..facts import yaml_io
from .chart_source import chart_name, mirrored_chart

__all__ = ["CACHE_ENV", "LOCK_FILE", "ChartLock", "MirrorAccess", "archive_digest", "default_cache", "lock_key",
           "loopback", "pull_archive"]

CACHE_ENV = "EKS_GPU_TRAINING_CHARTS_CACHE"
LOCK_FILE = "charts.lock"
"""Beside the stack files: each pinned chart archive's digest (``<chart>-<version>: sha256:...``)."""


def default_cache() -> Path:
    """The chart cache outside any project: ``$EKS_GPU_TRAINING_CHARTS_CACHE``, else
    ``$XDG_CACHE_HOME/eks-gpu-training/charts``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "eks-gpu-training" / "charts"


def archive_digest(archive: Path) -> str:
    """A chart archive's digest as Helm gives it (``helm_python.digest``, the ``digest`` of a
    repository index entry): ``sha256:`` and the SHA-256 of its bytes. Computed here, so checking
    a cached chart against the lock does not load Helm's library (about 40 ms of a render)."""
    return "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()


def lock_key(chart: str, version: str) -> str:
    """A chart's entry in ``charts.lock``: ``<chart>-<version>``, the name of the archive Helm pulls."""
    return f"{chart_name(chart)}-{version}"


@dataclass
class ChartLock:
    """``charts.lock``: the digest each pinned chart archive must have."""

    path: Path
    digests: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> "ChartLock":
        document = (yaml_io.load(path.read_text()) or {}) if path.is_file() else {}
        return cls(path, {str(k): str(v) for k, v in (document.get("charts") or {}).items()})

    def write(self) -> None:
        header = ("# The digest of each pinned chart archive, as `eks-gpu-training-render --lock` pulled it; a\n"
                  "# later pull of the same chart and version with other bytes is refused.\n")
        self.path.write_text(header + yaml.safe_dump({"charts": dict(sorted(self.digests.items()))}, sort_keys=False))


@dataclass(frozen=True)
class MirrorAccess:
    """How a pull authenticates to a mirror: ``charts.mirrorUsername`` and ``charts.mirrorPassword``
    (a password or a token), and ``charts.mirrorCaFile``, a CA bundle its TLS certificate chains to."""

    username: Optional[str] = None
    password: Optional[str] = None
    ca_file: Optional[str] = None


def pull_archive(chart: str, version: str, repository: Optional[str], mirror: Optional[str], access: MirrorAccess,
                 destination: Path) -> str:
    """Pull ``chart`` at ``version`` into ``destination`` with Helm's client: from ``mirror`` when
    one is given (with ``access``), else from its registry (an ``oci://`` chart) or ``repository``.
    Returns where it came from; raises ``helm_python.HelmError`` when that source fails."""
    from helm_python import _native, registry

    if mirror is not None:
        ref, repo = mirrored_chart(chart, mirror)
        where = f"the mirror {mirror}"
        username, password, ca_file = access.username, access.password, access.ca_file
    else:
        ref, repo = (chart, None) if chart.startswith("oci://") else (chart_name(chart), repository)
        where = f"its registry {chart}" if repo is None else f"its repository {repository}"
        username = password = ca_file = None
    # helm_python.pull takes no CA file; its native call takes Helm's own ``--ca-file`` option.
    registry._loads(_native.call_string("helm_pull", registry._client_handle(None), ref, registry._opts(
        version=version, repo_url=repo, dest_dir=str(destination), username=username, password=password,
        ca_file=ca_file, plain_http=(ref.startswith("oci://") and loopback(ref)) or None)))
    return where
