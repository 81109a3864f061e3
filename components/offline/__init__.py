"""Offline tooling: the mock engine that runs a program without a cloud, ``render`` (the stack's
resources and Kubernetes objects as files) and ``check`` (those files against upstream schemas),
the generated configuration reference (``docs/configuration.md``) and node-condition table, and
``eks-gpu-training-preflight`` (the pre-flight checks for an existing cluster). Builds on every
layer; nothing imports it."""

from .engine import *  # noqa: F403 - the package is the engine's names under a shorter import
from .engine import __all__  # noqa: F401 - so the package exports exactly those
