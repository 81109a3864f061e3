"""What every command-line entry point (``[project.scripts]``) runs around its ``main``, and the
collector's pause the commands and the mock engine (``offline.engine``) share."""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Callable, Iterator


def run_command(main: Callable[[], int]) -> int:
    """``main``, then an exit without the interpreter's last collection. A command's objects, the
    Pulumi SDKs' classes and a stack's graph among them, live to its end: the collection at exit
    would walk every one of them only to free memory the process gives back as it ends (1.1 s
    after a local ``up``, about half a second after a render). ``main`` stays a plain function for
    tests, which call it in a process that goes on."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    return code


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic collection inside the block, then as before. A render's objects are the
    program's graph and the Pulumi SDKs' classes it loads, nearly all alive to its end: automatic
    collections would walk them again and again for nothing (about half a second of a render)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
