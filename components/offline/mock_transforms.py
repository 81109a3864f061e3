"""The ``transforms`` a program's resources carry, run as the Pulumi engine runs them, for the SDK's
mock monitor, which leaves them alone: before a resource registers, its own transforms, then its
parents', then the stack's, each on the inputs the one before left."""

from __future__ import annotations

import inspect
from typing import Any, Sequence

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await


def run_transforms(request: Any, transforms: Sequence[Any]) -> None:
    """Rewrite ``request.object`` (a ``RegisterResourceRequest``'s inputs) by ``transforms``, in order;
    the options stay as they are (the engine would apply a transform's options too)."""
    _ensure_event_loop()  # the monitor's worker thread's, which (de)serialising needs
    for transform in transforms:
        args = pulumi.ResourceTransformArgs(request.custom, request.type, request.name,
                                            rpc.deserialize_properties(request.object), pulumi.ResourceOptions())
        result = transform(args)
        result = _sync_await(result) if inspect.isawaitable(result) else result
        if result is not None:
            request.object.CopyFrom(_sync_await(rpc.serialize_properties(result.props, {})))
