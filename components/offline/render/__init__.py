"""Offline render of a stack: run the real program under the mock engine, write what it would
create (``resources.json``, Kubernetes manifests, Helm values, a picture of the graph).

``python -m eks_gpu_training.offline.render STACK OUT`` (or ``eks-gpu-training-render``); see ``render``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..engine import PROJECT_ROOT
from ..reference import DEFAULT_REFERENCE
from .cache import RenderCache
from .charts import ChartRender
from .engine import RenderError, StackRender, render_stack
from .files import write_files
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
    project_root: Path = PROJECT_ROOT,
    stack_path: Optional[Path] = None,
    picture: bool = True,
    reference: Optional[Path] = DEFAULT_REFERENCE,
    cache: Optional[RenderCache] = None,
) -> RenderSummary:
    """Render a stack into ``out``: files, DOT and Mermaid always, SVG and PNG when ``picture``
    (which needs Graphviz; its absence is reported, not raised), and each Helm release's chart from
    its source in ``reference`` (skipped, with the reason, where there is none), taken from
    ``cache`` where it holds that exact render, and so is the picture (see ``render.cache``)."""
    return write_render(
        render_stack(stack, project_root=project_root, stack_path=stack_path),
        out,
        picture=picture,
        reference=reference,
        cache=cache,
    )


def write_render(
    result: StackRender,
    out: Path,
    *,
    picture: bool = True,
    reference: Optional[Path] = DEFAULT_REFERENCE,
    cache: Optional[RenderCache] = None,
) -> RenderSummary:
    """Write a program run's render into ``out`` (see ``render``). Graphviz lays the picture out
    while the files and charts are written; ``cache`` holds earlier charts and pictures."""
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
        counts, charts = write_files(result, out, reference, cache)
        (out / GRAPH_DOT).write_text(dot_source)
        (out / GRAPH_MERMAID).write_text(to_mermaid(result))
    except BaseException:
        if layout is not None:
            layout.cancel()
        raise
    summary = RenderSummary(result, counts, charts, picture_error)
    if layout is not None:
        try:
            layout.finish()
        except PictureError as error:
            summary.picture_error = str(error)
    for token in result.unanswered_calls:
        summary.notes.append(f"invoke {token} has no offline answer: its results are empty in this render")
    return summary


__all__ = ["RenderCache", "RenderError", "RenderSummary", "StackRender", "render", "write_render"]
