"""Offline tooling: the mock engine that runs a program without a cloud, ``render`` (the stack's
resources and Kubernetes objects as files) and ``check`` (those files against upstream schemas),
the generated configuration reference (``docs/configuration.md``) and node-condition table, and
``eks-gpu-training-preflight`` (the pre-flight checks for an existing cluster). Builds on every
layer; nothing imports it.

The package's names are the mock engine's (``offline.engine``), imported when first used (PEP 562),
so a module of the package that needs no engine (``offline.agent_data``, which the local cluster's
node-health reporter reads) loads without the Pulumi SDKs."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import *  # noqa: F403 - the package is the engine's names under a shorter import
    from .engine import __all__ as __all__


def __getattr__(name: str) -> Any:
    # ``from eks_gpu_training.offline import agent_data`` asks the package for the name before it
    # imports the submodule: a submodule's name is not the engine's, and needs no engine.
    if importlib.util.find_spec(f".{name}", __name__) is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    engine = importlib.import_module(".engine", __name__)
    if name != "__all__" and name not in engine.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(engine, name)
    globals()[name] = value
    return value
