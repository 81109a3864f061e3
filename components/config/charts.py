"""Where the stack's Helm releases take their charts from: their upstream repositories, a mirror of
them, or a local folder. Helm runs inside the Kubernetes provider, where `pulumi up` runs, and the cluster never
fetches a chart: the folder is for a deployer that cannot reach the repositories, or one that installs
only reviewed copies. It changes no image, so it does not make an air-gapped cluster work: the nodes
pull every image from its registry either way (docs/operations.md)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _Model

MIRROR_SCHEMES = ("https://", "http://", "oci://")


class ChartsConfig(_Model):
    """The source of every Helm release's chart (GPU Operator, EFA device plugin, Kueue, Karpenter and its CRDs)."""

    directory: Optional[str] = Field(default=None, min_length=1)
    """A local folder holding each chart the stack installs, at its pinned version, as a chart folder `<chart>-<version>/` or an archive `<chart>-<version>.tgz` (what `helm pull` and `helm package` write; `v` before the version optional), checked before anything is created; relative to the directory `pulumi up` runs in, which is where Helm reads it. The nodes still pull every image from its public registry. Default: none (each chart comes from its repository)."""
    mirror: Optional[str] = Field(default=None, min_length=1)
    """A mirror holding every pinned chart under its own name, used instead of each chart's repository: an `https://` Helm repository (Artifactory, Harbor, Nexus) or an `oci://` prefix with each chart at `<prefix>/<chart>` (Harbor, or ECR with the charts pushed there: an ECR pull-through cache cannot be one, docs/operations.md). `charts.directory` comes first. Default: none."""

    @field_validator("mirror")
    @classmethod
    def _mirror_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not value.startswith(MIRROR_SCHEMES):
            raise PydanticCustomError(
                "chart_mirror", f"'{value}' is neither a Helm repository (https://...) nor an OCI prefix (oci://...)")
        return value.rstrip("/") if value is not None else None
