"""The gate and the programs beside the local cluster wake when a watch says what they read changed."""

from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace

import pytest

from eks_gpu_training.healthgate import changes
from eks_gpu_training.healthgate.changes import Changes, run_rounds

HANG_GUARD_SECONDS = 60
"""How long a test waits for the watcher's thread before calling it hung: it returns as soon as the
thread acts, so only a broken watcher ever waits this long, however loaded the machine."""


class Stream:
    """A watch's response: each chunk put in ``chunks`` arrives; None ends the watch."""

    def __init__(self):
        self.chunks: queue.Queue = queue.Queue()
        self.released = threading.Event()

    def stream(self, amt=None, decode_content=None):
        while (chunk := self.chunks.get()) is not None:
            yield chunk

    def release_conn(self):
        self.released.set()


def test_a_watch_event_wakes_the_waiting_program_and_quiet_lets_it_sleep():
    watch = Stream()
    found = Changes(lambda: watch)
    assert found.wait(HANG_GUARD_SECONDS)  # the first round reads everything
    assert not found.wait(0.05)
    watch.chunks.put(b'{"type":"MODIFIED"}\n')
    assert found.wait(HANG_GUARD_SECONDS)
    assert not found.wait(0.05)


def test_a_watch_that_ends_or_cannot_open_is_opened_again_and_wakes_the_program(monkeypatch):
    monkeypatch.setattr(changes, "REOPEN_SECONDS", 0.01)
    opened, first = [], Stream()

    def open_watch():
        opened.append(len(opened))
        if len(opened) == 1:
            return first
        if len(opened) == 2:
            raise ConnectionError("the API server restarting")
        return Stream()

    found = Changes(open_watch)
    found.wait(HANG_GUARD_SECONDS)
    first.chunks.put(None)  # the API server ends the watch
    assert first.released.wait(HANG_GUARD_SECONDS)
    assert found.wait(HANG_GUARD_SECONDS)
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while len(opened) < 3 and time.monotonic() < deadline:
        found.wait(0.05)
    assert len(opened) >= 3


def test_a_watch_refused_again_and_again_is_tried_again_less_and_less_often(monkeypatch):
    pauses, opened = [], threading.Event()
    monkeypatch.setattr(changes, "time", SimpleNamespace(sleep=pauses.append))

    def open_watch():
        if len(pauses) == 6:
            opened.set()
            return Stream()  # allowed at last: the pause starts again from the first
        if len(pauses) > 6:
            return Stream()
        raise PermissionError("403: the Role is not applied yet")

    Changes(open_watch)
    assert opened.wait(HANG_GUARD_SECONDS)
    assert pauses == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_a_stopped_watch_is_not_opened_again_once_it_ends(monkeypatch):
    monkeypatch.setattr(changes, "REOPEN_SECONDS", 0.01)
    opened, first = [], Stream()

    def open_watch():
        opened.append(len(opened))
        return first if len(opened) == 1 else Stream()

    found = Changes()
    stopped = found.follow(open_watch)
    assert found.wait(HANG_GUARD_SECONDS)
    stopped.set()
    first.chunks.put(None)  # the API server ends the watch
    assert first.released.wait(HANG_GUARD_SECONDS)
    assert found.wait(HANG_GUARD_SECONDS)  # the end still wakes the program, which reads once more
    assert not found.wait(0.2)
    assert opened == [0]


def test_wake_ends_a_wait_at_once():
    found = Changes()
    assert found.wait(HANG_GUARD_SECONDS)
    threading.Timer(0.01, found.wake).start()
    assert found.wait(HANG_GUARD_SECONDS)


class Stop(Exception):
    pass


@pytest.mark.parametrize(("busy", "waits"), [(True, []), (False, [60, 60])])
def test_rounds_are_spaced_by_the_interval_and_wait_for_a_change_only_when_nothing_is_under_way(busy, waits, monkeypatch):
    rounds, slept, waited = [], [], []
    clock = [1000.0]  # each round takes half a second of this clock, whatever the machine's load
    monkeypatch.setattr(changes, "time", SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))

    class Recorded:
        def wait(self, timeout):
            waited.append(timeout)
            return False

    def round_():
        rounds.append(True)
        clock[0] += 0.5
        if len(rounds) == 3:
            raise Stop
        return busy

    with pytest.raises(Stop):
        run_rounds(round_, Recorded(), interval=2, idle=60, sleep=slept.append)
    assert slept == [1.5, 1.5]  # the interval less the round's own time
    assert waited == waits
