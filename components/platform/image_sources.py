"""The images a stack deploys and the registries they come from, known before anything registers,
for ``images.requireMirror``: each image from a registry ``images.registryMirrors`` does not map is
refused, naming the object, with the stack's other problems; and for ``images.requireDigest``: each
image named by tag alone is refused the same way.

The charts' images are the repository keys of the pinned chart's values (``facts.images``) whose
part of the chart is on (its nearest ``enabled`` key, as the stack's values or the chart's default
set it), at the value the stack's own values set or the chart's default. A private ECR registry (EKS's own, whose
images the EFA device plugin's chart and the EKS add-ons use, or the account's, where the topology
labeler's image is pushed) in the cluster's own region needs no mirror: nodes reach it through the
VPC's ECR endpoints. Another region's does (the EFA device plugin's chart names EKS's ECR in
us-west-2 wherever the cluster is). The health gate's check images count like any other, though
they reach the cluster inside its ConfigMap rather than in a pod spec.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Iterator, Optional

from ..addons import efa_device_plugin, gpu_operator, job_apis, kueue
from ..addons.chart_source import chart_name
from ..config import GpuTrainingPlatformArgs, Problem
from ..config.image_lock import has_digest, locked_release_values, pinned
from ..config.inputs import is_unknown
from ..facts.images import chart_images, is_deployed, is_private_ecr, named_repository, registry_of, value_at
from ..workloads.training_storage import TEAM_DIRECTORIES_IMAGE
from .releases import stack_charts

PATH = "images.requireMirror"
DIGEST_PATH = "images.requireDigest"

CHART_DEFAULT_DIGESTS = {
    ("karpenter", "1.14.1"): {"controller.image.repository"},
    ("karpenter", "1.14.3"): {"controller.image.repository"},
}
"""Chart images whose chart names a digest by default: Karpenter's ``controller.image.digest``,
set by its release to the pushed image's (hack/release/common.sh). Every other image key of the
pinned charts is named by tag (``tag``, ``version``, or the chart's appVersion)."""

_DIGEST = re.compile(r"@?sha256:[0-9a-f]{64}$")


def _release_values(args: GpuTrainingPlatformArgs, chart: str) -> dict:
    """The values the stack sets on ``chart`` that can name an image (those known before deployment)."""
    if chart == gpu_operator.CHART:
        return gpu_operator.gpu_operator_values(args.gpu_operator, gpu_operator.gpu_node_os(args), {})
    if chart == chart_name(kueue.KUEUE_CHART):
        return kueue.kueue_values(args.kueue, [], {})
    if chart == efa_device_plugin.CHART:
        return efa_device_plugin.efa_device_plugin_values()
    if chart == chart_name(job_apis.JOBSET_CHART):
        return job_apis.jobset_values(args.job_set, {})
    if chart == chart_name(job_apis.TRAINER_CHART):
        return job_apis.trainer_values(args.trainer, {})
    return {}


def _chart_pins_digest(values: Any, chart: str, version: str, path: str) -> bool:
    """Whether the image at values key ``path`` (a ``repository``) is pinned by digest: a value
    beside it in the release's values (``digest``, ``tag``, ``version``) holds a sha256 digest, or
    the chart's default does (``CHART_DEFAULT_DIGESTS``)."""
    if path in CHART_DEFAULT_DIGESTS.get((chart, version.lstrip("v")), set()):
        return True
    parent = value_at(values, path.rpartition(".")[0]) if "." in path else values
    siblings = parent.values() if isinstance(parent, dict) else ()
    return any(isinstance(value, str) and _DIGEST.search(value) for value in siblings)


def stack_images(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, Optional[str], Any]]:
    """(what, values key or None, image or repository) of everything the stack deploys that names an
    image; the image is None for a chart version whose image keys the package does not know, an
    Output for one built in the same program."""
    yield from release_images(args)
    for app in args.scheduling.training_apps:
        if app.job is not None:
            yield f"training job {app.name}", None, app.job.image
    if args.smoke_test.enabled:
        yield "the smoke test", None, args.smoke_test.image
    if args.preflight.enabled:
        if args.preflight.dcgm_diag.enabled:
            yield "the DCGM diagnostics", None, args.preflight.dcgm_diag.image
        if args.preflight.nccl.enabled and args.preflight.nccl.image:
            yield "the NCCL test", None, args.preflight.nccl.image
    if args.storage.fsx.enabled and args.scheduling.teams:
        yield "the FSx team directories Job", None, TEAM_DIRECTORIES_IMAGE
    if args.topology_labeler.enabled and args.topology_labeler.image is not None:
        yield "the topology labeler", None, args.topology_labeler.image
    yield from health_gate_images(args)


