"""The chart archives `pulumi up` installs, checked against ``charts.lock`` before any Release
registers.

Without the check, a Release names a chart, a version and a repository, and Helm, inside the
Kubernetes provider, installs whatever the repository or mirror serves at that moment: not
necessarily the archive the scan and the review judged. So when the project keeps a lock (the
``charts.lock`` beside its stack files, in ``Pulumi.yaml``'s ``stackConfigDir``: what
``eks-gpu-training-render STACK --lock`` writes), the program itself gets each pinned archive first
(``charts.directory``'s copy, else the chart cache, else one pull through Helm's client from the
mirror, with its secret credentials, or from the chart's repository), compares its digest with the
lock's entry, and hands Helm only the checked archive's path: Helm installs a local archive as it
is and fetches nothing (helm.sh/docs/helm/helm_install). A chart the lock has no entry for, an
unpacked chart folder (which has no archive digest) and an archive with other bytes are refused,
every one with its chart, before anything registers. Without a lock, Helm pulls each chart from its
source, unless the mirror needs credentials or a CA (secret configuration, which no resource input
holds): then the program pulls, unchecked, and hands Helm the path the same way.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from ..addons import efa_device_plugin, gpu_operator
from ..addons.chart_archives import (
    LOCK_FILE,
    ChartLock,
    MirrorAccess,
    archive_digest,
    default_cache,
    lock_key,
    pull_archive,
)
from ..addons.chart_source import chart_name, local_chart
from ..config import GpuTrainingPlatformArgs, Problem
from .releases import stack_charts
from .stack_files import find_project, stack_config_dir

REPOSITORIES = {gpu_operator.CHART: gpu_operator.CHART_REPOSITORY, efa_device_plugin.CHART: efa_device_plugin.CHART_REPOSITORY}
"""The charts served from an HTTP Helm repository; every other pinned chart is an ``oci://`` reference."""


def project_lock(start: Optional[Path] = None) -> Optional[ChartLock]:
    """The lock beside the stack files of the project ``start`` (default: the folder `pulumi up`
    runs the program in) is in; None without a project or without a lock."""
    project = find_project(start or Path.cwd())
    if project is None:
        return None
    path = stack_config_dir(project) / LOCK_FILE
    return ChartLock.read(path) if path.is_file() else None


def _refusal(chart: str, version: str, lock: ChartLock, digest: str, where: str) -> Problem:
    return Problem(f"{LOCK_FILE}[{lock_key(chart, version)}]",
                   f"{where} holds {chart_name(chart)} {version} as {digest}, not the {lock.digests[lock_key(chart, version)]} "
                   f"{lock.path} records; refused before anything registers (a mirror must serve the reviewed archive; "
                   "record a new one on purpose with eks-gpu-training-render STACK --lock)")


def _fetched(chart: str, version: str, args: GpuTrainingPlatformArgs, lock: Optional[ChartLock], cache: Path) -> list[Problem]:
    """A problem when ``cache`` has no archive of ``chart`` at ``version`` and none can be pulled
    whose digest is the lock's (any, without a ``lock``); a pulled archive is kept only when it is."""
    key = lock_key(chart, version)
    recorded = lock.digests[key] if lock is not None else None
    cached = cache / f"{key}.tgz"
    if cached.is_file():
        return []
    charts = args.charts
    access = MirrorAccess(charts.mirror_username, charts.mirror_password, charts.mirror_ca_file)
    import helm_python

    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".pull-") as folder:
        try:
            where = pull_archive(chart, version, REPOSITORIES.get(chart), charts.mirror, access, Path(folder))
        except helm_python.HelmError as error:
            source = f"the mirror {charts.mirror}" if charts.mirror else "its repository"
            return [Problem(f"{LOCK_FILE}[{key}]", f"{chart_name(chart)} {version} is not in the chart cache ({cache}) "
                            f"and {source} could not supply it: {' '.join(str(error).split())}")]
        archives = sorted(Path(folder).glob("*.tgz"))
        if len(archives) != 1:
            return [Problem(f"{LOCK_FILE}[{key}]", f"{where} gave {len(archives)} archives for {chart_name(chart)} {version}, not one")]
        digest = archive_digest(archives[0])
        if lock is not None and digest != recorded:
            return [_refusal(chart, version, lock, digest, where)]
        os.replace(archives[0], cached)
    return []


def verified_chart_folder(args: GpuTrainingPlatformArgs, lock: Optional[ChartLock],
                          cache: Optional[Path] = None) -> tuple[Optional[str], list[Problem]]:
    """The folder the releases take their checked archives from (``charts.directory``'s, or the
    chart ``cache``: default ``default_cache()``), and a problem for each chart that fails the
    ``lock``. Without a lock: (None, []), the releases keep their sources, unless the mirror needs
    credentials or a CA, which Helm in the provider would not have: then the archives are pulled
    here too, unchecked."""
    charts = args.charts
    if lock is None:
        if charts.mirror is None or charts.directory is not None or (charts.mirror_username is None and charts.mirror_ca_file is None):
            return None, []
        pulled_to = cache or default_cache()
        return str(pulled_to), [problem for chart, version in stack_charts(args) for problem in _fetched(chart, version, args, None, pulled_to)]
    problems = []
    missing = [(chart, version) for chart, version in stack_charts(args) if lock_key(chart, version) not in lock.digests]
    problems += [Problem(f"{LOCK_FILE}[{lock_key(chart, version)}]",
                         f"{lock.path} has no entry for {chart_name(chart)} {version}, which the stack installs: with a lock, "
                         "every chart is checked; record it with eks-gpu-training-render STACK --lock")
                 for chart, version in missing]
    pinned = [(chart, version) for chart, version in stack_charts(args) if (chart, version) not in missing]
    folder = args.charts.directory or str(cache or default_cache())
    if args.charts.directory is None:
        unfetched = {(chart, version): _fetched(chart, version, args, lock, Path(folder)) for chart, version in pinned}
        problems += [problem for found in unfetched.values() for problem in found]
        pinned = [pin for pin in pinned if not unfetched[pin]]
    # What the releases install is what ``release_chart`` picks from the folder: that is what is checked.
    for chart, version in pinned:
        found, _ = local_chart(folder, chart, version)
        if found is None:
            continue  # charts.directory's own rule reports it
        if found.is_dir():
            problems.append(Problem("charts.directory", f"{found} is an unpacked chart: with {LOCK_FILE}, give the "
                                    f"archive ({found.name}.tgz), whose digest the lock records"))
        elif (digest := archive_digest(found)) != lock.digests[lock_key(chart, version)]:
            problems.append(_refusal(chart, version, lock, digest, str(found)))
    return folder, problems


def with_verified_charts(args: GpuTrainingPlatformArgs, lock: Optional[ChartLock]) -> tuple[GpuTrainingPlatformArgs, list[Problem]]:
    """``args`` whose releases install the archives checked against ``lock`` (their folder as
    ``charts.directory``, which the releases take by path), and every chart's problem."""
    folder, problems = verified_chart_folder(args, lock)
    if folder is None or problems:
        return args, problems
    return args.model_copy(update={"charts": args.charts.model_copy(update={"directory": folder})}), []
