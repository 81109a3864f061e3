"""``python -m eks_gpu_training.offline.check RENDER_DIR``: check a render (see ``eks_gpu_training.offline.check``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..commands import run_command
from . import check_render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="eks-gpu-training-check",
        description="Check a render: Kubernetes objects against the OpenAPI schema of the stack's Kubernetes "
        "version (strict) or their CRD, Helm values against the pinned chart, AWS enumerations against botocore. "
        "Prints one line per failure; exits 1 if there is any.",
    )
    parser.add_argument("render_dir", type=Path, help="a folder written by eks-gpu-training-render")
    options = parser.parse_args(argv)
    report = check_render(options.render_dir)
    for line in report.skipped:
        print(f"skipped: {line}")
    for line in report.failures:
        print(f"FAIL: {line}")
    print(f"{options.render_dir}: {report.summary()}")
    return 0 if report.ok else 1


def cli() -> int:
    """``python -m``: ``main``, exiting as every command does (the installed ``eks-gpu-training-check`` is
    ``commands.check``, which also keeps the collector off)."""
    return run_command(main)


if __name__ == "__main__":
    raise SystemExit(cli())
