"""Start, watch and stop the local control plane's processes, each by the pid it was started with.

Every process gets its own session (so a signal reaches it and nothing else), a log file, and a pid
file in the state folder. ``stop_all`` stops exactly the pids recorded there, checking that each pid
still runs the binary it was started with, so a recycled pid is never signalled.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

STOP_GRACE_SECONDS = 10
"""How long a process has to exit after SIGTERM before it is killed."""
LOG_TAIL_LINES = 30


class ProcessFailed(RuntimeError):
    """A process exited or never became ready; the message carries the tail of its log."""


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
        return ProcessFailed(f"{self.name} {what}; the last lines of {self.log}:\n{log_tail(self.log)}")


def _runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is alive and still runs ``binary`` (not a pid the kernel gave to another process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == binary


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

    def start(self, name: str, command: list[str], *, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None) -> Started:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
                preexec_fn=_die_with_parent if self.attached else None,
            )
        process = Started(name, popen.pid, command[0], log, popen)
        self.started[name] = process
        self._write()
        return process

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

    def stop_all(self) -> list[str]:
        """Stop every recorded process (last started first); return the names of those that had to be killed."""
        killed = []
        for process in reversed(list(self.started.values())):
            if not process.alive():
                continue
            _signal(process.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            while process.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            if process.alive():
                _signal(process.pid, signal.SIGKILL)
                killed.append(process.name)
                while process.alive():
                    time.sleep(0.05)
            if process.popen is not None:
                process.popen.wait()
        self.started.clear()
        self.record.unlink(missing_ok=True)
        return killed


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
