"""Slots for starting local clusters, shared by the tier's xdist workers: at most ``SLOTS`` clusters
start at once, the one whose group comes first in ``conftest.GROUP_ORDER`` first.

A start keeps about one core busy for 15 to 25 s (the API server taking in the charts' CRDs, the
controllers' first lists, the platform's objects). The tier's first eight groups all start a
cluster as the session begins: side by side on two cores each took about 110 s, and the fault
modules' controller clocks (a deleted node's 40 s, an unreachable node's grace period) started
only then. In slots, the groups that wait longest on those clocks start first and the rest follow;
the last start ends about when it did.

Each waiting start leaves a ticket (its group's rank and its pid) in the shared folder and takes a
free slot (a file it holds an exclusive ``flock`` on) once no live ticket ranks before its own.
The kernel drops a lock whose process dies, and a dead process's ticket is passed over.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

SLOTS = 3
"""Clusters starting at once: a start keeps about one of the two cores busy, and the started
groups' tests need some of them too."""
SETTLE_SECONDS = 2.0
"""How long a start waits with its ticket before it takes a slot, so the first wave's workers,
which reach their first start within a second or two of each other, go in their groups' order."""
POLL_SECONDS = 0.2

folder: Optional[Path] = None
"""The shared folder (None: no slots, each start goes at once); set for the session by conftest."""
rank = 0
"""The rank of the group whose test runs now on this worker; set by conftest before each test."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _first_in_line(tickets: Path, mine: str) -> bool:
    waiting = []
    for ticket in tickets.iterdir():
        _, ticket_rank, pid = ticket.name.split("-")
        if ticket.name == mine or _alive(int(pid)):
            waiting.append((int(ticket_rank), int(pid)))
    return min(waiting) == (rank, os.getpid())


def _take_free_slot() -> Optional[int]:
    assert folder is not None
    for slot in range(SLOTS):
        descriptor = os.open(folder / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        return descriptor
    return None


@contextmanager
def start_slot() -> Iterator[None]:
    """Hold a start slot for the ``with`` block: wait for one when all are taken or an earlier
    group's start waits."""
    if folder is None:
        yield
        return
    tickets = folder / "tickets"
    tickets.mkdir(parents=True, exist_ok=True)
    mine = f"ticket-{rank:04d}-{os.getpid()}"
    ticket = tickets / mine
    ticket.touch()
    descriptor = None
    try:
        time.sleep(SETTLE_SECONDS)
        while descriptor is None:
            if _first_in_line(tickets, mine):
                descriptor = _take_free_slot()
            if descriptor is None:
                time.sleep(POLL_SECONDS)
        ticket.unlink()
        yield
    finally:
        ticket.unlink(missing_ok=True)
        if descriptor is not None:
            os.close(descriptor)
