"""Offline tooling: the mock engine that runs a program without a cloud, ``render`` (the stack's
resources and Kubernetes objects as files) and ``check`` (those files against upstream schemas),
and the generated configuration reference (``docs/configuration.md``). Builds on every layer; nothing imports it."""

from .engine import *  # noqa: F403
from .engine import __all__  # noqa: F401
