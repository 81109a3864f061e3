"""``eks-gpu-training-local``: a local Kubernetes cluster for a stack file, without an AWS account."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from ..config import ConfigError, Problem
from ..offline.chart_sources import MIRROR_ENV, ChartSources, ChartUnavailable
from ..offline.commands import run_command
from ..platform.stack_files import is_path, locate_stack
from ..offline.render import RenderError
from . import build as builds
from .cluster import LocalCluster, default_state_dir
from .errors import LocalError
from .faults import CHECKS, PULLABLE_CHECKS, FaultError, condition_fault
from .local_fleet import DEFAULT_WORKERS, LocalFleet, fleet_state_dir, parse_workers


BIN_DIR_HELP = (
    "a folder of binaries you already have (kwokctl's or envtest's kube-apiserver, etcd, kwok, ...): each is used "
    f"when its --version is the pinned one, refused when it is another, built when absent (default: ${builds.PREBUILT_ENV})"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eks-gpu-training-local",
        description="Run a stack's in-cluster half on a local Kubernetes control plane (etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler built from upstream Go modules) with KWOK-simulated GPU nodes, "
        "Kueue and Karpenter's KWOK provider. Everything listens on loopback.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("up", "build what is missing, start the cluster, create the fleet, apply the platform"),
                       ("down", "stop every process the cluster started and remove its state"),
                       ("status", "say which of the cluster's processes run")):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("stack", help="stack name (Pulumi.<stack>.yaml in the project's stackConfigDir) or the "
                             "path of a stack file")
        command.add_argument("--state-dir", type=Path, default=None,
                             help="the cluster's files (default: a folder per stack in the build cache)")
        if name == "up":
            command.add_argument("--bare", action="store_true", help="the simulated fleet only, no platform")
            command.add_argument("--scale", type=int, default=None, metavar="N",
                                 help="grow the stack's managed GPU pools to N simulated nodes together (same instance "
                                 "types and labels; the quotas the stack gives in GPUs of them grow alike), in a "
                                 "network of 16-node layer-3 blocks, 4 blocks per layer-2 node")
            command.add_argument("--dry-run", action="store_true",
                                 help="print, stage by stage, every command line (with its environment) and every object "
                                 "`up` would write, start and apply, and which binaries it would use; render the stack "
                                 "but build, start and apply nothing")
            command.add_argument("--bin-dir", type=Path, default=None, metavar="DIR", help=BIN_DIR_HELP)
            command.add_argument("--charts-mirror", default=None, metavar="URL",
                                 help="an http(s):// Helm repository or oci:// prefix holding every pinned chart, "
                                 f"asked instead of each chart's own repository, for this run (default: ${MIRROR_ENV}, "
                                 "else the stack's charts.mirror)")
    fault = commands.add_parser(
        "fault", help="mark a simulated node the way the node monitoring agent or its kubelet would, or remove it",
        description="Inject a fault into a running local cluster's simulated node, as real API writes the controllers "
        "react to: a node condition as the node monitoring agent reports it (with one of the agent's own reasons), "
        "a kubelet that stops reporting (the node turns NotReady after the node lifecycle controller's grace period), "
        "the node's deletion, or the health gate's checks failing on it (or on every node of a pool, nodes that join "
        "later included). --clear undoes all but a deletion.")
    fault.add_argument("stack", help="stack name or stack file path, as for `up`")
    fault.add_argument("node", nargs="?", default=None, help="the node (`kubectl get nodes`); leave out with --pool")
    fault.add_argument("--state-dir", type=Path, default=None, help="the cluster's files (default: as for `up`)")
    fault.add_argument("--pool", default=None, help="with --fail-checks, --unpullable or --clear: every node of this GPU pool")
    kinds = fault.add_mutually_exclusive_group(required=True)
    kinds.add_argument("--condition", metavar="TYPE=STATUS",
                       help="e.g. AcceleratedHardwareReady=False (with --reason, one of the agent's: NvidiaXID79Error)")
    kinds.add_argument("--not-ready", action="store_true", help="the node's kubelet stops renewing its lease")
    kinds.add_argument("--delete", action="store_true", help="delete the Node, as when its instance terminates")
    kinds.add_argument("--fail-checks", metavar="CHECK", choices=CHECKS,
                       help=f"the health gate's check CHECK fails on the node or pool ({', '.join(CHECKS)})")
    kinds.add_argument("--unpullable", metavar="CHECK", choices=PULLABLE_CHECKS,
                       help=f"the image of the health gate's check CHECK cannot be pulled on the node or pool ({', '.join(PULLABLE_CHECKS)})")
    kinds.add_argument("--clear", action="store_true", help="undo the node's (or pool's) condition, stopped kubelet and failing checks")
    fault.add_argument("--reason", default=None, help="with --condition: the agent's reason (reasons.yaml)")
    fault.add_argument("--message", default=None, help="with --condition: the condition's message")
    simulate = commands.add_parser(
        "simulate", help="replay a job-mix trace on a local cluster of the stack and report waits, placement and use",
        description="Start a local cluster of the stack (its GPU pools grown with --scale), delete the stack's own "
        "training jobs, create each job of the trace at its submit time, let KWOK complete its pods after its "
        "duration, and report per job the wait and the network blocks, per pool the GPUs in use and per team the "
        "queue over time (a table, report.json and report.png). Every time is divided by --speedup while it runs "
        "and multiplied back in the report. The cluster is stopped at the end unless --keep.")
    simulate.add_argument("stack", help="stack name or the path of a stack file")
    simulate.add_argument("--jobs", type=Path, required=True, metavar="FILE", help="the trace (docs/capacity.md)")
    simulate.add_argument("--scale", type=int, default=None, metavar="N", help="grow the stack's managed GPU pools to N nodes (as up --scale)")
    simulate.add_argument("--speedup", type=float, default=60.0, metavar="X",
                          help="run the trace X times faster than real time (default: 60: an hour in a minute)")
    simulate.add_argument("--out", type=Path, default=Path("simulation"), metavar="DIR", help="where report.json and report.png go (default: ./simulation)")
    simulate.add_argument("--pull-delay", type=float, default=0.0, metavar="SECONDS",
                          help="each pod runs this long after it is bound, standing for its image pull (default 0)")
    simulate.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                          help="stop the replay after this many real seconds and report what finished (default: 900)")
    simulate.add_argument("--keep", action="store_true", help="leave the cluster running (`down STACK` stops it)")
    simulate.add_argument("--state-dir", type=Path, default=None, help="the cluster's files (default: as up's)")
    simulate.add_argument("--bin-dir", type=Path, default=None, metavar="DIR", help=BIN_DIR_HELP)
    simulate.add_argument("--charts-mirror", default=None, metavar="URL", help="as up's --charts-mirror")
    simulate.add_argument("--fleet", action="store_true",
                          help="replay on the manager of the fleet `fleet up STACK` left running (--state-dir: the fleet's), "
                          "each job run by the worker MultiKueue dispatches it to; the report adds the worker of each job, "
                          "the waits to dispatch and each worker's GPU use. The fleet keeps running")
    _fleet_parser(commands)
    build = commands.add_parser("build", help="build the control plane's components into the cache (what `up` does first)")
    tools = commands.add_parser("tools", help="build the Pulumi CLI and the Kubernetes provider into the cache if missing "
                                "and print the folder to put on PATH")
    for command in (build, tools):
        command.add_argument("--bin-dir", type=Path, default=None, metavar="DIR", help=BIN_DIR_HELP)
    return parser


def _fleet_parser(commands) -> None:
    fleet = commands.add_parser(
        "fleet", help="a MultiKueue fleet of the stack: a manager and its workers, each a local cluster",
        description="Start, check or stop a manager and its workers, each a local cluster of the stack on loopback with "
        "its own simulated nodes (each worker's GPU pools grown or shrunk to its --worker nodes as up --scale does, the "
        "manager's to their sum in maxSize, running the stack's own nodes), the manager's ClusterQueues dispatching every job to one worker (docs/fleet.md).")
    actions = fleet.add_subparsers(dest="action", required=True)
    for name, text in (("up", "start the manager and the workers, wire them, and print each one's kubeconfig"),
                       ("down", "stop every member of the fleet and remove its state"),
                       ("status", "say which of each member's processes run")):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument("stack", help="stack name or the path of a stack file")
        action.add_argument("--state-dir", type=Path, default=None,
                            help="the fleet's files, a folder per member (default: a folder per stack in the build cache)")
        if name == "up":
            action.add_argument("--worker", action="append", default=None, metavar="NAME=NODES",
                                help="a worker and its GPU nodes, once per worker (default: "
                                + " ".join(f"{w}={n}" for w, n in DEFAULT_WORKERS.items()) + ")")
            action.add_argument("--worker-lost-timeout", type=int, default=None, metavar="SECONDS",
                                help="seconds the manager waits for a worker it lost before it dispatches the worker's "
                                "jobs again (default: Kueue's, 15 minutes)")
            action.add_argument("--bin-dir", type=Path, default=None, metavar="DIR", help=BIN_DIR_HELP)
            action.add_argument("--charts-mirror", default=None, metavar="URL", help="as up's --charts-mirror")


def _fleet(options) -> int:
    located = locate_stack(options.stack)
    mirror = getattr(options, "charts_mirror", None)
    fleet = LocalFleet(
        located.name, options.state_dir or fleet_state_dir(located.name),
        workers=parse_workers(options.worker) if getattr(options, "worker", None) else dict(DEFAULT_WORKERS),
        project_root=located.project_dir, stack_path=located.path if is_path(options.stack) else None,
        sources=ChartSources.configured(mirror=mirror, stack_dir=located.path.parent) if mirror else None,
        bin_dir=getattr(options, "bin_dir", None), worker_lost_timeout_s=getattr(options, "worker_lost_timeout", None),
        log=lambda line: print(line, file=sys.stderr),
    )
    if options.action == "down":
        killed = fleet.down()
        print(f"stopped the local fleet of {located.name}" + (f" (killed: {', '.join(killed)})" if killed else ""))
        return 0
    if options.action == "status":
        members = fleet.status()
        if not members:
            print(f"no local fleet of {located.name} in {fleet.state}")
            return 1
        for member, processes in members.items():
            stopped = [name for name, alive in processes.items() if not alive]
            print(f"{member}: " + (f"NOT RUNNING: {', '.join(stopped)}" if stopped or not processes else "running"))
        return 0 if all(p and all(p.values()) for p in members.values()) else 1
    for started in fleet.up().all():
        print(f"{started.name} kubeconfig: {started.kubeconfig}")
    return 0


def _cluster(options) -> LocalCluster:
    located = locate_stack(options.stack)
    sources = None
    if getattr(options, "charts_mirror", None):
        sources = ChartSources.configured(mirror=options.charts_mirror, stack_dir=located.path.parent)
    return LocalCluster(
        located.name,
        # A replay's cluster is its own: a cluster `up` left running keeps running beside it.
        options.state_dir or default_state_dir(located.name + ("-simulate" if options.command == "simulate" else "")),
        project_root=located.project_dir,
        stack_path=located.path if is_path(options.stack) else None, sources=sources,
        bin_dir=getattr(options, "bin_dir", None), scale=getattr(options, "scale", None),
        log=lambda line: print(line, file=sys.stderr),
    )


class StackError(LocalError):
    """The stack file or its render is wrong: nothing was started."""

    fix = "fix the stack file as the problems below say (`eks-gpu-training-render STACK` shows the same)"


class ChartsError(LocalError):
    """A chart the stack pins can be had from none of its sources."""

    fix = ("give a source holding it: charts.directory, --charts-mirror or $EKS_GPU_TRAINING_CHARTS_MIRROR "
           "(docs/mirrors.md, where the charts come from)")


def _at_the_edge(error: Exception) -> LocalError:
    """The library's own errors, said as the local cluster's."""
    if isinstance(error, LocalError):
        return error
    if isinstance(error, ChartUnavailable):
        return ChartsError(str(error))
    return StackError(str(error))


def _report(command: str, error: Exception) -> int:
    failure = _at_the_edge(error)
    print(f"local {command} failed: {failure.line()}", file=sys.stderr)
    if failure.details:
        print(failure.details, file=sys.stderr)
    return 1


def main(argv: Optional[list[str]] = None) -> int:
    options = _parser().parse_args(argv)
    try:
        return _fleet(options) if options.command == "fleet" else _run(options)
    except (LocalError, ConfigError, RenderError, ChartUnavailable) as error:
        return _report(options.command, error)


def cli() -> int:
    """The command (``eks-gpu-training-local``, ``python -m``): ``main``, exiting as every command does."""
    return run_command(main)


def _run(options) -> int:
    if options.command == "build":
        return builds.main(["--bin-dir", str(options.bin_dir)] if options.bin_dir else [])
    if options.command == "tools":
        folder = builds.tools_dir(log=lambda line: print(line, file=sys.stderr), prebuilt=builds.prebuilt_dir(options.bin_dir))
        print(f"bin: {folder}")
        return 0
    if options.command == "simulate":
        return _simulate(options)
    cluster = _cluster(options)
    if options.command == "fault":
        for line in _fault(cluster, options):
            print(line)
        return 0
    if options.command == "down":
        killed = cluster.down()
        print(f"stopped the local cluster of {cluster.stack}" + (f" (killed: {', '.join(killed)})" if killed else ""))
        return 0
    if options.command == "status":
        running = cluster.status()
        if not running:
            print(f"no local cluster of {cluster.stack} in {cluster.state}")
            return 1
        for name, alive in running.items():
            print(f"{name}: {'running' if alive else 'NOT RUNNING'}")
        return 0 if all(running.values()) else 1
    if options.dry_run:
        for line in cluster.dry_run(bare=options.bare):
            print(line)
        return 0
    kubeconfig = cluster.up(bare=options.bare)
    print(f"kubeconfig: {kubeconfig}")
    return 0


def _simulate(options) -> int:
    from .simulate import simulate, simulate_fleet

    if not options.fleet:
        return simulate(_cluster(options), options.jobs, speedup=options.speedup, out=options.out, timeout=options.timeout,
                        keep=options.keep, pull_delay_s=options.pull_delay)
    from .local_fleet import running_fleet

    if options.scale is not None or options.keep:
        raise ConfigError([Problem("--fleet", "a fleet's sizes are `fleet up --worker`'s and it keeps running: "
                                   "leave out --scale and --keep")])
    return simulate_fleet(running_fleet(locate_stack(options.stack).name, options.state_dir), options.jobs,
                          speedup=options.speedup, out=options.out, timeout=options.timeout, pull_delay_s=options.pull_delay,
                          log=lambda line: print(line, file=sys.stderr))


def _fault(cluster: LocalCluster, options) -> list[str]:
    """Inject (or clear) the fault the options name; what was done, in words."""
    if (options.node is None) == (options.pool is None) or (options.pool is not None and not (options.fail_checks or options.unpullable
                                                                                              or options.clear)):
        raise FaultError("name the node, or --pool with --fail-checks, --unpullable or --clear")
    if (options.reason or options.message) and not options.condition:
        raise FaultError("--reason and --message go with --condition")
    faults = cluster.faults()
    where = f"node {options.node}" if options.node else f"every node of pool {options.pool}"
    if options.condition:
        fault = condition_fault(options.condition, options.reason, options.message)
        faults.set_condition(options.node, fault)
        return [f"{where}: {fault.type}={fault.status} ({fault.reason}), reported by the simulated agent until --clear"]
    if options.not_ready:
        faults.stop_kubelet(options.node)
        return [f"{where}: the kubelet stopped renewing its lease; the node turns NotReady after the node lifecycle "
                "controller's grace period"]
    if options.delete:
        faults.delete(options.node)
        return [f"{where}: deleted"]
    if options.fail_checks:
        faults.fail_checks(options.fail_checks, node=options.node, pool=options.pool)
        return [f"{where}: the health gate's {options.fail_checks} check fails until --clear"]
    if options.unpullable:
        faults.fail_pulls(options.unpullable, node=options.node, pool=options.pool)
        return [f"{where}: the image of the health gate's {options.unpullable} check cannot be pulled until --clear"]
    undone = faults.clear(node=options.node, pool=options.pool)
    return [f"{where}: {line}" for line in undone] or [f"{where}: nothing to clear"]


if __name__ == "__main__":
    raise SystemExit(cli())
