"""Helm release values against the pinned chart's own ``values.yaml`` and, where the chart ships
one, its ``values.schema.json`` (validated by Helm itself, as ``helm install`` does).

A key the chart does not have is silently ignored by Helm, so a typo (``driver.enabeld``) or a key
from another chart version deploys something other than what was meant, without an error. Each
key path of a release's values must exist in the chart's values at that version, down to where the
chart's value stops being a non-empty mapping (``nodeSelector: {}``, ``tolerations: []`` take
anything). The chart files are the unmodified upstream copies in ``../shared/reference``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from ...facts.aws_enums import suggestion
from ..reference import chart_name
from ..render.charts import SOURCE_KEY
from ..render.markers import is_placeholder

PINNED_CHART_VALUES: dict[str, dict[str, tuple[tuple[str, tuple[str, ...]], ...]]] = {
    # chart name -> chart version (without a leading v) -> (values file under the reference folder,
    # the key its values sit under: a subchart's values sit under the subchart's name)
    "gpu-operator": {
        "26.7.0": (
            ("gpu-operator/values-v26.7.0.yaml", ()),
            ("gpu-operator/node-feature-discovery-0.19.0/values.yaml", ("node-feature-discovery",)),
        ),
        "24.9.2": (("gpu-operator/values-v24.9.2.yaml", ()),),
    },
    "karpenter": {"1.14.1": (("karpenter-1.14.1/chart-values.yaml", ()),)},
    "karpenter-crd": {"1.14.1": (("charts/karpenter-crd-1.14.1/values.yaml", ()),)},
    "aws-efa-k8s-device-plugin": {"0.5.30": (("efa-device-plugin/values-v0.5.30.yaml", ()),)},
    "eks-node-monitoring-agent": {"1.7.0": (("eks-node-monitoring-agent-1.7.0/chart-values.yaml", ()),)},
    "kueue": {"0.19.2": (("charts/kueue-0.19.2/values.yaml", ()),)},
}
"""Upstream values files in the reference folder (see its README for where each comes from)."""

ALWAYS_ALLOWED = ("global",)
"""Top-level keys Helm itself gives every chart."""


@dataclass
class ChartValues:
    """A chart version's default values, with where they come from."""

    values: dict[str, Any]
    sources: list[str]


def _merge(into: dict[str, Any], values: dict[str, Any]) -> None:
    """Add the keys of ``values`` to ``into``, recursively."""
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into.setdefault(key, value)


def pinned_values(chart: str, version: str, reference: Path) -> Optional[ChartValues]:
    """The default values of ``chart`` at ``version`` from the reference folder, or None."""
    files = PINNED_CHART_VALUES.get(chart_name(chart), {}).get(version.lstrip("v"))
    if not files or not all((reference / path).is_file() for path, _ in files):
        return None
    merged: dict[str, Any] = {}
    for path, under in files:
        values = yaml.safe_load((reference / path).read_text()) or {}
        for key in reversed(under):
            values = {key: values}
        _merge(merged, values)
    return ChartValues(merged, [path for path, _ in files])


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


def check_release(filename: str, release: dict[str, Any], reference: Optional[Path]) -> Iterator[tuple[str, str]]:
    """``("fail" | "skip", line)`` for a rendered release (``values/<release>.yaml``)."""
    chart, version = release.get("chart"), release.get("version")
    what = f"{filename}: Helm release {release.get('release')} (chart {chart} {version or ''})".replace(" )", ")")
    if not chart:
        yield "fail", f"{what}: no chart"
        return
    if not version:
        yield "fail", f"{what}: the chart version is not pinned"
        return
    yield from _check_render(what, release, reference)
    if not release.get("values"):
        return  # the chart's own defaults: no key to check
    if reference is None:
        yield "skip", f"{what}: values keys not checked: the upstream reference folder is absent"
        return
    pinned = pinned_values(str(chart), str(version), reference)
    if pinned is None:
        yield "skip", f"{what}: values keys not checked: no values.yaml of {chart_name(str(chart))} {version} in {reference}"
        return
    for problem in unknown_keys(release.get("values") or {}, pinned.values):
        yield "fail", f"{what}: {problem} ({', '.join(pinned.sources)})"


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


def _check_render(what: str, release: dict[str, Any], reference: Optional[Path]) -> Iterator[tuple[str, str]]:
    """The release's chart render as ``render`` recorded it, and its values against the chart's
    values schema."""
    rendered = release.get(SOURCE_KEY) or {}
    if rendered.get("error"):
        yield "fail", f"{what}: Helm could not render the chart: {rendered['error']}"
    elif rendered.get("skipped") or not rendered:
        reason = rendered.get("skipped") or "the render predates chart rendering"
        yield "skip", f"{what}: the chart's objects were not rendered: {reason}"
    elif reference is None:
        yield "skip", f"{what}: values schema not checked: the upstream reference folder is absent"
    else:
        try:
            problem = values_schema_problems(reference / rendered["source"], release.get("values") or {})
        except ImportError:
            yield "skip", f"{what}: values schema not checked: helm-python-sdk is not installed"
            return
        if problem:
            yield "fail", f"{what}: values do not meet the chart's values.schema.json: {problem}"
