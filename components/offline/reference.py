"""Where the offline tools find upstream sources they do not ship: the pinned charts, CRDs and
schemas in the reference folder beside the project (``../shared/reference``). A plain clone has no
such folder; whatever needs it is then skipped, with that reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml

from .engine import PROJECT_ROOT

DEFAULT_REFERENCE = PROJECT_ROOT.parent / "shared" / "reference"
"""Unmodified upstream files (CRDs, charts, values) beside the project; absent in a plain clone."""

CHARTS_DIR = "charts"
"""The reference folder's whole charts, one folder per chart version (``<chart>-<version>`` or
``<chart>-v<version>``, as the upstream tag spells it)."""


def chart_name(chart: str) -> str:
    """``nvidia/gpu-operator`` or ``oci://public.ecr.aws/karpenter/karpenter`` -> the chart's name."""
    return chart.rstrip("/").rsplit("/", 1)[-1]


def chart_source(reference: Optional[Path], chart: str, version: str) -> tuple[Optional[Path], str]:
    """The folder of ``chart`` at ``version`` in the reference folder (or the local chart folder or
    archive a release names, ``charts.directory``), and a reason when there is none. The folder counts only if its own ``Chart.yaml`` names that chart and version, so a
    mislabelled copy is never rendered in its place."""
    name, bare = chart_name(chart), version.lstrip("v")
    local = Path(chart)
    if not version and (local.is_dir() or local.is_file()):
        # A release installed from ``charts.directory``: its chart is that folder or archive, whose
        # name and version the stack checked before the program registered anything.
        return local, ""
    if reference is None or not reference.is_dir():
        return None, "the upstream reference folder (../shared/reference) is absent"
    charts = reference / CHARTS_DIR
    for candidate in (charts / f"{name}-{bare}", charts / f"{name}-v{bare}"):
        manifest = candidate / "Chart.yaml"
        if manifest.is_file():
            metadata = yaml.safe_load(manifest.read_text()) or {}
            if metadata.get("name") == name and str(metadata.get("version", "")).lstrip("v") == bare:
                return candidate, ""
            return None, f"{candidate.name}/Chart.yaml is {metadata.get('name')} {metadata.get('version')}, not {name} {version}"
    return None, f"no source of chart {name} {version} in {charts}"


def only_chart_version(reference: Optional[Path], chart: str) -> Optional[str]:
    """The version of ``chart`` when the reference folder holds exactly one source of it (for an EKS
    add-on whose version EKS resolves only at deployment), else None."""
    if reference is None or not (reference / CHARTS_DIR).is_dir():
        return None
    versions = []
    for manifest in sorted((reference / CHARTS_DIR).glob(f"{chart}-*/Chart.yaml")):
        metadata = yaml.safe_load(manifest.read_text()) or {}
        if metadata.get("name") == chart:
            versions.append(str(metadata.get("version", "")).lstrip("v"))
    return versions[0] if len(versions) == 1 else None
