"""What each Helm release of a stack creates, rendered by Helm's own template engine, offline.

A release is rendered from the pinned chart, fetched where a user fetches it (see
``offline.chart_sources``), with exactly the values, release name and namespace the stack
passes, as ``helm install`` would render it (``is_install``): templates, hooks, and the chart's
``crds/`` unless the release skips them. The engine is Helm v4's Go SDK through its C ABI
(the ``helm-python-sdk`` package, ``helm_python``): no ``helm`` binary, no cluster, no network;
``lookup`` returns nothing, as in ``helm template``. Helm also validates the values against the
chart's ``values.schema.json`` (the chart's and its subcharts') before rendering, as an install does.

Without the ``check`` extra that brings ``helm_python``, or with chart rendering turned off
(``--no-charts``), a release is skipped with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from ...facts import yaml_io
from ..chart_sources import ChartSources, ChartUnavailable, chart_name

# libyaml's loader and dumper when PyYAML has them: a chart's CRDs are hundreds of kilobytes of YAML,
# which the pure-Python ones take most of a second to read and write.
YAML_LOADER = yaml_io.LOADER
YAML_DUMPER = yaml_io.DUMPER

CHARTS_DIR = "charts"
"""Under ``manifests/``: one folder per release with the objects its chart renders."""
SOURCE_KEY = "rendered"
"""Key added to a release's ``values/<release>.yaml``: which chart source rendered it, or why not."""


@dataclass
class ChartRender:
    """What rendering one release gave."""

    release: str
    chart: str
    version: str
    objects: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(template path in the chart, object) in the chart's order."""
    source: Optional[Path] = None
    texts: list[Optional[str]] = field(default_factory=list)
    """Each object's YAML as Helm rendered it, when written as it is (None: dump the object; an item
    of a ``List``, or one given the release's namespace). Not kept in the render cache, which keeps
    the written texts."""
    skipped: str = ""
    error: str = ""

    def record(self) -> dict[str, Any]:
        """What ``values/<release>.yaml`` says about this render: the chart folder or archive it was
        rendered from (the stack's charts.directory, or the chart cache), which ``check`` reads."""
        if self.error:
            return {"error": self.error}
        if self.skipped:
            return {"skipped": self.skipped}
        assert self.source is not None  # noqa: S101 - a chart neither failed nor skipped has its source
        return {
            "source": str(self.source),
            "folder": f"manifests/{CHARTS_DIR}/{safe_name(self.release)}",
            "objects": len(self.objects),
        }


def safe_name(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", part).strip("-") or "unnamed"


CLUSTER_SCOPED_KINDS = frozenset(
    {
        "APIService", "CSIDriver", "CSINode", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
        "IngressClass", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
        "Namespace", "Node", "PersistentVolume", "PriorityClass", "RuntimeClass", "StorageClass",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)
"""Built-in kinds without a namespace (``kubectl api-resources --namespaced=false``)."""


def in_release_namespace(objects: list[tuple[str, dict[str, Any]]], namespace: str) -> set[int]:
    """Give each namespaced object that names no namespace the release's, as ``helm install`` does
    (Helm's client sets the release namespace on every namespaced object it creates); a custom
    resource is cluster-scoped when the chart's own CRD says so."""
    cluster_scoped: set[Optional[str]] = set(CLUSTER_SCOPED_KINDS)
    for _, obj in objects:
        if obj.get("kind") == "CustomResourceDefinition" and (obj.get("spec") or {}).get("scope") == "Cluster":
            cluster_scoped.add(((obj["spec"].get("names") or {}).get("kind")))
    given = set()
    for index, (_, obj) in enumerate(objects):
        metadata = obj.setdefault("metadata", {})
        if obj.get("kind") not in cluster_scoped and not metadata.get("namespace"):
            metadata["namespace"] = namespace
            given.add(index)
    return given


DOCUMENT_START = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
"""A line that starts a YAML document (``---``, a comment after it allowed): no document's content
can have one at its first column (YAML 1.2, "Document Markers")."""


def _documents(text: str) -> Iterator[tuple[dict[str, Any], Optional[str]]]:
    """Each object of a template's output, with its YAML as Helm wrote it (None for an item of a
    ``List``). Documents are split at their markers and parsed one by one, so the render can write
    each as it is instead of dumping it again, which took as long as parsing it."""
    for chunk in DOCUMENT_START.split(text):
        document = yaml.load(chunk, Loader=YAML_LOADER)  # noqa: S506 - YAML_LOADER is a SafeLoader
        if not isinstance(document, dict):
            continue  # an empty template (a disabled feature) renders to nothing
        if document.get("kind") == "List" and isinstance(document.get("items"), list):
            yield from ((item, None) for item in document["items"] if isinstance(item, dict))
        else:
            yield document, chunk.strip("\n") + "\n"


def locate_release_chart(release: dict[str, Any], sources: Optional[ChartSources]) -> tuple[Optional[Path], str]:
    """The release's chart folder or archive from ``sources``, or None and why (``sources`` None:
    charts are not rendered, as asked with ``--no-charts``)."""
    if sources is None:
        return None, "chart rendering was turned off (--no-charts)"
    try:
        return sources.locate(str(release.get("chart") or ""), str(release.get("version") or ""), release.get("repository")), ""
    except ChartUnavailable as error:
        return None, str(error)


def render_release(release: dict[str, Any], source: Optional[Path], reason: str = "") -> ChartRender:
    """Render one release (a ``values/<release>.yaml`` document) from its chart's folder or archive
    ``source`` (``locate_release_chart``); None: skipped for ``reason``."""
    chart, version = str(release.get("chart") or ""), str(release.get("version") or "")
    result = ChartRender(str(release.get("release")), chart_name(chart), version)
    if source is None:
        result.skipped = reason
        return result
    try:
        import helm_python
    except ImportError:
        result.skipped = "helm-python-sdk is not installed (pip install 'eks-gpu-training[check]')"
        return result
    result.source = source
    try:
        loaded = helm_python.Chart.load(source)
        templates = loaded.render(
            release.get("values") or {},
            name=result.release,
            namespace=release.get("namespace") or "default",
            is_install=True,
        )
        crds = [] if release.get("skipCrds") else loaded.crds
    except helm_python.HelmError as error:
        result.error = f"{type(error).__name__}: {error}"
        return result
    sources = [(crd["filename"], crd["data"]) for crd in crds]
    # NOTES.txt is printed to the user, not applied.
    sources += [(path, templates[path]) for path in sorted(templates) if not path.endswith(".txt")]
    for path, text in sources:
        for obj, raw in _documents(text):
            result.objects.append((path, obj))
            result.texts.append(raw)
    for index in in_release_namespace(result.objects, release.get("namespace") or "default"):
        result.texts[index] = None
    return result


def object_filename(obj: dict[str, Any]) -> str:
    """``<kind>_<namespace>_<name>.yaml``, as the stack's own manifests are named."""
    metadata = obj.get("metadata") or {}
    parts = [str(obj.get("kind", "unknown")).lower(), metadata.get("namespace"), metadata.get("name")]
    return "_".join(safe_name(str(p)) for p in parts if p) + ".yaml"


def dump_object(obj: dict[str, Any]) -> str:
    """A chart object as YAML, fields in the chart's order, long lines kept whole."""
    return yaml.dump(obj, Dumper=YAML_DUMPER, sort_keys=False, default_flow_style=False, width=1_000_000)
