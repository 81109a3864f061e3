"""What every command-line entry point (``[project.scripts]``) runs around its ``main``, the
entry points of the one-shot offline commands, and the collector's pause the commands and the mock
engine (``offline.engine``) share."""

from __future__ import annotations

import gc
import importlib
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


def one_shot(module: str) -> int:
    """``module``'s ``main`` as a command (``run_command``), with the collector off from before the
    module's first import to the exit. A one-shot offline command's objects (the Pulumi SDKs'
    classes, the stack's graph, the schemas a check reads) nearly all live to its end, so each
    collection walks them again for nothing (docs/benchmarks.md, "render", has what it saves).
    This module imports nothing else, so the collector is off before the command's module loads
    the SDKs. Only for commands that end: ``verify`` and ``local`` keep the collector."""
    gc.disable()
    return run_command(importlib.import_module(module).main)


def render() -> int:
    """``eks-gpu-training-render`` (``offline.render.__main__``)."""
    return one_shot("eks_gpu_training.offline.render.__main__")


def check() -> int:
    """``eks-gpu-training-check`` (``offline.check.__main__``)."""
    return one_shot("eks_gpu_training.offline.check.__main__")


def lock_images() -> int:
    """``eks-gpu-training-lock-images`` (``offline.lock_images``)."""
    return one_shot("eks_gpu_training.offline.lock_images")


def preflight() -> int:
    """``eks-gpu-training-preflight`` (``offline.preflight``)."""
    return one_shot("eks_gpu_training.offline.preflight")


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
