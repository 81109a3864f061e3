"""The files of a render: ``resources.json``, ``manifests/``, ``patches/`` and ``values/``.

Which resource goes where is decided by its type alone, so objects other components add later
(DaemonSets, custom resources, Helm releases) land in the right folder without changes here.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Optional

import yaml

from .cache import RenderCache, render_release_cached
from .charts import CHARTS_DIR, SOURCE_KEY, YAML_DUMPER, ChartRender, object_filename, safe_name
from .registrations import Resource, StackRender
from ...addons.system_footprints import NODE_MONITORING_CHART_VERSION
from ..chart_sources import ChartSources
from .markers import is_placeholder

RESOURCES_FILE = "resources.json"
MANIFESTS_DIR = "manifests"
PATCHES_DIR = "patches"
VALUES_DIR = "values"

ADDON_TYPE = "aws:eks/addon:Addon"
ADDON_CHARTS: dict[str, tuple[str, str, str]] = {
    # add-on name -> (the namespace EKS installs it into, the chart's repository, the newest chart
    # version this library has checked, which stands in while EKS resolves the add-on's build)
    "eks-node-monitoring-agent": (
        "kube-system", "https://aws.github.io/eks-node-monitoring-agent", NODE_MONITORING_CHART_VERSION),
}
"""EKS add-ons that install a public Helm chart of the same name and version, rendered like Helm
releases (the node monitoring agent's: aws/eks-node-monitoring-agent,
charts/eks-node-monitoring-agent; its add-on configuration values are that chart's values)."""
_ADDON_VERSION = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+)(?:-eksbuild\.\d+)?$")

HELM_RELEASE_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
"""Helm releases: their values go to ``values/``; what their charts render goes to
``manifests/charts/<release>/`` (``charts.py``)."""

_OBJECT_TYPE = re.compile(r"^kubernetes:(?P<group>[^:]+):(?P<kind>[A-Za-z0-9]+)$")


def is_kubernetes_object(resource: Resource) -> bool:
    """A resource that is one Kubernetes object (or a patch of one): ``kubernetes:<group>/<version>:<Kind>``
    with ``apiVersion`` and ``kind`` among its inputs. Helm releases, providers and the YAML/Kustomize
    components are not."""
    return (
        resource.custom
        and resource.type not in HELM_RELEASE_TYPES
        and _OBJECT_TYPE.match(resource.type) is not None
        and "apiVersion" in resource.inputs
        and "kind" in resource.inputs
    )


def is_patch(resource: Resource) -> bool:
    """A server-side-apply patch (``NamespacePatch``...): applied over the object of that name, which
    the apply creates when it is missing."""
    return resource.type.endswith("Patch")


def manifest(resource: Resource) -> dict[str, Any]:
    """The Kubernetes object a resource creates, fields in the usual order."""
    inputs = dict(resource.inputs)
    metadata = dict(inputs.pop("metadata", None) or {})
    if not metadata.get("name"):
        # pulumi-kubernetes names an unnamed object after the resource, plus a random suffix.
        metadata["name"] = f"<unknown: auto-name {resource.name}-xxxxxxxx>"
    head = {"apiVersion": inputs.pop("apiVersion"), "kind": inputs.pop("kind"), "metadata": metadata}
    return {**head, **inputs}


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", part).strip("-") or "unnamed"


def manifest_filename(resource: Resource, obj: dict[str, Any]) -> str:
    """``<kind>_<namespace>_<name>.yaml`` (``_`` cannot occur in a Kubernetes name); cluster-scoped
    objects and objects without a namespace have no namespace part."""
    metadata = obj["metadata"]
    name = metadata["name"] if not is_placeholder(metadata["name"]) else resource.name
    parts = [obj["kind"].lower(), metadata.get("namespace"), name]
    return "_".join(_safe(str(p)) for p in parts if p) + ".yaml"


def helm_release(resource: Resource) -> dict[str, Any]:
    """A Helm release's chart coordinates and values."""
    inputs = resource.inputs
    repository_opts = inputs.get("repositoryOpts") or {}
    return {
        "release": inputs.get("name") or resource.name,
        "namespace": inputs.get("namespace"),
        "chart": inputs.get("chart"),
        "repository": repository_opts.get("repo"),
        "version": inputs.get("version"),
        "values": inputs.get("values") or {},
        "skipCrds": bool(inputs.get("skipCrds")),
        "resource": {"type": resource.type, "name": resource.name},
    }


def addon_release(resource: Resource) -> dict[str, Any]:
    """An EKS add-on that installs a chart, as the Helm release it amounts to."""
    inputs = resource.inputs
    name = str(inputs.get("addonName"))
    version = inputs.get("addonVersion")
    match = _ADDON_VERSION.match(version) if isinstance(version, str) else None
    configuration = inputs.get("configurationValues")
    values = json.loads(configuration) if isinstance(configuration, str) and not is_placeholder(configuration) else {}
    namespace, repository, checked = ADDON_CHARTS[name]
    release = {
        "release": name,
        "namespace": namespace,
        "chart": name,
        "repository": repository,
        "version": match.group("version") if match else checked,
        "values": values,
        "skipCrds": False,
        "resource": {"type": resource.type, "name": resource.name},
    }
    if match is None:
        # EKS resolves the add-on's build for the cluster at deployment; offline, the newest chart
        # this library has checked stands in, and the values file says so.
        release["versionNote"] = f"resolved by EKS at deployment ({version}); rendered with chart {checked}"
    return release


