"""Check a render (see ``eks_gpu_training.offline.render``) without a cloud: every Kubernetes object against the
schemas of the stack's Kubernetes version or its CRD, every Helm release's values against the
pinned chart, every AWS enumeration input against botocore's models, every EKS add-on's configuration
against the add-on's schema, every node repair override against the reasons the node monitoring
agent reports.

``python -m eks_gpu_training.offline.check RENDER_DIR`` (or ``eks-gpu-training-check``) prints one line per
failure and exits non-zero when there is any; what it could not check is printed as ``skipped:``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..render.charts import CHARTS_DIR, YAML_LOADER
from ..render.files import MANIFESTS_DIR, PATCHES_DIR, RESOURCES_FILE, VALUES_DIR
from .addons import check_addon
from .aws_enum_inputs import check_manifest_instance_types, check_resource_inputs
from .helm import check_release
from .kubernetes import CustomResourceSchemas, check_manifests, describe
from .repair import check_repair_reasons

@dataclass
class Report:
    """What a check found."""

    failures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, outcome: str, line: str) -> None:
        (self.failures if outcome == "fail" else self.skipped).append(line)

    def summary(self) -> str:
        counts = ", ".join(f"{n} {what}" for what, n in self.checked.items())
        return f"check: {counts}; {len(self.failures)} failure(s), {len(self.skipped)} skipped"


def _yaml_files(folder: Path, *, recursive: bool = False) -> list[tuple[str, Any]]:
    """``(path under the render, document)`` of each YAML file in ``folder`` (and, ``recursive``,
    its subfolders: ``manifests/charts/<release>/``)."""
    paths = sorted(folder.rglob("*.yaml") if recursive else folder.glob("*.yaml"))
    return [(f"{folder.name}/{p.relative_to(folder)}", yaml.load(p.read_text(), Loader=YAML_LOADER)) for p in paths]  # noqa: S506 - YAML_LOADER is a SafeLoader


def check_render(render_dir: Path) -> Report:
    """Check the render in ``render_dir``: the stack's objects and its charts' objects
    (``manifests/charts/<release>/``) alike. Custom resources are checked against the CRDs the
    render holds (Karpenter's karpenter-crd chart, Kueue's chart), as the API server would get
    them; each release's values against the chart it was rendered from."""
    report = Report()
    resources_file = render_dir / RESOURCES_FILE
    if not resources_file.is_file():
        report.failures.append(f"{render_dir}: not a render ({RESOURCES_FILE} missing)")
        return report
    document = json.loads(resources_file.read_text())
    manifests = _yaml_files(render_dir / MANIFESTS_DIR, recursive=True)
    releases = _yaml_files(render_dir / VALUES_DIR)
    chart_objects = sum(name.startswith(f"{MANIFESTS_DIR}/{CHARTS_DIR}/") for name, _ in manifests)
    report.checked = {
        "Kubernetes objects": len(manifests) - chart_objects,
        "chart objects": chart_objects,
        "Helm releases": len(releases),
        "AWS resources": sum(r["type"].startswith(("aws:", "eks:")) for r in document["resources"]),
    }
    crds = CustomResourceSchemas()
    for filename, obj in manifests:
        if isinstance(obj, dict) and obj.get("kind") == "CustomResourceDefinition":
            crds.add(obj, filename)
    where = "not among the CRDs the render holds (its charts' and its own)"
    for outcome, line in check_manifests(manifests, document["kubernetesVersion"], crds, where):
        report.add(outcome, line)
    for filename, obj in manifests:
        # The stack's own selections only: a chart's built-in list of instance types (the node
        # monitoring agent's DCGM affinity) is upstream's, and may name types newer than botocore.
        if isinstance(obj, dict) and not filename.startswith(f"{MANIFESTS_DIR}/{CHARTS_DIR}/"):
            report.failures.extend(f"{filename}: {describe(obj)}: {p}" for p in check_manifest_instance_types(obj))
    # A patch is applied server-side, which creates the object when it is missing (pulumi-kubernetes
    # applies every Patch resource so), so the API server holds it to its kind's schema as a whole.
    patches = _yaml_files(render_dir / PATCHES_DIR)
    report.checked["Kubernetes objects"] += len(patches)
    for outcome, line in check_manifests(patches, document["kubernetesVersion"], crds, where):
        report.add(outcome, line)

    for filename, release in releases:
        for outcome, line in check_release(filename, release):
            report.add(outcome, line)

    for resource in document["resources"]:
        report.failures.extend(f"{RESOURCES_FILE}: {p}" for p in check_resource_inputs(resource))
        for outcome, line in [*check_addon(resource), *check_repair_reasons(resource)]:
            report.add(outcome, f"{RESOURCES_FILE}: {line}")
    report.failures.sort()
    return report
