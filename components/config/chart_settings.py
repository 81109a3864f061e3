"""Where the stack's Helm releases take their charts from: their upstream repositories, a mirror of
them, or a local folder. Helm runs inside the Kubernetes provider, where `pulumi up` runs, and the cluster never
fetches a chart: the folder is for a deployer that cannot reach the repositories, or one that installs
only reviewed copies. It changes no image, so it does not make an air-gapped cluster work: the nodes
pull every image from its registry either way (docs/mirrors.md)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlparse

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from .base import _Model
from .problems import Problem

MIRROR_SCHEMES = ("https://", "http://", "oci://")
SECRET_KEYS = ("mirrorUsername", "mirrorPassword")
"""The mirror's credentials: read only from secret configuration (``pulumi config set --secret --path charts.<key>``)."""


def loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost`` or a loopback address)."""
    host = urlparse(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ChartSource:
    """Where an add-on's Helm charts come from instead of their repositories."""

    directory: Optional[str] = None
    """A local folder holding each chart at its pinned version (`<chart>-<version>/` or `<chart>-<version>.tgz`). Default: none."""
    mirror: Optional[str] = None
    """A mirror holding every pinned chart under its own name: an `https://` Helm repository or an `oci://` prefix; `directory` comes first. Default: none."""


class ChartsConfig(_Model):
    """The source of every Helm release's chart (GPU Operator, EFA device plugin, Kueue, Karpenter and its CRDs)."""

    directory: Optional[str] = Field(default=None, min_length=1)
    """A local folder holding each chart at its pinned version, as `<chart>-<version>/` or `<chart>-<version>.tgz` (what `helm pull` and `helm package` write), relative to where `pulumi up` runs; checked before anything is created. Images still come from their registries. Default: none."""
    mirror: Optional[str] = Field(default=None, min_length=1)
    """A mirror of every pinned chart under its own name, used instead of each chart's repository: an `https://` Helm repository or an `oci://` prefix (`<prefix>/<chart>`; an ECR pull-through cache cannot be one, docs/mirrors.md). `charts.directory` comes first. Default: none."""

    allow_insecure_mirror: bool = False
    """Accept an `http://` mirror on another machine: its charts, and the credentials sent to it, cross the network unencrypted and unauthenticated. A mirror on loopback needs no setting. Default: false (refused)."""
    mirror_username: Optional[str] = Field(default=None, min_length=1)
    """The mirror's user name; secret configuration only (`pulumi config set --secret --path charts.mirrorUsername`), never in the URL. Used only by the pull before the releases register, never in a resource's inputs. Default: none."""
    mirror_password: Optional[str] = Field(default=None, min_length=1)
    """The mirror's password or token, with `mirrorUsername`; secret configuration only (`pulumi config set --secret --path charts.mirrorPassword`). Used only by the pull before the releases register. Default: none."""
    mirror_ca_file: Optional[str] = Field(default=None, min_length=1)
    """A CA bundle (PEM file, relative to where `pulumi up` runs) the mirror's TLS certificate chains to, for a company CA. Default: none (the system's CAs)."""

    def source(self) -> ChartSource:
        """The folder and mirror the components take (their ``charts``); the credentials stay here."""
        return ChartSource(self.directory, self.mirror)

    @field_validator("mirror_username", "mirror_password", mode="before")
    @classmethod
    def _encrypted(cls, value: Any) -> Any:
        # A stack file read without its passphrase (the offline tools) holds `{secure: ...}`: not
        # readable there, so those tools pull without it.
        return None if isinstance(value, dict) and set(value) == {"secure"} else value

    @field_validator("mirror")
    @classmethod
    def _mirror_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not value.startswith(MIRROR_SCHEMES):
            raise PydanticCustomError(
                "chart_mirror", f"'{value}' is neither a Helm repository (https://...) nor an OCI prefix (oci://...)")
        return value.rstrip("/") if value is not None else None


def chart_mirror_problems(charts: ChartsConfig) -> list[Problem]:
    """A mirror's URL holds no credentials, and is `http://` only on loopback or with
    ``allowInsecureMirror``; a password comes with a user name."""
    problems = []
    mirror = charts.mirror
    if mirror is not None and (urlparse(mirror).username or urlparse(mirror).password):
        problems.append(Problem("charts.mirror", "holds credentials in its URL (plain text in the stack file and the state); "
                                "give them as secret configuration: charts.mirrorUsername and charts.mirrorPassword "
                                "(pulumi config set --secret --path charts.mirrorPassword ...)"))
    if mirror is not None and mirror.startswith("http://") and not loopback(mirror) and not charts.allow_insecure_mirror:
        problems.append(Problem("charts.mirror", f"'{mirror}' is plain HTTP: anyone on the path can serve other charts "
                                "(the lock still refuses them) and read the credentials; use https://, or set "
                                "charts.allowInsecureMirror: true"))
    if (charts.mirror_username is None) != (charts.mirror_password is None):
        problems.append(Problem("charts.mirrorPassword", "comes with charts.mirrorUsername: give both, or neither"))
    if charts.mirror is None:
        problems += [Problem(f"charts.{key}", "applies to charts.mirror, which is not set")
                     for key, value in (("mirrorUsername", charts.mirror_username), ("mirrorCaFile", charts.mirror_ca_file))
                     if value is not None]
    return problems


def plain_credential_problems(charts: Any, secret: bool) -> list[Problem]:
    """The mirror's credentials in ``charts`` (a stack's raw ``charts`` setting) when the setting is
    not ``secret``: a plain value sits readable in the stack file."""
    if secret or not isinstance(charts, dict):
        return []
    return [Problem(f"charts.{key}", f"is plain text in the stack file; set it as a secret: pulumi config set --secret --path charts.{key} ...")
            for key in SECRET_KEYS if isinstance(charts.get(key), str)]
