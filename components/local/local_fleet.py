"""A MultiKueue fleet on the local control plane: ``eks-gpu-training-local fleet up STACK``.

A manager and its workers, each a local cluster (``LocalCluster``) of the same stack on loopback
with simulated nodes of its own. Each member's managed GPU pools are sized as ``up --scale`` sizes
them (``scale.scale_settings``, the teams' quotas following): a worker's to the nodes it is given,
the manager's to the workers' sum in ``maxSize``, so its quotas add up to the fleet's, with the
stack's own nodes running (``member_stack_file``). The network keeps the stack's small blocks
(``scale.STACK_TOPOLOGY``). The members render one after another and start side by side; then the
manager is wired to its workers as the two deployments would wire them (``multikueue_wiring``), and
``up`` returns once the manager's Kueue reaches every worker.

The fleet's state folder holds each member's state folder and stack file, and ``fleet.json``, which
names the members and their kubeconfigs (``FleetMembers``): what ``verify`` and ``simulate`` read
of a running fleet (``running_fleet``). ``down`` stops every member and removes the folder.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import yaml

from ..config import ConfigError, Problem
from ..offline.chart_sources import ChartSources
from ..platform.stack_files import StackFile, locate_stack, stack_file_name
from ..workloads.kueue_flavors import KUEUE_API_VERSION
from .cluster import LocalCluster, default_state_dir
from .errors import LocalClusterError
from .multikueue_wiring import LocalWorker, connect, set_worker_lost_timeout
from .platform import Applier
from .scale import scale_settings

MANAGER = "manager"
"""The manager's name among the members, and its state folder's."""
DEFAULT_WORKERS = {"east": 1, "west": 2}
"""The workers ``fleet up`` starts unless ``--worker`` names others: each one's name and GPU nodes."""
FLEET_FILE = "fleet.json"
"""The file in the fleet's state folder naming its members (``FleetMembers``)."""
ACTIVE_TIMEOUT_SECONDS = 120.0
"""How long the manager's Kueue has to reach every worker once wired (its ``MultiKueueCluster`` ``Active``)."""
_WORKER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def fleet_state_dir(stack: str) -> Path:
    """Where ``fleet up STACK`` keeps its members unless ``--state-dir`` says: beside ``up``'s clusters."""
    return default_state_dir(f"{stack}-fleet")


