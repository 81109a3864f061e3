"""The local cluster's processes as data, and the one supervisor that starts and stops them.

A ``Process`` is a record (name, binary, arguments, environment, the processes it starts after,
how it shows it is ready), built by pure functions from the cluster's ``Layout``; nothing about
it is decided where it starts, so a dry run prints exactly what would run. ``Supervisor.start_all``
starts records in the order their ``after`` names give, each ready before what starts after it.

Every process gets its own session (so a signal reaches it and nothing else), a log file, and a pid
file in the state folder. ``stop_all`` stops exactly the pids recorded there, last started first,
checking that each pid still runs the binary it was started with, so a recycled pid is never
signalled.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from .errors import LocalError

STOP_GRACE_SECONDS = 10
"""How long a process has to exit after SIGTERM before it is killed."""
LOG_TAIL_LINES = 30
READY_TIMEOUT_SECONDS = 120
"""How long a process has to become ready (a cold API server on a busy machine takes tens of seconds)."""


class ProcessFailed(LocalError):
    """A process exited or never became ready; the details carry the tail of its log."""


class ProcessOrderError(LocalError):
    """Processes whose ``after`` names no process, or a cycle of them."""

    fix = "a builder of the local cluster's processes named them wrong; report it with the command line"


@dataclass(frozen=True)
class Ready:
    """When a process counts as started: ``url`` (on loopback) answers 200, its body holding
    ``body`` when that is given. An https URL is checked against ``ca`` and presents the client
    certificate ``client`` (certificate, key) when those are given, else it is not verified (a
    controller's own self-signed serving certificate)."""

    url: str
    body: Optional[str] = None
    ca: Optional[Path] = None
    client: Optional[tuple[Path, Path]] = None
    timeout: float = READY_TIMEOUT_SECONDS

    def describe(self) -> str:
        return f"{self.url} answers 200" + (f" with {self.body!r}" if self.body else "")

    def probe(self) -> bool:
        context = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
            if self.ca is None:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self.client:
                context.load_cert_chain(str(self.client[0]), str(self.client[1]))
        with urllib.request.urlopen(self.url, timeout=5, context=context) as response:  # noqa: S310 - loopback only
            text = response.read().decode(errors="replace")
            return response.status == 200 and (self.body is None or self.body in text)


@dataclass(frozen=True)
class Process:
    """One process of the local cluster, as data: what runs, with what, after what."""

    name: str
    binary: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    """Set on top of this process's own environment."""
    after: tuple[str, ...] = ()
    """The processes that must be started (and ready, where they say how) before this one."""
    ready: Optional[Ready] = None
    """How it shows it is ready; None: started is enough."""

    @property
    def command(self) -> list[str]:
        return [str(self.binary), *self.args]

    def command_line(self) -> str:
        """The command as a shell would run it, its environment first."""
        return shlex.join([*(f"{key}={value}" for key, value in self.env.items()), *self.command])


def start_order(processes: Iterable[Process], started: Iterable[str] = ()) -> list[Process]:
    """``processes`` ordered so that each comes after every process its ``after`` names, otherwise
    in the order given; ``started`` names processes already running. ``ProcessOrderError`` for an
    ``after`` naming neither, or a cycle."""
    pending = list(processes)
    done = set(started)
    known = done | {process.name for process in pending}
    unknown = [f"{process.name} after {name}" for process in pending for name in process.after if name not in known]
    if unknown:
        raise ProcessOrderError("processes start after processes there are not: " + ", ".join(unknown))
    ordered: list[Process] = []
    while pending:
        free = next((process for process in pending if set(process.after) <= done), None)
        if free is None:
            raise ProcessOrderError("processes wait for each other in a cycle: " + ", ".join(
                f"{process.name} after {'+'.join(process.after)}" for process in pending))
        ordered.append(free)
        done.add(free.name)
        pending.remove(free)
    return ordered


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


LOG_LINE_CHARACTERS = 400
"""Controllers log JSON with whole stack traces on one line; the tail keeps each line's start."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    if not path.is_file():
        return "(no log)"
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(line if len(line) <= LOG_LINE_CHARACTERS else line[:LOG_LINE_CHARACTERS] + " ..." for line in tail)


@dataclass
class Started:
    """A process this module started."""

    name: str
    pid: int
    binary: str
    log: Path
    popen: Optional[subprocess.Popen] = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _runs(self.pid, self.binary)

    def failure(self, what: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} {what}", f"read its log, {self.log}",
                             details=f"the last lines of {self.log}:\n{log_tail(self.log)}")


EXEC_SETTLE_READS = 20
"""Reads of an empty command line, 10 ms apart, before a process counts as not running it: a
process the kernel is still exec'ing shows an empty ``/proc/PID/cmdline`` for a moment."""


def _runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is alive and still runs ``binary`` (not a pid the kernel gave to another process)."""
    for _ in range(EXEC_SETTLE_READS):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return False
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
        if cmdline:
            return cmdline.split(b"\0")[0].decode(errors="replace") == binary
        time.sleep(0.01)
    return False


PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal the kernel sends a process when the thread that started it exits."""


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when its starter goes, however that one ends (a
    killed test session included)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    """The processes of one local cluster, recorded in ``<state>/pids.json``. ``attached``
    processes end with the process that started them (a test session's cluster); detached ones
    outlive it (``eks-gpu-training-local up`` leaves the cluster running for ``down``)."""

    def __init__(self, state: Path, *, attached: bool = False):
        self.attached = attached
        self.state = state
        self.logs = state / "logs"
        self.record = state / "pids.json"
        self.started: dict[str, Started] = {}

    def start(self, process: Process) -> Started:
        """Start ``process`` (not waiting until it is ready)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{process.name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                process.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **process.env}, start_new_session=True,
                preexec_fn=_die_with_parent if self.attached else None,
            )
        started = Started(process.name, popen.pid, str(process.binary), log, popen)
        self.started[process.name] = started
        self._write()
        return started

    def launch(self, processes: Iterable[Process], *, log: Callable[[str], None] = print) -> list[Started]:
        """Start ``processes`` in ``start_order`` without waiting for any to be ready: for processes
        that retry what they depend on. ``start_all`` waits for them later."""
        launched = []
        for process in start_order(processes, self.started):
            log(f"starting {process.name}")
            launched.append(self.start(process))
        return launched

    def start_all(self, processes: Iterable[Process], *, log: Callable[[str], None] = print) -> list[Started]:
        """Start ``processes`` in ``start_order``, each ready before the next starts; one already
        ``launch``-ed is only waited for."""
        started = []
        for process in start_order(processes, self.started):
            running = self.started.get(process.name)
            if running is None:
                log(f"starting {process.name}" + (f", ready when {process.ready.describe()}" if process.ready else ""))
                running = self.start(process)
            elif process.ready is not None:
                log(f"waiting for {process.name}: ready when {process.ready.describe()}")
            if process.ready is not None:
                self.wait_for(running, process.ready.probe, timeout=process.ready.timeout, what="ready")
            started.append(running)
        return started

    def _write(self) -> None:
        self.record.write_text(json.dumps(
            {p.name: {"pid": p.pid, "binary": p.binary, "log": str(p.log)} for p in self.started.values()}, indent=2
        ))

    def load(self) -> None:
        """Read what an earlier run started (``down`` and ``status`` run in a new process)."""
        if not self.record.is_file():
            return
        for name, entry in json.loads(self.record.read_text()).items():
            self.started[name] = Started(name, entry["pid"], entry["binary"], Path(entry["log"]))

    def check(self) -> None:
        """Raise with the log's tail for the first recorded process that is no longer running."""
        for process in self.started.values():
            if not process.alive():
                raise process.failure("exited")

    def wait_for(self, process: Started, ready: Callable[[], bool], *, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not process.alive():
                raise process.failure(f"exited before {what}")
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001, S110 - not ready yet, whatever the probe raised
                pass
            time.sleep(0.2)
        raise process.failure(f"was not {what} after {timeout:.0f} s")

    def status(self) -> dict[str, bool]:
        return {name: process.alive() for name, process in self.started.items()}

    def stop(self, name: str) -> bool:
        """Stop the recorded process ``name`` (SIGTERM, then SIGKILL after ``STOP_GRACE_SECONDS``);
        whether it had to be killed."""
        process = self.started.pop(name)
        self._write()
        if not process.alive():
            return False
        _signal(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while process.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed = process.alive()
        if killed:
            _signal(process.pid, signal.SIGKILL)
            while process.alive():
                time.sleep(0.05)
        if process.popen is not None:
            process.popen.wait()
        return killed

    def stop_all(self) -> list[str]:
        """Stop every recorded process (last started first); return the names of those that had to be killed."""
        killed = [name for name in reversed(list(self.started)) if self.stop(name)]
        self.started.clear()
        self.record.unlink(missing_ok=True)
        return killed


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
