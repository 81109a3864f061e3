"""``eks-gpu-training-verify``: the seed's validation checklist, run against a live cluster.

    eks-gpu-training-verify [--kubeconfig PATH] [--context NAME] [--stack STACK] [--fleet] [--examples N] [--json]

Reads the cluster once (list calls only: it changes nothing) and prints one row per check: pass,
fail or skip, the evidence, and for a fail what to do. Failing objects are counted per reason, each
reason naming its first ``--examples`` of them. ``--stack`` adds what the stack file declares, ``--fleet`` a
MultiKueue manager's AdmissionCheck and workers (``fleet_workers``). Exit status: 0 when no row fails, 1 when one does, 2 when the cluster cannot be reached
or read (or the stack file is invalid), with a one-line reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence, TextIO

from ..config import ConfigError
from ..offline.commands import run_command
from .rows import EXAMPLES, FAIL, PASS, SKIP, Row
from .fleet_workers import WorkerQueues, judge_fleet, read_workers
from .health import judge_health
from .seed import judge_seed
from .snapshot import ClusterUnreadable, Snapshot, api_client, read_snapshot
from .stack import StackRef, judge_stack, load_stack_args

EXIT_PASSED, EXIT_FAILED, EXIT_UNREADABLE = 0, 1, 2

COLOURS = {PASS: "\033[32m", FAIL: "\033[31m", SKIP: "\033[33m"}
"""ANSI colours of the statuses (green, red, yellow), used only on a terminal."""
RESET = "\033[0m"


def judge(snapshot: Snapshot, stack: Optional[StackRef] = None, project_dir: Optional[Path] = None, *, examples: int = EXAMPLES,
          workers: Optional[Mapping[str, WorkerQueues]] = None) -> list[Row]:
    """The rows of a snapshot: the seed's eight, the node health rows, then with ``stack`` what the
    stack declares, and with ``workers`` (what was read of each, ``read_workers``) the fleet's rows.
    Each group of objects failing for one reason names its first ``examples``."""
    args = load_stack_args(stack, project_dir) if stack is not None else None
    rows = judge_seed(snapshot, args, examples=examples) + judge_health(snapshot, examples)
    if args is not None:
        rows += judge_stack(snapshot, args, examples=examples)
    return rows + judge_fleet(snapshot, workers, examples) if workers is not None else rows


def verify(
    kubeconfig: Optional[str] = None,
    context: Optional[str] = None,
    stack: Optional[StackRef] = None,
    project_dir: Optional[Path] = None,
    *,
    examples: int = EXAMPLES,
    fleet: bool = False,
) -> list[Row]:
    """Read the cluster of ``context`` in ``kubeconfig`` and judge it. ``stack`` is a stack name
    (``<project_dir>/stacks/Pulumi.<stack>.yaml``, the current folder by default), a stack file's
    path, or ``GpuTrainingPlatformArgs``; ``fleet`` adds the rows of a MultiKueue manager's workers.
    Raises ``ClusterUnreadable`` (the cluster cannot be read) or ``ConfigError`` (the stack file is
    invalid), before any read for the latter. ``examples``: the objects named per group of failures
    (default ``EXAMPLES``)."""
    args = load_stack_args(stack, project_dir) if stack is not None else None
    snapshot = read_snapshot(kubeconfig, context, with_stack=args is not None, with_fleet=fleet)
    workers = None
    if fleet:
        api = api_client(kubeconfig, context)
        try:
            workers = read_workers(api, snapshot)
        finally:
            api.close()
    return judge(snapshot, args, examples=examples, workers=workers)


def exit_status(rows: Sequence[Row]) -> int:
    return EXIT_FAILED if any(row.status == FAIL for row in rows) else EXIT_PASSED


def table(rows: Sequence[Row], colour: bool = False) -> str:
    """The rows aligned in columns, each fail's fix on the line below its evidence, and a count."""
    item_width = max([len("CHECK"), *(len(r.item) for r in rows)])
    status_width = len("STATUS")
    lines = [f"{'CHECK':<{item_width}}  {'STATUS':<{status_width}}  DETAIL"]
    for row in rows:
        status = f"{row.status:<{status_width}}"
        if colour:
            status = f"{COLOURS[row.status]}{status}{RESET}"
        lines.append(f"{row.item:<{item_width}}  {status}  {row.evidence}")
        if row.fix:
            lines.append(f"{'':<{item_width}}  {'':<{status_width}}  fix: {row.fix}")
    counts = {status: sum(1 for r in rows if r.status == status) for status in (PASS, FAIL, SKIP)}
    lines.append(f"{len(rows)} checks: {counts[PASS]} pass, {counts[FAIL]} fail, {counts[SKIP]} skip")
    return "\n".join(lines) + "\n"


def as_json(rows: Sequence[Row]) -> str:
    """``{"rows": [{"item", "status", "detail", "failures": [{"noun", "reason", "count", "examples"}]}]}``."""
    return json.dumps({"rows": [row.as_json() for row in rows]}, indent=2) + "\n"


def _wants_colour(stream: TextIO) -> bool:
    # NO_COLOR (no-color.org) turns colour off even on a terminal.
    return stream.isatty() and "NO_COLOR" not in os.environ


def _examples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="eks-gpu-training-verify",
        description="Run the seed's validation checklist against a live cluster (read-only: list calls only).",
        epilog="Exit status: 0 no row fails, 1 a row fails, 2 the cluster cannot be reached or read.",
    )
    root.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    root.add_argument("--context", help="kubeconfig context (default: its current context)")
    root.add_argument(
        "--stack", help="also check what this stack declares: a stack name (stacks/Pulumi.<stack>.yaml of the project in the current folder) or a stack file's path"
    )
    root.add_argument(
        "--fleet", action="store_true",
        help="on a MultiKueue manager, also a row for its AdmissionCheck and one per worker: reached by Kueue (Active), "
        "listed in the config, and, if the credentials may get its kubeconfig Secret, its queues like the manager's",
    )
    root.add_argument(
        "--examples", type=_examples, default=EXAMPLES, metavar="N",
        help=f"name at most N objects per group of objects failing for one reason; the rest are counted (default: {EXAMPLES})",
    )
    root.add_argument(
        "--json", action="store_true",
        help='print {"rows": [{"item", "status", "detail", "failures": [{"noun", "reason", "count", "examples"}, ...]}, ...]} instead of a table',
    )
    return root


def main(argv: Optional[list[str]] = None) -> int:
    options = parser().parse_args(argv)
    try:
        rows = verify(options.kubeconfig, options.context, options.stack, examples=options.examples, fleet=options.fleet)
    except ClusterUnreadable as error:
        print(f"eks-gpu-training-verify: cannot read the cluster: {error}", file=sys.stderr)
        return EXIT_UNREADABLE
    except ConfigError as error:
        problems = "; ".join(f"{p.path}: {p.message}" for p in error.problems)
        print(f"eks-gpu-training-verify: --stack {options.stack}: {problems}", file=sys.stderr)
        return EXIT_UNREADABLE
    sys.stdout.write(as_json(rows) if options.json else table(rows, colour=_wants_colour(sys.stdout)))
    return exit_status(rows)


def cli() -> int:
    """The command (``eks-gpu-training-verify``, ``python -m``): ``main``, exiting as every command does."""
    return run_command(main)
