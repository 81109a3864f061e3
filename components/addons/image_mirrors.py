"""Every image the stack deploys, pulled from the mirror of its registry (``images.registryMirrors``),
by the digest ``images.lock`` holds for it (``images.digests``, ``config.image_lock``).

One Pulumi transform on the platform component (``ResourceOptions.transforms``, which the engine
applies to every resource under it, packaged components' children too) rewrites, before each
resource is registered:

- the containers and init containers of every Kubernetes workload object (Pods, Jobs, CronJobs,
  Deployments, DaemonSets, StatefulSets, ReplicaSets) and of the Job templates of JobSets and
  TrainingRuntimes: the training jobs, the smoke test, the pre-flight checks, the topology labeler;
- the values of every Helm release: each key that names an image repository in the pinned chart's
  ``values.yaml`` (``facts.images``), set to its mirrored value whether the stack sets it or the chart's
  default stands. For the GPU Operator these are also the operands' repositories, which the
  operator reads from its ClusterPolicy at run time.

A program composing the components itself passes ``image_mirrors(...)`` in its own
``ResourceOptions(transforms=[...])``. What is not rewritten: the EKS add-ons' images (the node
monitoring agent, VPC CNI, CoreDNS), which EKS pulls from its own regional ECR through the VPC's ECR
endpoints; and the health gate's check pod, JSON in the gate's ConfigMap, out of a transform's
sight: ``HealthGate`` builds it from the mirrors itself (``HealthGateArgs.image_mirrors``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

import pulumi
from pulumi.runtime import rpc

from ..config.image_lock import locked_release_values, pinned, set_value
from ..config.image_references import ImagesConfig
from ..facts.images import chart_images, mirrored, named_repository, split_registry
from .chart_source import chart_name

WORKLOAD_KINDS = {"Pod", "Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet"}
GROUP_KINDS = {"JobSet": ("spec",), "TrainingRuntime": ("spec", "template", "spec")}
"""Custom resources holding Job templates (``replicatedJobs``), by the path to the JobSet spec in them:
the training apps' JobSets and TrainJobs' runtimes."""
_LOCAL_CHART = re.compile(r"^(?P<name>.+?)-v?(?P<version>\d+\.\d+\.\d+[^/]*?)(?:\.tgz)?$")


def _mirror_image(image: Any, mirrors: Mapping[str, str], digests: Mapping[str, str]) -> Any:
    if isinstance(image, str):
        return mirrored(pinned(image, digests), mirrors)
    if isinstance(image, pulumi.Output):
        return image.apply(lambda value: mirrored(pinned(value, digests), mirrors) if isinstance(value, str) else value)
    return image


def _pod_spec(props: dict[str, Any], kind: str) -> Optional[dict[str, Any]]:
    spec = props.get("spec")
    if not isinstance(spec, dict):
        return None
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("job_template") or spec.get("jobTemplate") or {}).get("spec")) or {}
    template = spec.get("template")
    return template.get("spec") if isinstance(template, dict) else None


def _group_pod_specs(props: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The pod specs of a JobSet's (or a TrainingRuntime's JobSet template's) replicated Jobs."""
    spec: Any = props
    for key in GROUP_KINDS[kind]:
        spec = spec.get(key) if isinstance(spec, dict) else None
    jobs = spec.get("replicatedJobs") if isinstance(spec, dict) else None
    result = []
    for job in jobs or []:
        pod_template = (((job or {}).get("template") or {}).get("spec") or {}).get("template") or {}
        if isinstance(pod_template.get("spec"), dict):
            result.append(pod_template["spec"])
    return result


def mirror_pod_spec(pod_spec: dict[str, Any], mirrors: Mapping[str, str], digests: Optional[Mapping[str, str]] = None) -> None:
    """Rewrite the images of a pod spec (plain dict) in place: each by its locked digest
    (``images.digests``), from its registry's mirror."""
    for key in ("containers", "init_containers", "initContainers", "ephemeral_containers", "ephemeralContainers"):
        for container in pod_spec.get(key) or []:
            if isinstance(container, dict) and "image" in container:
                container["image"] = _mirror_image(container["image"], mirrors, digests or {})


