"""``eks-gpu-training-lock-images STACK``: write ``images.lock`` beside the stack file, the digest
each image the stack deploys has in its registry (see ``config.image_lock``).

Each reference is asked of its registry, or of its mirror when ``images.registryMirrors`` maps its
registry (the nodes pull from there, and a pull-through cache serves the source's digest), through
the OCI distribution API (``HEAD /v2/<name>/manifests/<tag>``, accepting an OCI index or manifest and
Docker's manifest list or manifest) with the ``oras`` client and the credentials ``docker login``
wrote (``~/.docker/config.json``, or ``$DOCKER_CONFIG``). Plain HTTP only for a loopback registry.

The images: the training jobs', the smoke test's, the pre-flight checks', the health gate's and its
checks', a prebuilt topology labeler's, and every image of every chart the stack installs (the GPU
Operator's operands included), each at the tag its chart's ``values.yaml`` names (the chart read where
``eks-gpu-training-render`` reads it). An image built in the same program runs by its pushed digest.

A digest that differs from the one the lock holds is refused, naming the image (``--update`` records it
on purpose); ``--check`` writes nothing and fails on any image the lock lacks or the registry moved.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any, Iterator, Optional

import yaml

from ..addons.chart_source import chart_name
from ..aws.labeler_image import HEALTH_GATE_DIR, LABELER_DIR, dockerfile_base
from ..addons import efa_device_plugin, gpu_operator
from ..config import ConfigError, GpuTrainingPlatformArgs
from ..config.image_lock import LOCK_FILE, ImageLock, has_digest
from ..config.inputs import is_unknown
from ..facts.images import chart_images, is_deployed, mirrored, named_repository, value_at
from ..platform.image_sources import CHART_DEFAULT_DIGESTS, _release_values, stack_images
from ..platform.releases import stack_charts
from ..platform.stack_files import locate_stack
from .chart_sources import ChartSources, ChartUnavailable, _loopback

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
"""What a registry may serve for a tag: a multi-platform index or list, or one manifest (OCI image
spec, and Docker's Image Manifest V2 Schema 2)."""
DOCKER_HUB_API = "registry-1.docker.io"
"""Where ``docker.io`` serves the distribution API."""
CHART_REPOSITORIES = {gpu_operator.CHART: gpu_operator.CHART_REPOSITORY, efa_device_plugin.CHART: efa_device_plugin.CHART_REPOSITORY}


class ImageUnresolved(RuntimeError):
    """A registry gave no digest for a reference; the message names it and says why."""


def resolve_digest(reference: str, mirrors: Optional[dict[str, str]] = None) -> str:
    """The digest the registry (or its mirror) serves for ``reference`` (``<registry>/<name>:<tag>``)."""
    import oras.provider
    import requests

    source = mirrored(reference, mirrors or {})
    host, _, rest = source.partition("/")
    name, _, tag = rest.rpartition(":")
    if not name or "/" in tag:
        raise ImageUnresolved(f"{reference}: names no tag to resolve")
    api_host = DOCKER_HUB_API if host == "docker.io" else host
    insecure = _loopback(f"http://{api_host}")
    registry = oras.provider.Registry(hostname=api_host, insecure=insecure)
    container = registry.get_container(f"{api_host}/{name}:{tag}")
    registry.auth.load_configs(container)  # the credentials `docker login` wrote for that registry
    url = f"{registry.prefix}://{container.manifest_url()}"
    where = f"{api_host}" + (f" (the mirror of {reference.partition('/')[0]})" if source != reference else "")
    try:
        # One attempt: oras's own retry waits two minutes on a registry that refuses the connection.
        response = oras.provider.Registry.do_request.__wrapped__(
            registry, url, "HEAD", headers={"Accept": ", ".join(MANIFEST_TYPES)})
    except requests.exceptions.RequestException as error:
        raise ImageUnresolved(f"{reference}: {where} is unreachable ({type(error).__name__})") from None
    except ValueError as error:  # oras: the registry asks for credentials it was not given
        raise ImageUnresolved(f"{reference}: {where} refused the credentials ({error})") from None
    if response.status_code != 200:
        raise ImageUnresolved(f"{reference}: {where} answered {response.status_code} {response.reason} for the tag")
    digest = response.headers.get("Docker-Content-Digest", "")
    if not digest.startswith("sha256:"):
        raise ImageUnresolved(f"{reference}: {where} named no sha256 digest for the tag")
    return digest


def _archive_values(archive: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """A chart archive's ``values.yaml`` with each subchart's under its name, and each chart's appVersion."""
    values: dict[str, Any] = {}
    app_versions: dict[str, str] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if parts[-1] not in ("values.yaml", "Chart.yaml") or len(parts) not in (2, 4) or not member.isfile():
                continue
            extracted = tar.extractfile(member)
            document = (yaml.safe_load(io.TextIOWrapper(extracted)) if extracted is not None else None) or {}
            sub = parts[2] if len(parts) == 4 else ""
            if parts[-1] == "Chart.yaml":
                app_versions[sub] = str(document.get("appVersion") or "")
            elif sub:
                values[sub] = {**document, **(values.get(sub) or {})}
            else:
                values.update({k: v if not isinstance(values.get(k), dict) else {**values[k], **v} for k, v in document.items()})
    return values, app_versions


def chart_references(args: GpuTrainingPlatformArgs, sources: ChartSources) -> Iterator[tuple[str, str, str, Optional[str]]]:
    """(``<chart>-<version>``, what, reference, values key of its tag or None) of each chart image
    the stack deploys by tag, at the tag its chart's values name (the stack's values first)."""
    for chart, version in stack_charts(args):
        name = chart_name(chart)
        images = chart_images(name, version) or {}
        archive = sources.locate(chart, version, CHART_REPOSITORIES.get(name))
        defaults, app_versions = _archive_values(archive)
        stack_values = _release_values(args, name)
        for path, image in images.items():
            if path in CHART_DEFAULT_DIGESTS.get((name, version.lstrip("v")), set()):
                continue
            values = _merged(defaults, stack_values)
            if not is_deployed(values, image):
                continue
            parent_key = path.rpartition(".")[0]
            parent = value_at(values, parent_key) if parent_key else values
            parent = parent if isinstance(parent, dict) else {}
            repository = named_repository(values, path, image)
            if isinstance(parent.get("image"), str) and parent["image"]:
                repository = f"{repository}/{parent['image']}"  # the GPU Operator's repository/image:version
            # The GPU Operator's images are <repository>/<image>:<version>, its version defaulting to
            # the chart's appVersion; the other charts' <repository>:<tag>.
            tag_key = "version" if isinstance(parent.get("image"), str) or ("version" in parent and "tag" not in parent) else "tag"
            tag = parent.get(tag_key) or app_versions.get(path.split(".")[0] if path.split(".")[0] in app_versions else "", "")
            tag = tag or app_versions.get("", "")
            if not tag or has_digest(str(tag)):
                continue
            full_key = f"{parent_key}.{tag_key}" if parent_key else tag_key
            yield f"{name}-{version}", f"Helm release {name}: {path}", f"{repository}:{tag}", full_key


def _merged(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in override.items()}}
    return base if override is None else override


def stack_references(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, str]]:
    """(what, reference) of every image the stack names itself by tag (the charts' aside), and the
    base of each image it builds (the topology labeler's, the health gate's)."""
    for what, key, image in stack_images(args):
        if key is None and isinstance(image, str) and not is_unknown(image) and not has_digest(image):
            yield what, image
    if args.topology_labeler.enabled and args.topology_labeler.image is None:
        yield "the topology labeler's base (its Dockerfile)", dockerfile_base(LABELER_DIR)
    if args.health_gate.enabled and args.health_gate.image is None:
        yield "the health gate's base (its Dockerfile)", dockerfile_base(HEALTH_GATE_DIR)


