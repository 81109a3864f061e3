"""The images a stack deploys and the registries they come from, known before anything registers,
for ``images.requireMirror``: each image from a registry ``images.registryMirrors`` does not map is
refused, naming the object, with the stack's other problems.

The charts' images are the repository keys of the pinned chart's values (``facts.images``) whose
part of the chart is on (its nearest ``enabled`` key, as the stack's values or the chart's default
set it), at the value the stack's own values set or the chart's default. A private ECR registry (EKS's own, whose
images the EFA device plugin's chart and the EKS add-ons use, or the account's, where the topology
labeler's image is pushed) in the cluster's own region needs no mirror: nodes reach it through the
VPC's ECR endpoints. Another region's does (the EFA device plugin's chart names EKS's ECR in
us-west-2 wherever the cluster is).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterator

from ..addons import efa_device_plugin, gpu_operator, karpenter, kueue
from ..addons.chart_source import chart_name
from ..addons.image_mirrors import _get
from ..config import GpuTrainingPlatformArgs, Problem
from ..config.inputs import is_unknown
from ..facts.images import chart_images, is_private_ecr, registry_of

PATH = "images.requireMirror"


def stack_charts(args: GpuTrainingPlatformArgs) -> list[tuple[str, str]]:
    """The (chart, version) of every Helm release the stack installs."""
    charts = [(gpu_operator.CHART, args.gpu_operator.chart_version)]
    if efa_device_plugin.efa_needed(args):
        charts.append((efa_device_plugin.CHART, efa_device_plugin.CHART_VERSION))
    if args.kueue.enabled:
        charts.append((kueue.KUEUE_CHART, args.kueue.chart_version))
    if args.karpenter.enabled and not args.in_cluster.enabled:
        charts += [(karpenter.KARPENTER_CRD_CHART, args.karpenter.chart_version),
                   (karpenter.KARPENTER_CHART, args.karpenter.chart_version)]
    return charts


def _release_values(args: GpuTrainingPlatformArgs, chart: str) -> dict:
    """The values the stack sets on ``chart`` that can name an image (those known before deployment)."""
    if chart == gpu_operator.CHART:
        return gpu_operator.gpu_operator_values(args.gpu_operator, gpu_operator.gpu_node_os(args), {})
    if chart == chart_name(kueue.KUEUE_CHART):
        return kueue.kueue_values(args.kueue, [], {})
    if chart == efa_device_plugin.CHART:
        return efa_device_plugin.efa_device_plugin_values()
    return {}


def stack_images(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, str]]:
    """(what, image or repository) of everything the stack deploys that names an image known
    before deployment; a chart version the package has no image keys for yields ``(what, "")``."""
    for chart, version in stack_charts(args):
        name = chart_name(chart)
        images = chart_images(name, version)
        if images is None:
            yield f"Helm release {name} {version}", ""
            continue
        values = _release_values(args, name)
        for path, image in images.items():
            switch = _get(values, image.enabled_by) if image.enabled_by else None
            if not (switch if isinstance(switch, bool) else image.enabled_by_default):
                continue  # not deployed
            current = _get(values, path)
            yield f"Helm release {name} ({path})", current if isinstance(current, str) and current else image.repository
    for app in args.scheduling.training_apps:
        if app.job is not None:
            yield f"training job {app.name}", app.job.image
    if args.smoke_test.enabled:
        yield "the smoke test", args.smoke_test.image
    if args.preflight.enabled:
        if args.preflight.dcgm_diag.enabled:
            yield "the DCGM diagnostics", args.preflight.dcgm_diag.image
        if args.preflight.nccl.enabled and args.preflight.nccl.image:
            yield "the NCCL test", args.preflight.nccl.image
    if args.topology_labeler.enabled and args.topology_labeler.image is not None:
        yield "the topology labeler", args.topology_labeler.image


def validate_image_mirrors(args: GpuTrainingPlatformArgs) -> list[Problem]:
    if not args.images.require_mirror:
        return []
    mirrors = args.images.registry_mirrors
    unmapped: dict[tuple[str, str], list[str]] = defaultdict(list)
    problems = []
    for what, image in stack_images(args):
        if image == "":
            problems.append(Problem(PATH, f"{what}: the package knows no image keys of this chart version, so its "
                                          "images cannot be mirrored; use a version this library pins"))
            continue
        if is_unknown(image):
            continue  # an image built in the same program: pushed to the stack's own ECR
        registry = registry_of(str(image))
        if registry not in mirrors and not is_private_ecr(registry, args.region):
            release, _, key = what.partition(" (")
            unmapped[(release, registry)].append(key.rstrip(")") or str(image))
    for (what, registry), images in unmapped.items():
        problems.append(Problem(PATH, f"{what}: {', '.join(images)} from {registry}, which images.registryMirrors "
                                      f"does not map; map {registry} to a mirror prefix"))
    return problems