def side_by_side(calls: Mapping[str, Callable[[], Any]], *, parked_until: threading.Event) -> None:
    """Each call in a thread of its own, all awaited; then the first failure, in ``calls``' order,
    raised. Each thread then stays, parked, until ``parked_until`` is set: an attached cluster's
    processes get SIGTERM when the thread that started them ends (``PR_SET_PDEATHSIG`` is the
    thread's, not the process's), so the threads that start them must outlive them. They are
    daemons, which end with the process."""
    failures: dict[str, BaseException] = {}
    done = {name: threading.Event() for name in calls}

    def run(name: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread below
            failures[name] = error
        finally:
            done[name].set()
        parked_until.wait()

    for name, call in calls.items():
        threading.Thread(target=run, args=(name, call), name=f"start-{name}", daemon=True).start()
    for name in calls:
        done[name].wait()
    for name in calls:
        if name in failures:
            raise failures[name]


@dataclass(frozen=True)
class FleetMember:
    """One cluster of a local fleet."""

    name: str
    """``manager``, or the worker's name: its ``MultiKueueCluster``'s on the manager."""
    nodes: int
    """Its GPU nodes, its managed GPU pools' together."""
    state: Path
    """Its state folder (``LocalCluster.state``): logs, PKI and the processes it runs."""

    @property
    def kubeconfig(self) -> Path:
        """Its admin kubeconfig (loopback)."""
        return self.state / "kubeconfig"


@dataclass(frozen=True)
class FleetMembers:
    """The clusters of a local fleet, as ``fleet.json`` names them."""

    stack: str
    """The stack every member is made from."""
    manager: FleetMember
    workers: tuple[FleetMember, ...]

    def all(self) -> tuple[FleetMember, ...]:
        """The manager, then the workers in their order."""
        return (self.manager, *self.workers)

    def as_json(self) -> dict[str, Any]:
        def member(m: FleetMember) -> dict[str, Any]:
            return {"name": m.name, "nodes": m.nodes, "state": str(m.state), "kubeconfig": str(m.kubeconfig)}

        return {"stack": self.stack, "manager": member(self.manager), "workers": [member(w) for w in self.workers]}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> "FleetMembers":
        def member(entry: Mapping[str, Any]) -> FleetMember:
            return FleetMember(str(entry["name"]), int(entry["nodes"]), Path(entry["state"]))

        return cls(str(document["stack"]), member(document["manager"]), tuple(member(w) for w in document["workers"]))

    @classmethod
    def read(cls, state: Path) -> Optional["FleetMembers"]:
        """The members a fleet's state folder names; None when it names none."""
        path = state / FLEET_FILE
        return cls.from_json(json.loads(path.read_text())) if path.is_file() else None


def fleet_members(stack: str, state: Path, workers: Mapping[str, int]) -> FleetMembers:
    """The members of a fleet of ``workers`` (name: GPU nodes): the manager with their sum, each in a
    folder of ``state``; ``ConfigError`` naming every bad worker."""
    problems = []
    if not workers:
        problems.append(Problem("--worker", "a fleet needs at least one worker: NAME=NODES"))
    for name, nodes in workers.items():
        if name == MANAGER or not _WORKER_NAME.match(name) or len(name) > 63:
            problems.append(Problem(f"--worker {name}", f"a worker's name is a DNS label other than '{MANAGER}'"))
        if nodes < 1:
            problems.append(Problem(f"--worker {name}", f"a worker has at least one GPU node; got {nodes}"))
    if problems:
        raise ConfigError(problems)
    return FleetMembers(stack, FleetMember(MANAGER, sum(workers.values()), state / MANAGER),
                        tuple(FleetMember(name, nodes, state / name) for name, nodes in workers.items()))


def parse_workers(values: list[str]) -> dict[str, int]:
    """``--worker NAME=NODES`` options as a mapping, in their order; ``ConfigError`` naming each bad one."""
    workers: dict[str, int] = {}
    problems = []
    for value in values:
        name, _, nodes = value.partition("=")
        if not nodes.isdigit():
            problems.append(Problem(f"--worker {value}", "is NAME=NODES, e.g. east=2"))
        elif name in workers:
            problems.append(Problem(f"--worker {value}", f"names worker '{name}' twice"))
        else:
            workers[name] = int(nodes)
    if problems:
        raise ConfigError(problems)
    return workers


def member_stack_file(located: StackFile, member: FleetMember, folder: Path) -> Path:
    """The stack file of one member in ``folder``: the stack's settings, its GPU pools sized to the
    member's. The manager's reach the fleet's size in ``maxSize`` only, and the quotas that follow
    it, keeping the stack's own nodes: a job the manager dispatches runs on a worker, and Kueue
    assigns its topology there (on a ClusterQueue with the MultiKueue check the manager's Kueue
    delays it: kueue v0.19.2, pkg/scheduler/flavorassigner/tas_flavorassigner.go). Its own nodes
    run what it admits without the check."""
    settings = scale_settings(located.settings(), located.namespace(), member.nodes, running_as_is=member.name == MANAGER)
    path = folder / stack_file_name(f"{located.name}-{member.name}")
    path.write_text(yaml.safe_dump({"config": settings}, sort_keys=False))
    return path


def worker_inactive(manager: Applier, name: str) -> str:
    """Why the manager's Kueue does not reach worker ``name`` (its ``MultiKueueCluster``'s ``Active``
    condition); empty when it does."""
    cluster = manager.get(KUEUE_API_VERSION, "MultiKueueCluster", name)
    if cluster is None:
        return "no MultiKueueCluster"
    active = next((c for c in (cluster.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"), None)
    if active is None:
        return "no Active condition yet"
    return "" if active.get("status") == "True" else f"{active.get('reason')}: {active.get('message')}"


def wait_active(manager_kubeconfig: Path, workers: list[str], *, timeout: float = ACTIVE_TIMEOUT_SECONDS) -> None:
    """Wait until the manager's Kueue reaches every worker; ``LocalClusterError`` with each one's reason when it does not."""
    manager = Applier(manager_kubeconfig)
    deadline = time.monotonic() + timeout
    while True:
        waiting = {name: why for name in workers if (why := worker_inactive(manager, name))}
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise LocalClusterError(f"the manager did not reach {', '.join(waiting)} in {timeout:.0f} s",
                                    "read the manager's Kueue log in its state folder",
                                    "\n".join(f"{name}: {why}" for name, why in waiting.items()))
        time.sleep(0.5)


def _prefixed(log: Callable[[str], None], member: str) -> Callable[[str], None]:
    """``log``, each line led by the member it is about."""
    return lambda line: log(f"[{member}] {line}")


@dataclass
class LocalFleet:
    """A manager and its workers of one stack, running or not, described by the fleet's state folder."""

    stack: str
    """Stack name, or a stack file's path."""
    state: Path
    workers: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WORKERS))
    """The workers' names and GPU nodes (default: ``DEFAULT_WORKERS``)."""
    project_root: Optional[Path] = None
    """The Pulumi project whose program runs (default: the stack file's, as ``LocalCluster``'s)."""
    stack_path: Optional[Path] = None
    sources: Optional[ChartSources] = None
    """Where the charts come from (default: the configured sources of the stack's own folder)."""
    bin_dir: Optional[Path] = None
    log: Callable[[str], None] = print
    attached: bool = False
    """The members' processes end with the process that started them (a test session's fleet)."""
    worker_lost_timeout_s: Optional[int] = None
    """The manager's ``multiKueue.workerLostTimeout`` in seconds (default: Kueue's own, 15 minutes)."""
    clusters: dict[str, LocalCluster] = field(default_factory=dict)
    """The members ``up`` started in this process, by name."""
    _starters_parked: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    """Set once the members ``up`` started are stopped: the threads that started them may end (``side_by_side``)."""

    def members(self) -> FleetMembers:
        """The members ``up`` starts; ``ConfigError`` naming each bad worker, and a timeout below a second."""
        if self.worker_lost_timeout_s is not None and self.worker_lost_timeout_s < 1:
            raise ConfigError([Problem("--worker-lost-timeout", f"must be 1 second or more; got {self.worker_lost_timeout_s}")])
        return fleet_members(self._located().name, self.state, self.workers)

    def _located(self) -> StackFile:
        return locate_stack(self.stack_path or self.stack, self.project_root)

    def up(self, *, starting: Callable[[], AbstractContextManager[Any]] = nullcontext) -> FleetMembers:
        """Start every member, all inside one ``starting()`` (a test session's start slot), and wire
        the manager to the workers; the members. The members' stacks render one after another
        (Pulumi's mock engine is process-wide), each member's etcd and API server coming up
        meanwhile; then their control planes' stages run side by side, each in a thread of its own,
        most of it waiting on the API servers. A failure stops every member started before it raises."""
        running = [m.name for m in self._recorded() if (m.state / "pids.json").is_file()]
        if running:
            raise LocalClusterError(f"a local fleet already runs from {self.state} ({', '.join(running)})",
                                    f"`eks-gpu-training-local fleet down {self.stack}` first")
        located = self._located()
        members = self.members()
        sources = self.sources or ChartSources.configured(stack_dir=located.path.parent)
        stacks = self.state / "stacks"
        stacks.mkdir(parents=True, exist_ok=True)
        # Written first, so that `down` finds every member `up` started, however far it got.
        (self.state / FLEET_FILE).write_text(json.dumps(members.as_json(), indent=2))
        try:
            with starting():
                prepared = {}
                for member in members.all():
                    cluster = LocalCluster(
                        located.name, member.state, project_root=located.project_dir,
                        stack_path=member_stack_file(located, member, stacks), sources=sources, bin_dir=self.bin_dir,
                        log=_prefixed(self.log, member.name), attached=self.attached)
                    self.clusters[member.name] = cluster
                    self.log(f"starting {member.name}: {member.nodes} GPU node" + ("s" if member.nodes != 1 else ""))
                    prepared[member.name] = cluster.prepare()
                side_by_side({name: partial(self.clusters[name].start, ready) for name, ready in prepared.items()},
                             parked_until=self._starters_parked)
            self._wire(members)
        except BaseException:
            self._stop()
            raise
        return members

    def _wire(self, members: FleetMembers) -> None:
        manager = self.clusters[MANAGER]
        assert manager.args is not None  # noqa: S101 - set by up
        assert manager.layout is not None  # noqa: S101 - as args
        workers = []
        for member in members.workers:
            layout = self.clusters[member.name].layout
            assert layout is not None  # noqa: S101 - set by up
            workers.append(LocalWorker(member.name, member.kubeconfig, layout.server, layout.pki.ca_cert.read_bytes()))
        connect(manager.kubeconfig, workers, [ns.name for ns in manager.args.scheduling.namespaces], log=self.log)
        if self.worker_lost_timeout_s is not None:
            set_worker_lost_timeout(manager.layout.kueue_config, f"{self.worker_lost_timeout_s}s")
            manager.restart("kueue")
        wait_active(manager.kubeconfig, [w.name for w in workers])

    def _stop(self) -> None:
        for cluster in reversed(list(self.clusters.values())):
            if cluster.supervisor is not None:
                cluster.supervisor.stop_all()
        self._starters_parked.set()

    def _recorded(self) -> tuple[FleetMember, ...]:
        """The members ``fleet.json`` names, else the member folders a run left."""
        members = FleetMembers.read(self.state)
        if members is not None:
            return members.all()
        folders = sorted(p for p in self.state.iterdir() if (p / "pids.json").is_file()) if self.state.is_dir() else []
        return tuple(FleetMember(p.name, 0, p) for p in folders)

    def down(self) -> list[str]:
        """Stop every member's processes and remove the fleet's state folder; the processes that had to be killed."""
        killed = []
        for member in self._recorded():
            killed += [f"{member.name} {name}" for name in LocalCluster(self.stack, member.state).down()]
        self._starters_parked.set()
        shutil.rmtree(self.state, ignore_errors=True)
        return killed

    def status(self) -> dict[str, dict[str, bool]]:
        """Whether each member's processes run, by member and process; empty when no fleet was started here."""
        return {member.name: LocalCluster(self.stack, member.state).status() for member in self._recorded()}


def running_fleet(stack: str, state: Optional[Path] = None) -> FleetMembers:
    """The members of the fleet ``fleet up STACK`` left running (in ``state``, else the default folder);
    ``LocalClusterError`` when none runs there, or a member's processes do not all run."""
    folder = state or fleet_state_dir(stack)
    members = FleetMembers.read(folder)
    if members is None:
        raise LocalClusterError(f"no local fleet of {stack} in {folder}", f"`eks-gpu-training-local fleet up {stack}` first")
    stopped = [m.name for m in members.all() if not all(LocalCluster(stack, m.state).status().values() or [False])]
    if stopped:
        raise LocalClusterError(f"the local fleet of {stack} in {folder} is not running: {', '.join(stopped)}",
                                f"`eks-gpu-training-local fleet status {stack}` says which process stopped")
    return members
