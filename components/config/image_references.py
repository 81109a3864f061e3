"""Container image references: the grammar the kubelet pulls by, and the stricter rule that an image
is pinned. The add-ons, the health checks and the training workloads all name images, so the checks
live here, below every section that uses them."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Optional, Union

import pulumi
from pydantic import PlainValidator, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from .base import _Model
from .inputs import is_unknown

_IMAGE_REFERENCE = re.compile(
    r"^(?P<name>(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::\d+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
"""A container image reference as the distribution spec's grammar defines it (registry host and
port, lowercase repository path, tag, sha256 digest)."""


def image_reference_problem(value: Any) -> Optional[str]:
    """Why ``value`` is not an image reference the kubelet can pull, or None (also for an Output: an
    image built in the same program is known only once pushed)."""
    if is_unknown(value):
        return None
    match = _IMAGE_REFERENCE.match(value)
    if match is None or len(match.group("name")) > 255:
        return (
            f"'{value}' is not an image reference; use <registry>/<repository>:<tag> or "
            "<registry>/<repository>@sha256:<64 hex digits> (repository paths are lower case)"
        )
    return None


def _image_reference(value: str) -> re.Match[str]:
    reason = image_reference_problem(value)
    match = _IMAGE_REFERENCE.match(value)
    if reason is not None or match is None:
        raise PydanticCustomError("image", reason or f"'{value}' is not an image reference")
    return match


def check_image_grammar(value: str) -> str:
    """An image reference the kubelet can pull: the distribution grammar above."""
    _image_reference(value)
    return value


def _image_input(check: Callable[[str], str]) -> Callable[[Any], Any]:
    """A validator that applies ``check`` to a string and lets an Output through unchecked."""

    def validate(value: Any) -> Any:
        if is_unknown(value):
            return value
        if not isinstance(value, str):
            raise PydanticCustomError("input_type", f"an image must be a string or a pulumi.Output, not {type(value).__name__}")
        return check(value)

    return validate


ImageReference = Annotated[
    Union[str, pulumi.Output[str]], PlainValidator(_image_input(check_image_grammar)), WithJsonSchema({"type": "string"})
]
"""A container image reference (registry, lower-case repository path, tag and/or sha256 digest), or
the Output of an image built in the same program."""


def _check_image_reference(value: str) -> str:
    match = _image_reference(value)
    if match.group("digest") is None and match.group("tag") in (None, "latest"):
        raise PydanticCustomError(
            "image",
            f"'{value}' names no fixed image (no digest, and its tag is '{match.group('tag') or 'latest'}'); "
            "pin it by digest (@sha256:...) or by a release tag",
        )
    return value


_REGISTRY_HOST = re.compile(
    r"^(?:localhost|[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)+)(?::\d+)?$"
)
_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
_MIRROR_PREFIX = re.compile(r"^(?P<host>[^/]+)(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")


class ImagesConfig(_Model):
    """Where the nodes pull images from: each source registry's mirror, for a cluster whose nodes
    reach a company registry (Harbor, Artifactory, an ECR pull-through cache) instead of the public
    ones."""

    registry_mirrors: dict[str, str] = {}
    """Source registry host -> mirror prefix (`<host>[:port]/<path>`), e.g. `nvcr.io: harbor.example.com/nvcr`: every image the stack deploys from that host is pulled as `<prefix>/<rest of the reference>`, tag and digest unchanged; `docker.io` for references without a host (docs/mirrors.md). Default: none."""
    require_digest: bool = False
    """Refuse the stack when an image it deploys is named by tag alone, naming the object. A chart image counts as pinned when the release's values or the chart's defaults give a digest; an image built in the program runs by its pushed digest. Default: false."""
    require_mirror: bool = False
    """Refuse the stack when an image it deploys comes from a registry `registryMirrors` does not map, naming the object; private ECR registries of the cluster's region (reached through the VPC's ECR endpoints) need no mirror. Default: false."""

    digests: dict[str, str] = {}
    """Image reference (as a stack, chart or Dockerfile names it) -> the `sha256:` digest its registry serves: deployed as `<reference>@<digest>` and counts as pinned. Read from the `images.lock` beside the stack file, which `eks-gpu-training-lock-images` writes; else set it here. Default: none."""
    chart_tags: dict[str, dict[str, str]] = {}
    """`<chart>-<version>` -> values key of each chart image's tag -> that image's reference in `digests`: the key the deploy sets to `<tag>@<digest>`. Read from `images.lock` with `digests`. Default: none."""

    @field_validator("digests")
    @classmethod
    def _digests(cls, value: dict[str, str]) -> dict[str, str]:
        for reference, digest in value.items():
            match = _IMAGE_REFERENCE.match(reference)
            if match is None or match.group("digest") is not None:
                raise PydanticCustomError("image", f"'{reference}' is not an image reference by tag; the lock maps <registry>/<repository>:<tag> to its digest")
            if not _SHA256.match(digest):
                raise PydanticCustomError("image", f"{reference}: '{digest}' is not a digest; use sha256:<64 hex digits>")
        return value

    @field_validator("registry_mirrors")
    @classmethod
    def _mirrors(cls, value: dict[str, str]) -> dict[str, str]:
        for registry, prefix in value.items():
            if registry != "docker.io" and not _REGISTRY_HOST.match(registry):
                raise PydanticCustomError(
                    "registry", f"'{registry}' is not a registry host; use its host name, e.g. nvcr.io or registry.k8s.io")
            match = _MIRROR_PREFIX.match(prefix.rstrip("/"))
            if "://" in prefix or match is None or not _REGISTRY_HOST.match(match.group("host")):
                raise PydanticCustomError(
                    "registry", f"mirror of {registry}: '{prefix}' is not <registry host>[:port]/<lower-case path>, e.g. harbor.example.com/nvcr")
        return {registry: prefix.rstrip("/") for registry, prefix in value.items()}