def chart_releases(render: StackRender) -> list[dict[str, Any]]:
    """Every Helm release of the render, and every EKS add-on that installs a chart, as releases."""
    return [helm_release(r) if r.type in HELM_RELEASE_TYPES else addon_release(r) for r in render.resources if _has_chart(r)]


def _has_chart(resource: Resource) -> bool:
    return resource.type in HELM_RELEASE_TYPES or (
        resource.type == ADDON_TYPE and resource.inputs.get("addonName") in ADDON_CHARTS)


def _dump(data: Any) -> str:
    # Wide lines: a long value (a placeholder, a policy) stays on one line instead of being folded.
    # libyaml's emitter where PyYAML has it, as for chart objects: the same text, five times faster.
    return yaml.dump(data, Dumper=YAML_DUMPER, sort_keys=False, default_flow_style=False, width=1_000_000)


def _unique(name: str, taken: set[str]) -> str:
    stem, suffix, n = name[: -len(".yaml")], ".yaml", 2
    while name in taken:
        name, n = f"{stem}-{n}{suffix}", n + 1
    taken.add(name)
    return name


def resources_document(render: StackRender) -> dict[str, Any]:
    """The content of ``resources.json``."""
    return {
        "stack": render.stack,
        "project": render.project,
        "region": render.region,
        "kubernetesVersion": render.kubernetes_version,
        "legend": {
            "<unknown: ATTRIBUTE of TYPE NAME>": "a value that exists only once that resource is deployed",
            "<unknown: output of TYPE NAME>": "a value computed at deployment from that resource's outputs",
            "<unknown: OUTPUT of stack NAME>": "an output of stack NAME, read by stack reference, that exists only "
            "once that stack is deployed (its name comes from that stack's own offline render)",
            "<secret>": "a secret value, not written out",
            "provider null": "the package's default provider, configured from the stack (aws:region, ...)",
            "protect true": "Pulumi refuses to delete or replace the resource until protection is turned off",
            "ignoreChanges": "inputs a later `pulumi up` leaves as they are in AWS (e.g. a node count an autoscaler owns)",
            "remote true": "a multi-language component (pulumi-eks): its own children are created by its "
            "provider at deployment and are not listed",
        },
        "exports": render.exports,
        "resources": [r.as_json() for r in render.resources],
    }


def write_files(
    render: StackRender, out: Path, sources: Optional[ChartSources] = None, cache: Optional[RenderCache] = None
) -> tuple[dict[str, int], list[ChartRender]]:
    """Write ``resources.json``, ``manifests/``, ``patches/`` and ``values/`` into ``out`` (folders
    are emptied first, so a file never outlives its object), and each Helm release's chart objects
    rendered from its chart from ``sources`` (None: not rendered; or copied from ``cache``, see
    ``cache``); return how many files of each, and the chart renders."""
    out.mkdir(parents=True, exist_ok=True)
    (out / RESOURCES_FILE).write_text(json.dumps(resources_document(render), indent=2) + "\n")
    counts = {MANIFESTS_DIR: 0, PATCHES_DIR: 0, VALUES_DIR: 0}
    for folder in counts:
        (out / folder).mkdir(exist_ok=True)
        for stale in (out / folder).glob("*.yaml"):
            stale.unlink()
    shutil.rmtree(out / MANIFESTS_DIR / CHARTS_DIR, ignore_errors=True)
    charts: list[ChartRender] = []
    taken: dict[str, set[str]] = {folder: set() for folder in counts}
    for resource in render.resources:
        if _has_chart(resource):
            content = helm_release(resource) if resource.type in HELM_RELEASE_TYPES else addon_release(resource)
            folder = VALUES_DIR
            filename = _safe(resource.name) + ".yaml"
            charts.append(_write_chart(content, out, sources, cache))
            content[SOURCE_KEY] = charts[-1].record()
        elif is_kubernetes_object(resource):
            folder = PATCHES_DIR if is_patch(resource) else MANIFESTS_DIR
            content = manifest(resource)
            filename = manifest_filename(resource, content)
        else:
            continue
        (out / folder / _unique(filename, taken[folder])).write_text(_dump(content))
        counts[folder] += 1
    counts["chart objects"] = sum(len(chart.objects) for chart in charts)
    return counts, charts


def _write_chart(
    release: dict[str, Any], out: Path, sources: Optional[ChartSources], cache: Optional[RenderCache]
) -> ChartRender:
    """Render a release's chart into ``manifests/charts/<release>/``."""
    chart, texts = render_release_cached(release, sources, cache)
    folder = out / MANIFESTS_DIR / CHARTS_DIR / safe_name(chart.release)
    if chart.objects:
        folder.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    for (_, obj), text in zip(chart.objects, texts, strict=True):
        (folder / _unique(object_filename(obj), taken)).write_text(text)
    return chart
