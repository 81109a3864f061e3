"""``eks-gpu-training-check --outdated STACK``: which chart pins of a stack have a newer release, asked
of where the stack's charts come from.

Each chart the stack installs (``platform.releases.stack_charts``) is looked up where a pull would
get it (``chart_sources``): the mirror when one is set (``--charts-mirror``, ``$EKS_GPU_TRAINING_CHARTS_MIRROR``
or ``charts.mirror``), else its own repository: an ``http(s)://`` repository's ``index.yaml``
through Helm's own client (as ``helm search repo`` reads it), an ``oci://`` chart's tags through the
OCI distribution API with the ``oras`` client and the credentials ``docker login`` wrote (as
``eks-gpu-training-lock-images`` asks registries). A source that cannot be read, or that does not
list the pin itself, is reported instead of judged. Versions compare
as SemVer, the rule Helm orders charts by (helm.sh/docs/topics/charts, "Charts and Versioning");
pre-releases are left out. A pin's line is its major.minor (Karpenter's support lines, the GPU
Operator's 26.7.x): a newer patch on the line is reported apart from a newer line, which may
change the chart's values and CRDs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Optional

import semver

from ...addons.chart_archives import MirrorAccess, loopback
from ...addons.chart_source import chart_name, mirrored_chart
from ...config import GpuTrainingPlatformArgs
from ...platform.releases import stack_charts
from ...platform.verified_charts import REPOSITORIES


@dataclass(frozen=True)
class PinSource:
    """A pinned chart and where its releases are listed."""

    chart: str
    """The chart's name."""
    version: str
    """The pinned version."""
    location: str
    """An ``http(s)://`` Helm repository (its ``index.yaml``), or the chart's ``oci://`` reference (its tags)."""
    mirror: bool
    """Whether ``location`` is the stack's mirror (which ``MirrorAccess`` applies to)."""


@dataclass(frozen=True)
class PinStatus:
    """A pin against the releases its source lists."""

    source: PinSource
    newest_on_line: str
    """The newest release with the pin's major.minor (the pin itself when none is newer)."""
    newest: str
    """The newest release of any line (the pin itself when none is newer)."""

    @property
    def newer_patch(self) -> bool:
        return _parsed(self.newest_on_line) > _parsed(self.source.version)

    @property
    def newer_line(self) -> bool:
        return release_line(self.newest) > release_line(self.source.version)

    def describe(self) -> str:
        """The line the command prints for the pin."""
        chart, pinned = self.source.chart, self.source.version
        if not self.newer_patch and not self.newer_line:
            return f"{chart} {pinned}: newest ({self.source.location})"
        parts = [f"newer patch on its {'.'.join(map(str, release_line(pinned)))} line: {self.newest_on_line}"
                 if self.newer_patch else f"newest on its {'.'.join(map(str, release_line(pinned)))} line"]
        if self.newer_line:
            parts.append(f"newer line: {self.newest}")
        return f"{chart} {pinned}: {'; '.join(parts)} ({self.source.location})"


def _parsed(version: str) -> semver.Version:
    return semver.Version.parse(version.removeprefix("v"))


def _release(version: str) -> Optional[semver.Version]:
    """``version`` as SemVer; None for a pre-release or a tag that is not SemVer."""
    try:
        parsed = _parsed(version)
    except ValueError:
        return None
    return parsed if parsed.prerelease is None else None


def release_line(version: str) -> tuple[int, int]:
    """A version's line: its major and minor (``v26.7.1`` -> ``(26, 7)``)."""
    parsed = _parsed(version)
    return parsed.major, parsed.minor


def lists(listed: Iterable[str], version: str) -> bool:
    """Whether ``listed`` holds ``version`` (as SemVer: ``v26.7.1`` is ``26.7.1``)."""
    pinned = _parsed(version)
    return any(_release(entry) == pinned for entry in listed)


def compare(source: PinSource, listed: Iterable[str]) -> PinStatus:
    """The newest release on ``source``'s line and the newest of all among ``listed``."""
    pinned = _parsed(source.version)
    releases = [(parsed, version) for version in listed if (parsed := _release(version)) is not None and parsed > pinned]
    on_line = [(parsed, version) for parsed, version in releases if (parsed.major, parsed.minor) == (pinned.major, pinned.minor)]
    return PinStatus(source, max(on_line)[1] if on_line else source.version, max(releases)[1] if releases else source.version)


