"""Wake a program when what it reads changes, instead of on a clock.

The health gate and the programs that stand in for EKS beside a local cluster (``local.node_health``,
``local.node_repair``) decide from lists of nodes, pods and jobs. Listing them every few seconds
kept each program and the API server busy while nothing happened, and a gate's list of every node
grows with the cluster. Each now follows watches of what it reads: a watch event only says that
something changed, and the program lists and decides as before. While work is under way on a clock
of its own (a check running its simulated seconds, a repair's wait and drain, a write refused to be
tried again), it still reads every round.

A watch ends (the API server's ``timeout_seconds``, a restart, a dropped connection); it is opened
again, and the program woken, since a change may have come in between. One that cannot open (the
API server down, the program's RBAC not applied yet) is tried again after a pause that doubles up
to ``REOPEN_MAX_SECONDS``.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

WATCH_SECONDS = 300
"""How long one watch stays open before the API server ends it and it is opened again."""
REOPEN_SECONDS = 1.0
"""The pause before a watch that failed to open is tried again; it doubles at each failure in a row."""
REOPEN_MAX_SECONDS = 8.0
"""The longest such pause: a watch refused for good (RBAC that does not allow it) costs one request
this often, and one allowed late (its Role applied after the program started) opens within it."""
WATCH: dict[str, Any] = {"watch": True, "_preload_content": False, "timeout_seconds": WATCH_SECONDS,
         # The client gives up on a watch the API server has stopped answering.
         "_request_timeout": (10, WATCH_SECONDS + 30)}
"""The arguments that make a ``list_*`` call of the Kubernetes client a watch whose events are not
parsed (``Changes`` only needs to know that one came)."""


class Changes:
    """Watches, each opened by calling one of ``watches`` (a ``list_*`` call with ``WATCH``), that
    set one flag whenever an event comes: ``wait`` sleeps until then."""

    def __init__(self, *watches: Callable[[], Any]):
        self._changed = threading.Event()
        self._changed.set()  # the first round reads everything
        for open_watch in watches:
            self.follow(open_watch)

    def follow(self, open_watch: Callable[[], Any]) -> threading.Event:
        """Follow one more watch from now on (one a program's settings turned on). Setting the Event
        returned ends the following (the settings turned it off): the watch is not opened again once
        it ends, which it does within ``WATCH_SECONDS``, and a refused one is not tried again."""
        stopped = threading.Event()
        threading.Thread(target=self._follow, args=(open_watch, stopped), daemon=True).start()
        return stopped

    def _follow(self, open_watch: Callable[[], Any], stopped: threading.Event) -> None:
        pause = REOPEN_SECONDS
        while not stopped.is_set():
            try:
                response = open_watch()
                pause = REOPEN_SECONDS
                try:
                    for _ in response.stream(amt=None, decode_content=False):
                        self._changed.set()
                finally:
                    response.release_conn()
            except Exception:  # noqa: BLE001 - the API server restarting, or the watch not allowed yet: open it again
                time.sleep(pause)
                pause = min(2 * pause, REOPEN_MAX_SECONDS)
            self._changed.set()

    def wake(self) -> None:
        """End a ``wait`` now, as a change would (a program told to stop)."""
        self._changed.set()

    def wait(self, timeout: float) -> bool:
        """Sleep until something watched changed since the last ``wait``, or ``timeout`` seconds;
        whether something did."""
        changed = self._changed.wait(timeout)
        self._changed.clear()
        return changed


def run_rounds(round_: Callable[[], bool], changes: Changes, *, interval: float, idle: float,
               sleep: Callable[[float], None] = time.sleep) -> None:
    """Run ``round_`` for ever: at most once every ``interval`` seconds, and, once a round says
    nothing is under way (False), only after ``changes`` saw a change or ``idle`` seconds passed."""
    while True:
        started = time.monotonic()
        busy = round_()
        sleep(max(0.0, interval - (time.monotonic() - started)))
        if not busy:
            changes.wait(idle)
