"""A cache of chart renders and pictures, so a repeated ``render`` asks Helm only for the releases
that changed, and Graphviz only for a changed graph.

An entry is stored under a key covering everything the written objects depend on:

- the release: chart, version, release name, namespace, whether it skips CRDs, and its values as
  canonical JSON (the mock engine gives a map's keys in no fixed order);
- the chart source: a SHA-256 over every file's path and bytes in its folder (subcharts included);
- the engine: the ``helm-python-sdk`` version, its native library's hash from ``RECORD``, and the
  library file's size and modification time (a rebuilt library is a new engine);
- this side: the source of ``charts.py``, PyYAML's version and libyaml use, the Python version,
  and a format number.

A picture (SVG and PNG) is keyed by the DOT text, the PNG resolution and the Graphviz build. A
Helm error, a skip, or a render whose objects would not come back from JSON as they are is never
stored. The cache lives in ``$XDG_CACHE_HOME/eks-gpu-training/render/``; deleting it is always
safe, and ``render --no-cache`` bypasses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

from ..chart_sources import ChartSources, chart_name
from . import charts

FORMAT = 1
"""Bumped whenever an entry's layout or meaning changes."""

HELM_DISTRIBUTION = "helm-python-sdk"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/eks-gpu-training/render`` (``~/.cache`` when the variable is unset or empty)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eks-gpu-training" / "render"


def tree_digest(folder: Path) -> str:
    """SHA-256 over the relative path and bytes of every file under ``folder``, in sorted order; of
    the file itself when ``folder`` is a chart archive."""
    digest = hashlib.sha256()
    if folder.is_file():
        digest.update(folder.read_bytes())
        return digest.hexdigest()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


@lru_cache(maxsize=1)
def engine_identity() -> Optional[dict[str, Any]]:
    """What identifies the Helm engine that renders, without loading it; None when it is not installed."""
    from importlib import metadata

    try:
        distribution = metadata.distribution(HELM_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    libraries = []
    for file in distribution.files or ():
        if file.suffix == ".so" or ".so." in file.name or file.suffix in (".dylib", ".dll"):
            located = Path(str(distribution.locate_file(file)))
            stat = located.stat() if located.exists() else None
            libraries.append(
                [str(file), file.hash.value if file.hash else None, stat.st_size if stat else None, stat.st_mtime_ns if stat else None]
            )
    return {"version": distribution.version, "libraries": sorted(libraries)}


@lru_cache(maxsize=1)
def renderer_identity() -> dict[str, Any]:
    """What identifies this side of the render: the code that post-processes and dumps objects."""
    return {
        "charts.py": hashlib.sha256(Path(charts.__file__).read_bytes()).hexdigest(),
        "pyyaml": yaml.__version__,
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "python": sys.version,
    }


@dataclass
class CachedChart:
    """A stored render: the objects (template path, object) and each object's written YAML."""

    objects: list[tuple[str, dict[str, Any]]]
    texts: list[str]


class RenderCache:
    """Chart renders (one JSON file per key) and pictures (an SVG and a PNG per key) on disk."""

    def __init__(self, folder: Path):
        self.folder = folder

    def chart_key(self, release: dict[str, Any], source: Path) -> Optional[str]:
        """The entry's key for ``release`` rendered from ``source``; None when it cannot be keyed
        (no engine installed, values that are not JSON)."""
        engine = engine_identity()
        if engine is None:
            return None
        try:
            identity = json.dumps(
                {
                    "format": FORMAT,
                    "chart": release.get("chart"),
                    "version": release.get("version"),
                    "release": release.get("release"),
                    "namespace": release.get("namespace"),
                    "skipCrds": bool(release.get("skipCrds")),
                    "values": release.get("values") or {},
                    "source": tree_digest(source),
                    "engine": engine,
                    "renderer": renderer_identity(),
                },
                sort_keys=True,
                allow_nan=False,
            )
        except (TypeError, ValueError):
            return None
        return hashlib.sha256(identity.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / "charts" / f"{key}.json"

    def load_chart(self, key: str) -> Optional[CachedChart]:
        """The entry under ``key``, or None (absent, unreadable or not this key's)."""
        try:
            entry = json.loads(self._path(key).read_text())
            if entry.get("key") != key or len(entry["objects"]) != len(entry["texts"]):
                return None
            return CachedChart([(path, obj) for path, obj in entry["objects"]], list(entry["texts"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store_chart(self, key: str, chart: CachedChart) -> None:
        """Write the entry; skipped when the objects would not come back from JSON unchanged."""
        objects = [[path, obj] for path, obj in chart.objects]
        try:
            text = json.dumps({"key": key, "objects": objects, "texts": chart.texts}, allow_nan=False)
        except (TypeError, ValueError):
            return
        if json.loads(text)["objects"] != objects:
            return  # e.g. a non-text key would come back as text
        _write_atomically(self._path(key), text.encode())

    def picture_key(self, dot_source: str, graphviz: str, dpi: int) -> str:
        """The key of a picture laid out from ``dot_source`` by ``graphviz`` (its identity) at ``dpi``."""
        identity = json.dumps({"format": FORMAT, "dot": dot_source, "graphviz": graphviz, "dpi": dpi}, sort_keys=True)
        return hashlib.sha256(identity.encode()).hexdigest()

    def load_picture(self, key: str) -> Optional[tuple[bytes, bytes]]:
        """The stored (SVG, PNG) under ``key``, or None."""
        try:
            return (self.folder / "pictures" / f"{key}.svg").read_bytes(), (self.folder / "pictures" / f"{key}.png").read_bytes()
        except OSError:
            return None

    def store_picture(self, key: str, svg: bytes, png: bytes) -> None:
        """Store a picture (the PNG first: an SVG without its PNG is never read as an entry)."""
        _write_atomically(self.folder / "pictures" / f"{key}.png", png)
        _write_atomically(self.folder / "pictures" / f"{key}.svg", svg)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` so a parallel render reads the old file or the new, never half of one; an
    unwritable cache folder is no error (the render just is not cached)."""
    partial: Optional[Path] = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False) as handle:
            partial = Path(handle.name)
            handle.write(data)
        os.replace(partial, path)
    except OSError:
        if partial is not None:
            partial.unlink(missing_ok=True)


def render_release_cached(
    release: dict[str, Any], sources: Optional[ChartSources], cache: Optional[RenderCache]
) -> tuple[charts.ChartRender, list[str]]:
    """``charts.render_release`` and each object's YAML, from ``cache`` when it holds this exact
    render; otherwise rendered by Helm and stored."""
    chart, version = str(release.get("chart") or ""), str(release.get("version") or "")
    source, reason = charts.locate_release_chart(release, sources)
    key = cache.chart_key(release, source) if cache is not None and source is not None else None
    stored = cache.load_chart(key) if cache is not None and key is not None else None
    if stored is not None:
        result = charts.ChartRender(str(release.get("release")), chart_name(chart), version, stored.objects, source)
        return result, stored.texts
    result = charts.render_release(release, source, reason)
    texts = [raw if raw is not None else charts.dump_object(obj) for (_, obj), raw in zip(result.objects, result.texts, strict=True)]
    if cache is not None and key is not None and not (result.error or result.skipped):
        cache.store_chart(key, CachedChart(result.objects, texts))
    return result, texts
