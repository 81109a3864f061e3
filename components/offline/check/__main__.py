"""``python -m eks_gpu_training.offline.check RENDER_DIR``: check a render (see ``eks_gpu_training.offline.check``);
with ``--outdated STACK``, list the stack's chart pins that have a newer release (``check.outdated``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..commands import run_command
from . import check_render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="eks-gpu-training-check",
        description="Check a render: Kubernetes objects against the OpenAPI schema of the stack's Kubernetes "
        "version (strict) or their CRD, Helm values against the pinned chart, AWS enumerations against botocore. "
        "Prints one line per failure; exits 1 if there is any. With --outdated, lists which chart pins of a stack "
        "have a newer release where its charts come from: exits 1 if any has, 2 if a source cannot be read.",
    )
    parser.add_argument("render_dir", type=Path, help="a folder written by eks-gpu-training-render; with --outdated, "
                        "a stack name (Pulumi.<stack>.yaml in the project's stackConfigDir) or the path of a stack file")
    parser.add_argument("--outdated", action="store_true", help="list the stack's chart pins with a newer patch on "
                        "their major.minor line, or a newer line, in the mirror or the charts' repositories")
    parser.add_argument("--project-dir", type=Path, default=None, help="with --outdated: the Pulumi project "
                        "(default: the nearest Pulumi.yaml above)")
    parser.add_argument("--charts-mirror", default=None, metavar="URL", help="with --outdated: where the charts are "
                        "listed, as for eks-gpu-training-render (default: $EKS_GPU_TRAINING_CHARTS_MIRROR, else the "
                        "stack's charts.mirror, else each chart's repository)")
    options = parser.parse_args(argv)
    if options.outdated:
        return _outdated(options)
    report = check_render(options.render_dir)
    for line in report.skipped:
        print(f"skipped: {line}")
    for line in report.failures:
        print(f"FAIL: {line}")
    print(f"{options.render_dir}: {report.summary()}")
    return 0 if report.ok else 1


def _outdated(options: Any) -> int:
    from ...addons.chart_archives import MirrorAccess
    from ...config import ConfigError
    from ...platform.stack_files import locate_stack
    from ..chart_sources import ChartSources, ChartUnavailable
    from .outdated import outdated, pin_sources

    try:
        args = locate_stack(str(options.render_dir), options.project_dir).platform_args()
        mirror = ChartSources.configured(mirror=options.charts_mirror).mirror or args.charts.mirror
    except (ConfigError, ChartUnavailable) as error:
        print(f"outdated: {error}", file=sys.stderr)
        return 2
    charts = args.charts
    same_mirror = mirror == charts.mirror
    access = MirrorAccess(charts.mirror_username, charts.mirror_password, charts.mirror_ca_file) if same_mirror else MirrorAccess()
    statuses, unreadable = outdated(pin_sources(args, mirror), access)
    for status in statuses:
        print(status.describe())
    for line in unreadable:
        print(f"outdated: {line}", file=sys.stderr)
    newer = sum(status.newer_patch or status.newer_line for status in statuses)
    print(f"outdated: {len(statuses)} pin(s) listed, {newer} with a newer release, {len(unreadable)} source(s) unreadable")
    return 2 if unreadable else 1 if newer else 0


def cli() -> int:
    """``python -m``: ``main``, exiting as every command does (the installed ``eks-gpu-training-check`` is
    ``commands.check``, which also keeps the collector off)."""
    return run_command(main)


if __name__ == "__main__":
    raise SystemExit(cli())
