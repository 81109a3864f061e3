"""``images.lock``: the digest each image of a stack has in its registry, beside the stack files.

``eks-gpu-training-lock-images STACK`` (``offline.lock_images``) asks each image's registry, or its
mirror, for the digest of the reference the stack names and writes the lock; a team commits it like
``charts.lock``. The stack then reads it into ``images.digests`` (references the stack and the
Dockerfiles name) and ``images.chartTags`` (the values key of each chart image's tag), and deploys
every image as ``<reference>@<digest>``: the kubelet pulls that digest whatever the tag points to
later, and ``images.requireDigest`` passes.

The lock is JSON: ``{"images": {reference: digest}, "charts": {"<chart>-<version>": {tag key:
reference}}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

LOCK_FILE = "images.lock"
"""Beside the stack files, as ``charts.lock``."""


@dataclass
class ImageLock:
    """The image references of a stack and the digest each one's registry served when it was locked."""

    path: Path
    digests: dict[str, str] = field(default_factory=dict)
    """Image reference (as the stack, a chart or a Dockerfile names it, before mirroring) -> ``sha256:...``."""
    chart_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    """``<chart>-<version>`` -> the values key of each image's tag -> the image's reference."""

    @classmethod
    def read(cls, path: Path) -> "ImageLock":
        """The lock at ``path``; an empty one when there is no such file."""
        document = json.loads(path.read_text()) if path.is_file() else {}
        return cls(path, dict(document.get("images") or {}),
                   {chart: dict(tags) for chart, tags in (document.get("charts") or {}).items()})

    def write(self) -> None:
        document = {"images": dict(sorted(self.digests.items())),
                    "charts": {chart: dict(sorted(tags.items())) for chart, tags in sorted(self.chart_tags.items())}}
        self.path.write_text(json.dumps(document, indent=1) + "\n")

    def settings(self) -> dict[str, Any]:
        """The lock as ``images`` settings (``digests``, ``chartTags``)."""
        return {"digests": dict(self.digests), "chartTags": {chart: dict(tags) for chart, tags in self.chart_tags.items()}}


def with_image_lock(settings: Mapping[str, Any], namespace: str, stack_dir: Optional[Path]) -> dict[str, Any]:
    """A stack's settings with the lock of ``stack_dir`` (its ``images.lock``) as ``images.digests``
    and ``images.chartTags``, unless the settings set either already or there is no lock."""
    key = f"{namespace}:images"
    if stack_dir is None or not (stack_dir / LOCK_FILE).is_file():
        return dict(settings)
    images = settings.get(key) or {}
    if isinstance(images, str):
        images = json.loads(images)
    if not isinstance(images, dict) or "digests" in images or "chartTags" in images:
        return dict(settings)
    return {**settings, key: {**images, **ImageLock.read(stack_dir / LOCK_FILE).settings()}}


def has_digest(reference: str) -> bool:
    return "@sha256:" in reference


def pinned(reference: str, digests: Mapping[str, str]) -> str:
    """``reference`` as ``<reference>@<digest>`` when the lock holds its digest, else unchanged."""
    digest = digests.get(reference)
    return f"{reference}@{digest}" if digest and not has_digest(reference) else reference


def tag_of(reference: str) -> str:
    """The tag of ``<repository>:<tag>``."""
    return reference.rpartition("/")[2].partition("@")[0].rpartition(":")[2]


def chart_pins(chart: str, version: str, digests: Mapping[str, str],
               chart_tags: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Values key -> ``<tag>@<digest>`` for each locked image of ``chart`` at ``version``: the chart
    templates ``<repository>:<tag>``, so the image is pulled by the digest (the GPU Operator passes its
    operands' ``version`` into the ClusterPolicy the same way)."""
    bare = version.lstrip("v")
    tags = chart_tags.get(f"{chart}-{bare}") or chart_tags.get(f"{chart}-v{bare}") or {}
    return {key: f"{tag_of(reference)}@{digests[reference]}" for key, reference in tags.items() if reference in digests}


def locked_release_values(values: Any, chart: str, version: str, images: Any) -> Any:
    """A release's plain ``values`` with each image ``images`` (``ImagesConfig``) locks set to its
    ``<tag>@<digest>``."""
    pins = chart_pins(chart, version, images.digests, images.chart_tags)
    if not pins:
        return values
    result = _copy_dicts(values) if isinstance(values, dict) else {}
    for path, value in pins.items():
        set_value(result, path, value)
    return result


def set_value(values: dict[str, Any], path: str, value: Any) -> None:
    """Set the dotted key ``path`` of ``values``, making the dicts above it."""
    *parents, leaf = path.split(".")
    for key in parents:
        child = values.get(key)
        if not isinstance(child, dict):
            child = values[key] = {}
        values = child
    values[leaf] = value


def _copy_dicts(value: Any) -> Any:
    """Copies of the nested dicts and lists of ``value``; other values (an Output) as they are."""
    if isinstance(value, dict):
        return {key: _copy_dicts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_dicts(item) for item in value]
    return value


def locked_gate_images(gate: Any, digests: Mapping[str, str]) -> Any:
    """The health gate's settings (``HealthGateConfig``) with its images by their locked digests:
    its check pod travels in its ConfigMap, where no transform rewrites it."""
    update = {key: pinned(getattr(gate, key), digests) for key in ("image", "dcgm_image", "efa_loopback_image")
              if isinstance(getattr(gate, key), str)}
    return gate.model_copy(update=update) if update else gate
