"""Helm release values against the pinned chart's own ``values.yaml`` and, where the chart ships
one, its ``values.schema.json`` (validated by Helm itself, as ``helm install`` does).

A key the chart does not have is silently ignored by Helm, so a typo (``driver.enabeld``) or a key
from another chart version deploys something other than what was meant, without an error. Each
key path of a release's values must exist in the chart's values at that version, down to where the
chart's value stops being a non-empty mapping (``nodeSelector: {}``, ``tolerations: []`` take
anything). The chart is the one the release was rendered from (``render`` records it): the
stack's charts.directory copy, or the archive the render pulled into the chart cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional

from ...facts.aws_enums import suggestion
from ..chart_sources import chart_name
from ..render.charts import SOURCE_KEY
from ..render.markers import is_placeholder

ALWAYS_ALLOWED = ("global",)
"""Top-level keys Helm itself gives every chart."""


def chart_values(source: Path) -> dict[str, Any]:
    """The default values of the chart in ``source`` (a folder or archive), its subcharts' under
    their names, as Helm coalesces them before rendering."""
    import helm_python

    return helm_python.Chart.load(source).merge_values({})


FREE_FORM = frozenset(
    {
        "labels",
        "annotations",
        "additionalLabels",
        "additionalPodAnnotations",
        "additionalPodLabels",
        "podAnnotations",
        "podLabels",
        "tolerations",
        "nodeSelector",
        "affinity",
        "topologySpreadConstraints",
        "env",
        "resources",
        "securityContext",
        "podSecurityContext",
        "containerSecurityContext",
    }
)
"""Keys whose value is a Kubernetes object or a user's map, passed through by the chart: the key
must exist, but what is inside is not the chart's to declare (a chart's example default, such as
the GPU Operator's preferred node affinity, is no list of allowed keys)."""


def _kind(value: Any) -> str:
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def unknown_keys(values: Any, chart: Any, path: str = "") -> Iterator[str]:
    """Problem lines for keys of ``values`` that ``chart`` (the chart's default values) does not
    declare, or whose value is of another kind than the chart's default."""
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        where = f"{path}.{key}" if path else str(key)
        if not path and key in ALWAYS_ALLOWED:
            continue
        if key not in chart:
            yield f"{where}: not declared in the chart's values.yaml{suggestion(str(key), frozenset(map(str, chart)))}"
            continue
        default = chart[key]
        if value is None or default is None or is_placeholder(value):
            continue
        if _kind(value) != _kind(default):
            yield f"{where}: {value!r} is a {_kind(value)}; the chart's default {default!r} is a {_kind(default)}"
        elif isinstance(value, dict) and default and key not in FREE_FORM:
            # An empty default ({}) is a free-form map too.
            yield from unknown_keys(value, default, where)


def check_release(filename: str, release: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``("fail" | "skip", line)`` for a rendered release (``values/<release>.yaml``): the chart's
    render as ``render`` recorded it, and the values against the chart it was rendered from (its
    declared keys, and its ``values.schema.json``)."""
    chart, version = release.get("chart"), release.get("version")
    what = f"{filename}: Helm release {release.get('release')} (chart {chart} {version or ''})".replace(" )", ")")
    if not chart:
        yield "fail", f"{what}: no chart"
        return
    if not version and not Path(str(chart)).exists():
        yield "fail", f"{what}: the chart version is not pinned"
        return
    rendered = release.get(SOURCE_KEY) or {}
    if rendered.get("error"):
        yield "fail", f"{what}: Helm could not render the chart: {rendered['error']}"
        return
    if rendered.get("skipped") or not rendered:
        reason = rendered.get("skipped") or "the render predates chart rendering"
        yield "skip", f"{what}: the chart's objects were not rendered, nor its values checked: {reason}"
        return
    source = Path(rendered["source"])
    if not source.exists():
        yield "skip", f"{what}: values not checked: the chart it was rendered from ({source}) is not on this machine"
        return
    try:
        problem = values_schema_problems(source, release.get("values") or {})
    except ImportError:
        yield "skip", f"{what}: values not checked: helm-python-sdk is not installed"
        return
    if problem:
        yield "fail", f"{what}: values do not meet the chart's values.schema.json: {problem}"
    if not release.get("values"):
        return  # the chart's own defaults: no key to check
    for problem in unknown_keys(release.get("values") or {}, chart_values(source)):
        yield "fail", f"{what}: {problem} ({chart_name(str(chart))} {version} values.yaml)"


def values_schema_problems(source: Path, values: dict[str, Any]) -> Optional[str]:
    """Helm's own validation of ``values`` against the ``values.schema.json`` of the chart in
    ``source`` and of its subcharts (each under its own key); None when they pass (or the chart has
    no schema)."""
    import helm_python

    try:
        helm_python.Chart.load(source).validate_schema(values)
    except helm_python.HelmValuesError as error:
        return " ".join(str(error).split())
    return None