def _release_chart(props: dict[str, Any]) -> tuple[str, str]:
    """The chart name and version of a Release's inputs (a repository chart, or a local path)."""
    chart, version = str(props.get("chart") or ""), str(props.get("version") or "")
    if version:
        return chart_name(chart), version
    match = _LOCAL_CHART.match(Path(chart).name)
    return (match.group("name"), match.group("version")) if match else (chart_name(chart), "")


def mirror_release_values(values: Any, chart: str, version: str, mirrors: Mapping[str, str],
                          locked: Optional[ImagesConfig] = None) -> Any:
    """A Helm release's values with every image repository of ``chart`` at ``version`` mirrored, and
    each image ``locked`` (``images.digests`` and ``images.chartTags``) holds by its digest."""
    images = chart_images(chart, version) or {}

    def rewrite(plain: Any) -> Any:
        result = _deep_copy_dicts(plain) if isinstance(plain, dict) else {}
        if locked is not None:
            result = locked_release_values(result, chart, version, locked)
        for path, image in images.items():
            source = named_repository(result, path, image)
            target = mirrored(source, mirrors)
            if target == source:
                continue
            if image.registry_key is None:
                set_value(result, path, target)
                continue
            # The registry is a key of its own: the mirror's prefix takes its place, and the
            # repository becomes the rest of the mirrored reference (``library/`` added for Docker
            # Hub's official images, which the mirror serves under that path).
            rest = split_registry(source)[1]
            set_value(result, image.registry_key, target[: -len(rest) - 1])
            set_value(result, path, rest)
        return result

    if isinstance(values, pulumi.Output):
        return values.apply(rewrite)
    return rewrite(values)


def _deep_copy_dicts(value: Any) -> Any:
    """Copies of the nested dicts (and lists) of ``value``; other values (Outputs) as they are."""
    if isinstance(value, dict):
        return {k: _deep_copy_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy_dicts(v) for v in value]
    return value


def _revealed(props: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The inputs a transform is given, each secret one by its value, and the keys of the secret
    ones, which the transform's result makes secret again. The engine hands a transform a secret
    input as the SDK's secret wrapper, where the images of a pod spec holding a secret (an
    environment value) would be out of the transform's sight."""
    secret = {key for key, value in props.items()
              if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig}
    return {key: value["value"] if key in secret else value for key, value in props.items()}, secret


def image_mirrors(mirrors: Mapping[str, str], locked: Optional[ImagesConfig] = None) -> pulumi.ResourceTransform:
    """The transform that pulls every image from its registry's mirror (see the module), by
    the digest ``locked`` (``images.digests``, ``images.chartTags``) holds for it."""
    mirrors = dict(mirrors)
    digests = dict(locked.digests) if locked is not None else {}

    def transform(args: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
        if not mirrors and not digests or not args.type_.startswith("kubernetes:"):
            return None
        kind = args.type_.rsplit(":", 1)[-1]
        props, secret = _revealed(args.props)
        if args.type_ == "kubernetes:helm.sh/v3:Release":
            chart, version = _release_chart(props)
            props["values"] = mirror_release_values(props.get("values"), chart, version, mirrors, locked)
        elif kind in WORKLOAD_KINDS:
            props = _deep_copy_dicts(props)
            pod_spec = _pod_spec(props, kind)
            if pod_spec is None:
                return None
            mirror_pod_spec(pod_spec, mirrors, digests)
        elif kind in GROUP_KINDS:
            props = _deep_copy_dicts(props)
            for pod_spec in _group_pod_specs(props, kind):
                mirror_pod_spec(pod_spec, mirrors, digests)
        else:
            return None
        return pulumi.ResourceTransformResult({key: pulumi.Output.secret(value) if key in secret else value
                                               for key, value in props.items()}, args.opts)

    return transform
