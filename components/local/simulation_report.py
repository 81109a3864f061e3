"""``simulate``'s report: a table of each job, pool and team (and worker, on a fleet), ``report.json``
and ``report.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from .recorder import JobResult, Report


def table(report: Report) -> list[str]:
    """The report as text: a row per job, then per pool and per team."""
    def minutes(value: Optional[float]) -> str:
        return "-" if value is None else f"{value / 60:.1f}"

    lines = [f"trace {report.trace} on stack {report.stack}" + (f" at --scale {report.scale}" if report.scale else "")
             + f", {report.speedup:g}x speed, {report.wall_s:.0f} s wall" + ("" if report.complete else ", NOT every job finished"),
             f"admissions per second: {report.admissions_per_second:.3f} (trace time)"
             + (f", with a {report.pull_delay_s:g} s image pull per pod" if report.pull_delay_s else "")
             + f"; jobs evicted after admission: {sum(1 for job in report.jobs if job.evicted)}",
             "", f"{'job':<28} {'team':<14} {'kind':<8} {'nodes':>5} {'submit':>7} {'admit':>7} {'wait':>7} {'end':>7} "
             + (f"{'worker':<12} " if report.clusters else "") + "blocks (min)"]
    for job in report.jobs:
        blocks = f"{len(job.blocks)} L3" + (f" / {len(job.layer2_blocks)} L2" if job.layer2_blocks else "") if job.blocks else "-"
        lines.append(f"{job.name:<28} {(job.team or job.namespace):<14} {job.kind:<8} {job.nodes:>5} {minutes(job.submitted):>7} "
                     f"{minutes(job.admitted):>7} {minutes(job.wait_s):>7} {minutes(job.finished):>7} "
                     + (f"{job.cluster or '-':<12} " if report.clusters else "") + blocks)
    if report.clusters:
        lines += ["", f"{'worker':<20} {'jobs':>5} {'mean wait':>10} {'max wait':>9} {'GPUs':>6} {'mean use':>9} {'peak used':>10} (wait: min)"]
        for cluster in report.clusters:
            lines.append(f"{cluster['name']:<20} {cluster['jobs']:>5} {minutes(cluster['mean_wait_s']):>10} "
                         f"{minutes(cluster['max_wait_s']):>9} {cluster['gpus']:>6} {cluster['mean_utilization']:>9.0%} "
                         f"{cluster['peak_gpus_used']:>10}")
    lines += ["", f"{'pool':<20} {'GPUs':>6} {'mean use':>9} {'peak used':>10}"]
    for pool in report.pools:
        lines.append(f"{pool['name']:<20} {pool['gpus']:>6} {pool['mean_utilization']:>9.0%} {pool['peak_gpus_used']:>10}")
    lines += ["", f"{'team':<20} {'jobs':>5} {'mean wait':>10} {'max wait':>9} {'max queued':>11} (min)"]
    for team in report.teams:
        lines.append(f"{team['name']:<20} {team['jobs']:>5} {minutes(team['mean_wait_s']):>10} {minutes(team['max_wait_s']):>9} {team['max_queued']:>11}")
    if report.wait_reasons:
        lines += ["", "why jobs waited (Kueue's last word before each admission; jobs):"]
        lines += [f"  {count:>4}  {reason}" for reason, count in report.wait_reasons.items()]
    return lines


def write_report(report: Report, out: Path) -> list[Path]:
    """``report.json`` and ``report.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "report.json"
    json_path.write_text(json.dumps(report.as_json(), indent=1) + "\n")
    png_path = out / "report.png"
    plot(report, png_path)
    return [json_path, png_path]


def plot(report: Report, path: Path) -> None:
    """Three panels over trace time: each pool's GPUs in use (of its nodes present: a Karpenter
    pool's come and go), each team's queued jobs, and each job's wait against its submit time. On
    a fleet, the use and the waits are per worker."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import MaxNLocator

    figure, (use, queued, waits) = pyplot.subplots(3, 1, figsize=(9, 9), sharex=True, constrained_layout=True)
    for pool in report.clusters or report.pools:
        samples = pool["samples"]
        use.step([s[0] / 60 for s in samples], [100 * s[1] / s[2] if s[2] else 0 for s in samples], where="post",
                 label=f"{pool['name']} ({pool['gpus']} GPUs, mean {pool['mean_utilization']:.0%})")
    use.set_ylabel("GPUs in use (%)")
    use.set_ylim(0, 105)
    use.legend(loc="lower right", fontsize="small")
    for team in report.teams:
        samples = team["samples"]
        queued.step([s[0] / 60 for s in samples], [s[1] for s in samples], where="post", label=team["name"])
    queued.set_ylabel("jobs queued")
    queued.yaxis.set_major_locator(MaxNLocator(integer=True))
    queued.legend(loc="upper right", fontsize="small")
    def key_of(job: JobResult) -> str:
        return (job.cluster or "not dispatched") if report.clusters else (job.team or job.namespace)

    for key in sorted({key_of(job) for job in report.jobs}):
        mine = [job for job in report.jobs if key_of(job) == key and job.submitted is not None and job.wait_s is not None]
        waits.scatter([job.submitted / 60 for job in mine if job.submitted is not None],
                      [(job.wait_s or 0) / 60 for job in mine], s=[8 + 2 * job.nodes for job in mine], label=key, alpha=0.7)
    waits.set_ylabel("wait to dispatch (min)" if report.clusters else "wait (min)")
    waits.set_xlabel("trace time (min); marker size: nodes")
    waits.legend(loc="best", fontsize="small")
    title = f"{report.trace} on {report.stack}" + (f", --scale {report.scale}" if report.scale else "")
    if report.clusters:
        title += f", dispatched to {', '.join(c['name'] for c in report.clusters)}"
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
