"""GPU sharing (MIG slices, time-slicing) is refused: the reason, and the node labels through which a
pool would ask for it. The GPU Operator's settings and every GPU pool's labels are checked against
these, so they live below both."""

from __future__ import annotations

GPU_SHARING_REFUSED = (
    "training pods get whole GPUs: sharing a GPU (MIG slices or time-slicing) adds latency to every "
    "step and leaves each process less VRAM"
)
"""Why MIG and time-slicing are refused (the seed's reason)."""

GPU_SHARING_NODE_LABELS = {
    "nvidia.com/mig.config": "makes the GPU Operator's MIG manager partition the node's GPUs",
    "nvidia.com/device-plugin.config": "selects a device-plugin configuration (how time-slicing or MPS is "
    "turned on per node)",
}
"""Node labels through which a pool would ask the GPU Operator for GPU sharing, with what each does.
``nvidia.com/mig.config=all-disabled`` (no MIG) is the one value allowed."""

MIG_DISABLED_CONFIG = "all-disabled"
"""The MIG manager configuration that turns MIG off."""