def release_images(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, Optional[str], Any]]:
    """The images of the stack's Helm releases, each with its values key, as ``stack_images`` lists them."""
    for chart, version in stack_charts(args):
        name = chart_name(chart)
        images = chart_images(name, version)
        if images is None:
            yield f"Helm release {name} {version}", None, None
            continue
        values = _release_values(args, name)
        for path, image in images.items():
            if is_deployed(values, image):
                yield f"Helm release {name}", path, named_repository(values, path, image)


def health_gate_images(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, Optional[str], Any]]:
    """The health gate's images, each named with its key: its own (unless built here) and its check
    pod's, which travel in the gate's ConfigMap (``workloads.health_gate.check_pod``)."""
    gate = args.health_gate
    if not gate.enabled:
        return
    if gate.image is not None:
        yield "the health gate (healthGate.image)", None, gate.image
    yield "the health gate's DCGM check (healthGate.dcgmImage)", None, gate.dcgm_image
    if gate.efa_loopback_image is not None:
        yield "the health gate's EFA loopback check (healthGate.efaLoopbackImage)", None, gate.efa_loopback_image


def validate_image_mirrors(args: GpuTrainingPlatformArgs) -> list[Problem]:
    if not args.images.require_mirror:
        return []
    mirrors = args.images.registry_mirrors
    unmapped: dict[tuple[str, str], list[str]] = defaultdict(list)
    problems = []
    for what, key, image in stack_images(args):
        if image is None:
            problems.append(Problem(PATH, f"{what}: the package knows no image keys of this chart version, so its "
                                          "images cannot be mirrored; use a version this library pins"))
            continue
        if is_unknown(image):
            continue  # an image built in the same program: pushed to the stack's own ECR
        registry = registry_of(str(image))
        if registry not in mirrors and not is_private_ecr(registry, args.region):
            unmapped[(what, registry)].append(key or str(image))
    for (what, registry), images in unmapped.items():
        problems.append(Problem(PATH, f"{what}: {', '.join(images)} from {registry}, which images.registryMirrors "
                                      f"does not map; map {registry} to a mirror prefix"))
    return problems


def stack_image_pins(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, str, bool]]:
    """(what, image or values key, pinned by digest) of everything the stack deploys that names an
    image it knows before deployment."""
    for chart, version in stack_charts(args):
        name = chart_name(chart)
        images = chart_images(name, version)
        if images is None:
            yield f"Helm release {name} {version}", "its images (the package knows no image keys of this chart version)", False
            continue
        values = locked_release_values(_release_values(args, name), name, version, args.images)
        for path, image in images.items():
            if is_deployed(values, image):
                yield f"Helm release {name}", f"{path} ({named_repository(values, path, image)})", _chart_pins_digest(
                    values, name, version, path)
    for what, key, image in stack_images(args):
        if key is not None or image is None or is_unknown(image):
            continue  # the charts' above; an Output is an image built here, run by its pushed digest
        yield what, str(image), has_digest(pinned(str(image), args.images.digests))


def validate_image_digests(args: GpuTrainingPlatformArgs) -> list[Problem]:
    if not args.images.require_digest:
        return []
    return [
        Problem(DIGEST_PATH, f"{what}: {image} is named by tag alone and images.lock holds no digest for it; "
                             f"lock it (eks-gpu-training-lock-images STACK) or pin it by digest (@sha256:...)")
        for what, image, pinned in stack_image_pins(args)
        if not pinned
    ]