def lock_images(args: GpuTrainingPlatformArgs, lock: ImageLock, sources: ChartSources, *, check: bool = False,
                update: bool = False) -> list[str]:
    """Resolve every image of the stack into ``lock`` (written unless ``check``); the problems, one line each."""
    wanted: list[tuple[str, str]] = list(stack_references(args))
    chart_tags: dict[str, dict[str, str]] = {}
    for chart, what, reference, tag_key in chart_references(args, sources):
        wanted.append((what, reference))
        if tag_key is not None:
            chart_tags.setdefault(chart, {})[tag_key] = reference
    return record_digests(wanted, chart_tags, lock, args.images.registry_mirrors, check=check, update=update)


def record_digests(wanted: list[tuple[str, str]], chart_tags: dict[str, dict[str, str]], lock: ImageLock,
                   mirrors: dict[str, str], *, check: bool = False, update: bool = False) -> list[str]:
    """Resolve each (what, reference) of ``wanted`` and write them into ``lock`` unless ``check`` or
    a problem; the problems, one line each, naming the image."""
    users: dict[str, list[str]] = {}
    for what, reference in wanted:
        users.setdefault(reference, []).append(what)
    problems, digests = [], {}
    for reference, whats in users.items():
        what = ", ".join(dict.fromkeys(whats))
        try:
            digest = resolve_digest(reference, mirrors)
        except ImageUnresolved as error:
            problems.append(f"{what}: {error}")
            continue
        recorded = lock.digests.get(reference)
        if recorded is not None and recorded != digest and not update:
            problems.append(f"{what}: {reference} is now {digest}, not the {recorded} {lock.path.name} records; "
                            "refused (run with --update to lock the new image on purpose)")
        elif recorded is None and check:
            problems.append(f"{what}: {reference} has no entry in {lock.path.name}")
        digests[reference] = digest
    if not problems and not check:
        lock.digests, lock.chart_tags = digests, chart_tags
        lock.write()
    return problems


