"""Where the stack's Helm releases take their charts from: their upstream repositories, or a local
folder. Helm runs inside the Kubernetes provider, where `pulumi up` runs, and the cluster never
fetches a chart: the folder is for a deployer that cannot reach the repositories, or one that installs
only reviewed copies. It changes no image, so it does not make an air-gapped cluster work: the nodes
pull every image from its registry either way (docs/operations.md)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from .base import _Model


class ChartsConfig(_Model):
    """The source of every Helm release's chart (GPU Operator, EFA device plugin, Kueue, Karpenter and its CRDs)."""

    directory: Optional[str] = Field(default=None, min_length=1)
    """A local folder holding each chart the stack installs, at its pinned version, as a chart folder `<chart>-<version>/` or an archive `<chart>-<version>.tgz` (what `helm pull` and `helm package` write; `v` before the version optional), checked before anything is created; relative to the directory `pulumi up` runs in, which is where Helm reads it. The nodes still pull every image from its public registry. Default: none (each chart comes from its repository)."""
