"""A job-mix trace for ``eks-gpu-training-local simulate``: which team submits which job, when, on
how many nodes and for how long.

A trace file is YAML::

    jobs:
      - name: pretrain-1        # optional: job-<row>; a DNS label of at most 40 characters
        team: pretraining       # a scheduling.teams[] name (stacks with teams), or
        # namespace: training   # a scheduling.namespaces[] name (stacks without teams)
        app: rl-training        # optional: the scheduling.trainingApps[] entry the job copies
        kind: JobSet            # optional: Job, JobSet or TrainJob (default: the app's)
        nodes: 16
        duration: 2h            # how long each pod runs once it runs: 90, 90s, 15m, 2h, 1h30m
        submit: 10m             # when, from the start of the replay (default: 0)
        priority: training-critical   # optional: a PriorityClass of the stack (default: the app's)

Each job is a copy of a training app of the stack (the first, without ``app``) with the row's
name, nodes, namespace, kind and priority, built by the functions the stack's own apps are
(``scheduling_policies.training_job_spec``). Rows are checked against the stack before anything
starts; every problem is reported with its row and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..config.job_api_settings import JOB_KINDS
from ..addons.job_apis import jobset_needed, trainer_needed
from ..facts import yaml_io
from ..workloads.fleet_capacity import fleet_capacity
from ..workloads.teams import team_fit_problems

ROW_FIELDS = ("name", "team", "namespace", "app", "kind", "nodes", "duration", "submit", "priority")
NAME_MAX = 40
"""Longest job name: a JobSet's pods are named ``<name>-node-0-<index>-<suffix>`` within 63 characters."""
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION = re.compile(r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")


@dataclass(frozen=True)
class TraceJob:
    """One row of a trace, checked and with its defaults filled in."""

    name: str
    team: Optional[str]
    namespace: str
    app: str
    kind: str
    nodes: int
    duration_s: float
    submit_s: float
    priority: str
    pool: str
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def parse_duration(value: Any) -> Optional[float]:
    """Seconds of ``90``, ``"90s"``, ``"15m"``, ``"2h"`` or ``"1h30m"``; None when it is none of those."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    match = _DURATION.match(text)
    if not text or match is None or not any(match.groupdict().values()):
        return None
    return sum(float(match[unit] or 0) * factor for unit, factor in (("h", 3600), ("m", 60), ("s", 1)))


def _pool_nodes(args: GpuTrainingPlatformArgs) -> dict[str, tuple[int, int]]:
    """Per pool: the most nodes it can have and GPUs per node (its smallest type's)."""
    return {capacity.pool.name: (capacity.nodes, capacity.smallest_node_gpus) for capacity in fleet_capacity(args)}


def read_trace(path: Path, args: GpuTrainingPlatformArgs) -> list[TraceJob]:
    """The trace at ``path``, checked against the stack's arguments; ``ConfigError`` with every problem."""
    if not path.is_file():
        raise ConfigError([Problem(str(path), "no such trace file")])
    try:
        document = yaml_io.load(path.read_text())
    except Exception as error:  # noqa: BLE001 - PyYAML's errors have no common base beyond YAMLError's parents
        raise ConfigError([Problem(str(path), f"not YAML: {' '.join(str(error).split())}")]) from None
    rows = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ConfigError([Problem(f"{path}: jobs", "must be a non-empty list of jobs")])
    return check_rows(rows, args, str(path))


def check_rows(rows: list[Any], args: GpuTrainingPlatformArgs, source: str = "trace") -> list[TraceJob]:
    problems: list[Problem] = []
    jobs: list[TraceJob] = []
    names: dict[str, int] = {}
    for i, row in enumerate(rows):
        path = f"{source}: jobs[{i}]"
        if not isinstance(row, dict):
            problems.append(Problem(path, "must be a mapping of " + ", ".join(ROW_FIELDS)))
            continue
        found = _check_row(row, i, path, args)
        if isinstance(found, list):
            problems.extend(found)
            continue
        if found.name in names:
            problems.append(Problem(f"{path}.name", f"'{found.name}' is the name of jobs[{names[found.name]}] too"))
            continue
        names[found.name] = i
        jobs.append(found)
    if problems:
        raise ConfigError(problems)
    return sorted(jobs, key=lambda job: job.submit_s)


def _check_row(row: dict[str, Any], index: int, path: str, args: GpuTrainingPlatformArgs) -> TraceJob | list[Problem]:  # noqa: C901, PLR0915 - one independent check per trace-row field, each a row of the Refused-by table under this name
    problems = [Problem(f"{path}.{key}", f"is not a field of a trace row; allowed: {', '.join(ROW_FIELDS)}")
                for key in row if key not in ROW_FIELDS]
    scheduling = args.scheduling
    name = str(row.get("name", f"job-{index}"))
    if len(name) > NAME_MAX or not _DNS_LABEL.match(name):
        problems.append(Problem(f"{path}.name", f"'{name}' must be a DNS label (a-z, 0-9, '-') of at most {NAME_MAX} characters"))
    teams = {team.name: team for team in scheduling.teams}
    namespaces = [space.name for space in scheduling.namespaces]
    team = row.get("team")
    namespace = row.get("namespace")
    if teams:
        if team not in teams:
            problems.append(Problem(f"{path}.team", f"must be one of the stack's teams: {', '.join(teams)}"
                                    + ("" if team is None else f"; got '{team}'")))
        elif namespace is not None and namespace not in teams[team].namespaces:
            problems.append(Problem(f"{path}.namespace", f"must be one of team {team}'s namespaces: {', '.join(teams[team].namespaces)}"))
        elif namespace is None:
            namespace = teams[team].namespaces[0]
    elif team is not None:
        problems.append(Problem(f"{path}.team", "the stack has no scheduling.teams; give namespace instead"))
    elif namespace is None:
        namespace = namespaces[0]
    elif namespace not in namespaces:
        problems.append(Problem(f"{path}.namespace", f"must be one of the stack's namespaces: {', '.join(namespaces)}"))
    apps = {app.name: app for app in scheduling.training_apps if app.job is not None}
    app_name = row.get("app", next(iter(apps), None))
    app = apps.get(str(app_name)) if app_name is not None else None
    if app is None:
        problems.append(Problem(f"{path}.app", f"must be one of the stack's training apps with a job: {', '.join(apps)}"
                                if apps else "the stack has no scheduling.trainingApps with a job to copy"))
    kind = str(row.get("kind", app.kind if app is not None else "Job"))
    if kind not in JOB_KINDS:
        problems.append(Problem(f"{path}.kind", f"must be one of {', '.join(JOB_KINDS)}; got '{kind}'"))
    elif kind in ("JobSet", "TrainJob") and not jobset_needed(args):
        problems.append(Problem(f"{path}.kind", f"the stack installs no JobSet controller for a {kind} (jobSet.enabled)"))
    elif kind == "TrainJob" and not trainer_needed(args):
        problems.append(Problem(f"{path}.kind", "the stack installs no Kubeflow Trainer for a TrainJob (trainer.enabled)"))
    nodes = row.get("nodes")
    pools = _pool_nodes(args)
    pool = None
    if app is not None:
        from ..workloads.scheduling_policies import app_pool

        capacity = app_pool(app, args)
        pool = capacity.pool.name if capacity is not None else None
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        problems.append(Problem(f"{path}.nodes", f"must be a whole number of nodes, 1 or more; got {nodes!r}"))
    elif pool is not None and nodes > pools[pool][0]:
        problems.append(Problem(f"{path}.nodes", f"{nodes} nodes exceed pool {pool}'s {pools[pool][0]}"))
    duration = parse_duration(row.get("duration"))
    if duration is None or duration <= 0:
        problems.append(Problem(f"{path}.duration", f"must be a duration above 0 (90, 90s, 15m, 2h, 1h30m); got {row.get('duration')!r}"))
    submit = parse_duration(row.get("submit", 0))
    if submit is None or submit < 0:
        problems.append(Problem(f"{path}.submit", f"must be a duration from the start, 0 or more (0, 90s, 15m); got {row.get('submit')!r}"))
    classes = [c.name for c in scheduling.priority_classes]
    priority = row.get("priority", app.priority_class if app is not None and app.priority_class else None)
    if priority is None and classes:
        from ..workloads.scheduling_policies import default_priority_class

        priority = default_priority_class(scheduling.priority_classes)
    if priority not in classes:
        problems.append(Problem(f"{path}.priority", f"must be one of the stack's priority classes: {', '.join(classes)}"))
    if problems or app is None or pool is None or namespace is None:
        return problems
    assert isinstance(nodes, int)  # noqa: S101 - checked above, where a problem returns
    assert duration is not None  # noqa: S101 - as nodes
    assert submit is not None  # noqa: S101 - as nodes
    gpus_per_node = app.gpus_per_node or pools[pool][1]
    fit = team_fit_problems(args, namespace, pool, nodes * gpus_per_node, f"{path}.nodes", f"{nodes} nodes")
    if fit:
        return fit
    return TraceJob(name=name, team=team, namespace=str(namespace), app=app.name, kind=kind, nodes=nodes,
                    duration_s=duration, submit_s=submit, priority=str(priority), pool=pool, gpus_per_node=gpus_per_node)