def _unlocked_args(located: Any) -> GpuTrainingPlatformArgs:
    """The stack's arguments with ``images.requireDigest`` off: the lock is what makes it pass."""
    from ..platform.loading import platform_args_from_settings

    settings, namespace = located.settings(), located.namespace()
    images = settings.get(f"{namespace}:images") or {}
    images = json.loads(images) if isinstance(images, str) else images
    settings[f"{namespace}:images"] = {**images, "requireDigest": False}
    return platform_args_from_settings(settings, namespace)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="eks-gpu-training-lock-images",
        description=f"Resolve every image a stack deploys to the digest its registry (or mirror) serves and write "
        f"{LOCK_FILE} beside the stack file; the stack then deploys each image by that digest.")
    parser.add_argument("stack", help="stack name (Pulumi.<stack>.yaml in the project's stackConfigDir) or the path of a stack file")
    parser.add_argument("--project-dir", type=Path, default=None, help="the Pulumi project (default: the nearest Pulumi.yaml above)")
    parser.add_argument("--charts-mirror", default=None, metavar="URL", help="where the charts are read from, as for eks-gpu-training-render")
    parser.add_argument("--check", action="store_true", help=f"write nothing; fail when an image has no entry in {LOCK_FILE} or its registry serves another digest")
    parser.add_argument("--update", action="store_true", help="record a digest that differs from the lock's (an image moved on purpose)")
    options = parser.parse_args(argv)
    try:
        located = locate_stack(options.stack, options.project_dir)
        args = _unlocked_args(located)
        sources = ChartSources.configured(mirror=options.charts_mirror or args.charts.mirror, stack_dir=located.path.parent)
        sources.directory = Path(args.charts.directory) if args.charts.directory else None
        lock = ImageLock.read(located.path.parent / LOCK_FILE)
        problems = lock_images(args, lock, sources, check=options.check, update=options.update)
    except (ConfigError, ChartUnavailable, FileNotFoundError) as error:
        print(f"lock-images failed: {error}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"lock-images failed: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"{'checked' if options.check else 'wrote'} {lock.path}: {len(lock.digests)} images")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
