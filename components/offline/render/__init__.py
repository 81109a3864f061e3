"""Offline render of a stack: run the real program under the mock engine, write what it would
create (``resources.json``, Kubernetes manifests, Helm values, a picture of the graph) and the IAM
policy its deployer needs (``deployer-policy.json``).

``python -m eks_gpu_training.offline.render STACK OUT`` (or ``eks-gpu-training-render``); see ``render``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ...platform.stack_files import locate_stack
from ..chart_sources import ChartSources, ChartUnavailable
from .cache import RenderCache
from .charts import ChartRender
from .deployer_policy import POLICY_FILE, policy_text
from .registrations import RenderError, StackRender, render_stack
from .files import chart_releases, write_files
from .picture import Layout, PictureError, to_dot, to_mermaid

GRAPH_DOT = "graph.dot"
GRAPH_SVG = "graph.svg"
GRAPH_PNG = "graph.png"
GRAPH_MERMAID = "graph.mmd"


@dataclass
class RenderSummary:
    """What a render wrote."""

    render: StackRender
    counts: dict[str, int]
    charts: list[ChartRender] = field(default_factory=list)
    """Each Helm release's chart render (its source, objects, or why it was skipped)."""
    picture_error: Optional[str] = None
    notes: list[str] = field(default_factory=list)


def render(
    stack: str,
    out: Path,
    *,
    project_root: Optional[Path] = None,
    stack_path: Optional[Path] = None,
    picture: bool = True,
    charts: bool = True,
    sources: Optional[ChartSources] = None,
    cache: Optional[RenderCache] = None,
) -> RenderSummary:
    """Render a stack into ``out``: files, DOT and Mermaid always, SVG and PNG when ``picture``
    (which needs Graphviz; its absence is reported, not raised), and, with ``charts``, each Helm
    release's chart from ``sources`` (by default the configured ones: the chart cache, then the
    mirror or each chart's repository, checked against the stack folder's ``charts.lock``; see
    ``offline.chart_sources``), taken from ``cache`` where it holds that exact render, and so is the
    picture (see ``render.cache``). The project is ``project_root``, else the one the current
    folder (or ``stack_path``) is in."""
    located = locate_stack(stack_path or stack, project_root)
    result = render_stack(stack, project_root=located.project_dir, stack_path=located.path)
    if charts and sources is None:
        try:
            sources = ChartSources.configured(stack_dir=located.path.parent)
        except ChartUnavailable as error:
            raise RenderError(str(error)) from None
    return write_render(
        result,
        out,
        picture=picture,
        sources=sources if charts else None,
        cache=cache,
    )


def write_render(
    result: StackRender,
    out: Path,
    *,
    picture: bool = True,
    sources: Optional[ChartSources] = None,
    cache: Optional[RenderCache] = None,
) -> RenderSummary:
    """Write a program run's render into ``out`` (see ``render``; ``sources`` None: charts not
    rendered). Every chart is fetched first: one that no source supplies fails the render, one line
    per chart, before anything is written. Graphviz lays the picture out while the files and charts
    are written; ``cache`` holds earlier charts and pictures."""
    if sources is not None:
        # The stack's own folder and mirror, unless the command names others; the sources' lock
        # and record of pulls stay shared.
        sources = dataclasses.replace(
            sources,
            directory=sources.directory or (Path(result.charts_directory) if result.charts_directory else None),
            mirror=sources.mirror or result.charts_mirror,
        )
    if sources is not None:
        missing = sources.problems(chart_releases(result))
        if missing:
            raise RenderError(f"stack {result.stack}: {len(missing)} chart(s) unavailable:\n  - " + "\n  - ".join(missing))
    out.mkdir(parents=True, exist_ok=True)
    for stale in (GRAPH_SVG, GRAPH_PNG):
        (out / stale).unlink(missing_ok=True)
    dot_source = to_dot(result)
    layout: Optional[Layout] = None
    picture_error: Optional[str] = None
    if picture:
        try:
            layout = Layout(dot_source, out / GRAPH_SVG, out / GRAPH_PNG, cache)
        except PictureError as error:
            picture_error = str(error)
    try:
        counts, rendered = write_files(result, out, sources, cache)
        (out / POLICY_FILE).write_text(policy_text(result))
        (out / GRAPH_DOT).write_text(dot_source)
        (out / GRAPH_MERMAID).write_text(to_mermaid(result))
    except BaseException:
        if layout is not None:
            layout.cancel()
        raise
    summary = RenderSummary(result, counts, rendered, picture_error)
    if layout is not None:
        try:
            layout.finish()
        except PictureError as error:
            summary.picture_error = str(error)
    for token in result.unanswered_calls:
        summary.notes.append(f"invoke {token} has no offline answer: its results are empty in this render")
    summary.notes += stack_reference_notes(result)
    return summary


def stack_reference_notes(result: StackRender) -> list[str]:
    """What each stack reference's outputs stand for in the render."""
    return [
        f"stack reference {stack}: its outputs are those of its own offline render; one known only once it is "
        f"deployed reads <unknown: OUTPUT of stack {stack}>" if known else
        f"stack reference {stack}: no stack file of this project, so its outputs are unknown in this render"
        for stack, known in result.stack_references.items()
    ]


__all__ = ["RenderCache", "RenderError", "RenderSummary", "StackRender", "render", "write_render"]