def pin_sources(args: GpuTrainingPlatformArgs, mirror: Optional[str]) -> list[PinSource]:
    """Each chart the stack installs, at its pin, with where a pull would take it from: ``mirror``,
    else its repository."""
    sources = []
    for chart, version in stack_charts(args):
        if mirror is not None:
            reference, repository = mirrored_chart(chart, mirror)
        elif chart.startswith("oci://"):
            reference, repository = chart, None
        else:
            reference, repository = chart_name(chart), REPOSITORIES[chart]
        sources.append(PinSource(chart_name(chart), version, repository or reference, mirror is not None))
    return sources


class SourceUnreadable(RuntimeError):
    """A source gave no list of releases; the message says why, on one line."""


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _repository_index(url: str, access: MirrorAccess) -> dict:
    """The repository's ``index.yaml``, read and parsed by Helm's client."""
    from helm_python import _native, registry

    # helm_python.repo_index takes no CA file; its native call takes Helm's own ``--ca-file`` option.
    return registry._loads(_native.call_string("helm_repo_index_download", url, registry._opts(
        username=access.username, password=access.password, ca_file=access.ca_file)))


def _tags(reference: str, access: MirrorAccess) -> list[str]:
    """Every tag of an ``oci://`` chart (the distribution API's tag list, page by page), by the ``oras``
    client: with the mirror's credentials when ``access`` has them, else those ``docker login``
    wrote; plain HTTP only on loopback. Helm's own tag list is not used: it drops tags with a ``v``
    (the GPU Operator's ``v26.7.1`` in a mirror)."""
    import oras.provider
    import requests

    host, _, name = reference.removeprefix("oci://").partition("/")
    registry = oras.provider.Registry(hostname=host, insecure=loopback(reference), tls_verify=access.ca_file or True)
    container = registry.get_container(f"{host}/{name}")
    if access.username is not None and access.password is not None:
        registry.auth.set_basic_auth(access.username, access.password)
    else:
        registry.auth.load_configs(container)
    # One attempt per page: oras's own retry waits two minutes on a registry that refuses the connection.
    registry.do_request = functools.partial(oras.provider.Registry.do_request.__wrapped__, registry)
    try:
        return [str(tag) for tag in registry.get_tags(container)]
    except requests.exceptions.RequestException as error:
        raise SourceUnreadable(f"unreachable ({_one_line(error)})") from None
    except ValueError as error:  # oras: an answer other than 200, or credentials refused
        raise SourceUnreadable(_one_line(error)) from None


def outdated(sources: list[PinSource], access: MirrorAccess) -> tuple[list[PinStatus], list[str]]:
    """Each pin against what its source lists, and one line per source that could not be read and
    per pin its source does not list."""
    import helm_python

    indexes: dict[str, dict] = {}
    failed: dict[str, str] = {}
    charts_of: dict[str, list[str]] = {}
    statuses, unlisted = [], []
    for source in sources:
        charts_of.setdefault(source.location, []).append(source.chart)
        if source.location in failed:
            continue
        chart_access = access if source.mirror else MirrorAccess()
        try:
            if source.location.startswith("oci://"):
                listed = _tags(source.location, chart_access)
            else:
                if source.location not in indexes:
                    indexes[source.location] = _repository_index(source.location, chart_access)
                listed = [str(entry.get("version")) for entry in (indexes[source.location].get("entries") or {}).get(source.chart) or []]
        except (helm_python.HelmError, SourceUnreadable) as error:
            failed[source.location] = _one_line(error)
            continue
        if not lists(listed, source.version):
            # Nothing to judge against: a mirror that lacks the pin would also fail its pull.
            unlisted.append(f"{source.location}: lists no {source.chart} {source.version} (the pin) among "
                            f"{len(listed)} release(s) of it")
            continue
        statuses.append(compare(source, listed))
    lines = [f"{location}: could not list the releases of {', '.join(charts_of[location])}: {why}" for location, why in failed.items()]
    return statuses, lines + unlisted
