"""``python -m eks_gpu_training.offline.render STACK OUT``: render a stack offline (see ``eks_gpu_training.offline.render``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...config import ConfigError
from ...platform.stack_files import is_path, locate_stack
from ..chart_sources import CACHE_ENV, LOCK_FILE, MIRROR_ENV, ChartSources, ChartUnavailable
from ..commands import collection_paused, run_command
from . import GRAPH_PNG, GRAPH_SVG, RenderError, render
from .cache import RenderCache, default_cache_dir


def main(argv: list[str] | None = None) -> int:
    # Collection waits until the render is written (``collection_paused``).
    with collection_paused():
        return _main(argv)


def cli() -> int:
    """``python -m``: ``main``, exiting as every command does (the installed ``eks-gpu-training-render`` is
    ``commands.render``, which also keeps the collector off)."""
    return run_command(main)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="eks-gpu-training-render",
        description="Run a stack's Pulumi program offline (mock engine: no cloud credentials, no Pulumi CLI) "
        "and write what it would create: resources.json, manifests/, values/, graph.{svg,png,dot,mmd}, and the IAM "
        "policy its deployer needs: deployer-policy.json.",
    )
    parser.add_argument("stack", help="stack name (Pulumi.<stack>.yaml in the project's stackConfigDir) or the path of a stack file")
    parser.add_argument("out", type=Path, help="output folder (created; its generated files are replaced)")
    parser.add_argument(
        "--project-dir", type=Path, default=None, help="the Pulumi project (default: the folder of the nearest "
        "Pulumi.yaml at or above the current folder)",
    )
    parser.add_argument("--no-picture", action="store_true", help="skip the SVG/PNG layout (no Graphviz needed)")
    parser.add_argument(
        "--charts-mirror", default=None, metavar="URL",
        help=f"an http(s):// Helm repository or oci:// prefix holding every pinned chart, asked instead of each "
        f"chart's own repository, for this run (default: ${MIRROR_ENV}, else the stack's charts.mirror); pulled charts are cached (${CACHE_ENV}, else "
        "$XDG_CACHE_HOME/eks-gpu-training/charts)",
    )
    parser.add_argument(
        "--lock", action="store_true",
        help=f"record the digest of each chart archive in {LOCK_FILE} beside the stack file (a later pull with "
        "other bytes is refused)",
    )
    parser.add_argument("--no-charts", action="store_true", help="render the stack's own objects only, not its charts")
    parser.add_argument(
        "--no-cache", action="store_true", help="render every chart with Helm, neither reading nor filling the "
        "chart cache ($XDG_CACHE_HOME/eks-gpu-training/render; an entry is used only for the same chart source, "
        "values, release and Helm engine)",
    )
    options = parser.parse_args(argv)

    try:
        located = locate_stack(options.stack, options.project_dir)
        sources = None if options.no_charts else ChartSources.configured(
            mirror=options.charts_mirror, stack_dir=located.path.parent, record=options.lock)
        summary = render(
            located.name, options.out, project_root=located.project_dir,
            stack_path=located.path if is_path(options.stack) else None, picture=not options.no_picture,
            charts=not options.no_charts, sources=sources,
            cache=None if options.no_cache else RenderCache(default_cache_dir()),
        )
    except (RenderError, ConfigError, ChartUnavailable, FileNotFoundError) as error:
        print(f"render failed: {error}", file=sys.stderr)
        return 1
    for note in summary.notes:
        print(f"note: {note}", file=sys.stderr)
    for pulled in sources.pulled if sources is not None else ():
        print(f"pulled chart {pulled}")
    chart_failed = False
    for chart in summary.charts:
        what = f"chart {chart.chart} {chart.version} (release {chart.release})"
        if chart.error:
            chart_failed = True
            print(f"render failed: {what}: {chart.error}", file=sys.stderr)
        elif chart.skipped:
            print(f"skipped: {what}: not rendered: {chart.skipped}")
        else:
            print(f"{what}: {len(chart.objects)} objects rendered by Helm from {chart.source}")
    counts = summary.counts
    picture = (
        "picture skipped (--no-picture)" if options.no_picture
        else f"picture not laid out: {summary.picture_error}" if summary.picture_error
        else f"{GRAPH_SVG}, {GRAPH_PNG}"
    )
    print(
        f"rendered stack {located.name} into {options.out}: {len(summary.render.resources)} resources, "
        f"{counts['manifests']} manifests, {counts['patches']} patches, {counts['values']} Helm values, "
        f"{counts['chart objects']} chart objects; {picture}"
    )
    if chart_failed:
        return 1
    return 2 if summary.picture_error else 0


if __name__ == "__main__":
    raise SystemExit(cli())
