"""Generate the facts the package needs at run time from the upstream files they come from.

    python scripts/generate_package_data.py --reference ../shared/reference --chart DIR --chart DIR

(each ``--chart`` a chart folder the reference lacks: JobSet's, Kubeflow Trainer's and Karpenter's
newer ones, at their release tags in their Go modules, which ``tests/support/module_charts.py`` fetches; ``python -m
tests.support.module_charts`` prints their folders)

Writes, each with the upstream source it was read from:

- ``components/local/data/instance-types.json``: what a node of each instance type the stacks can
  use (every GPU type of the catalog and every system node type) reports to Kubernetes, read from
  Karpenter 1.14.1's "Instance Types" reference (aws/karpenter-provider-aws,
  website/content/en/v1.14/reference/instance-types.md): the labels Karpenter gives the node and
  the allocatable resources. The local cluster's simulated nodes report exactly these.
- ``components/offline/data/eks-node-monitoring-agent-1.7.0.json``: the EKS node monitoring
  agent's add-on configuration schema (aws/eks-node-monitoring-agent v1.7.0,
  charts/configuration.schema.json) and the node conditions and reasons it reports
  (pkg/reasons/reasons.yaml), which ``eks-gpu-training-check`` and the docs' table read.

- ``components/facts/data/chart-images.json``: every image repository each pinned chart's
  ``values.yaml`` (and its subcharts') names, by values key path, read from the charts at their
  release tags (NVIDIA/gpu-operator, aws/eks-charts, kubernetes-sigs/kueue, aws/karpenter-provider-aws,
  kubernetes-sigs/jobset, kubeflow/trainer): the keys ``images.registryMirrors`` rewrites, so every
  image a chart deploys comes from a mirror; where a chart names the registry apart (a ``registry``
  key beside the ``repository``), that key too.

``tests/unit/project/test_package_data.py`` regenerates them from the reference folder and fails when the shipped
files differ, so they cannot drift from their source.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]

INSTANCE_TYPES_DOC = Path("karpenter-1.14.1") / "docs-instance-types.md"
INSTANCE_TYPES_SOURCE = "aws/karpenter-provider-aws v1.14.1, website/content/en/v1.14/reference/instance-types.md"
AGENT = "eks-node-monitoring-agent-1.7.0"
AGENT_SOURCE = {
    "configurationSchema": "aws/eks-node-monitoring-agent v1.7.0, charts/configuration.schema.json",
    "reasons": "aws/eks-node-monitoring-agent v1.7.0, pkg/reasons/reasons.yaml",
}
CHART_IMAGES_SOURCE = "values.yaml of each pinned chart (and of its subcharts), at the chart's release tag"
OUTPUTS = {
    "chart-images": PROJECT / "components" / "facts" / "data" / "chart-images.json",
    "instance-types": PROJECT / "components" / "local" / "data" / "instance-types.json",
    "node-monitoring": PROJECT / "components" / "offline" / "data" / f"{AGENT}.json",
}


def instance_types(reference: Path) -> dict:
    from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
    from eks_gpu_training.facts.node_allocatable import SYSTEM_INSTANCE_TYPES
    from eks_gpu_training.local.instance_types import parse_table

    table = parse_table((reference / INSTANCE_TYPES_DOC).read_text())
    wanted = sorted({*GPU_INSTANCE_TYPES, *SYSTEM_INSTANCE_TYPES})
    missing = [name for name in wanted if name not in table]
    if missing:
        raise SystemExit(f"{reference / INSTANCE_TYPES_DOC} lacks {', '.join(missing)}")
    return {
        "source": INSTANCE_TYPES_SOURCE,
        "types": {name: {"labels": table[name].labels, "allocatable": table[name].allocatable} for name in wanted},
    }


def node_monitoring(reference: Path) -> dict:
    folder = reference / AGENT
    return {
        "source": AGENT_SOURCE,
        "configurationSchema": json.loads((folder / "configuration.schema.json").read_text()),
        "reasons": yaml.safe_load((folder / "reasons.yaml").read_text()),
    }


def _image_repositories(values: object, path: tuple[str, ...] = (), switch=None):
    """(key path, repository, switch, registry) of every non-empty ``repository`` string in a chart's
    values; the switch is the nearest ``enabled`` key above it and its default, (path, bool), or
    None; the registry a ``registry`` key beside it names, (path, value), or None."""
    if isinstance(values, dict):
        if isinstance(values.get("enabled"), bool):
            switch = (".".join((*path, "enabled")), values["enabled"])
        registry = values.get("registry")
        for key, value in values.items():
            if key == "repository" and isinstance(value, str) and value:
                beside = (".".join((*path, "registry")), registry) if isinstance(registry, str) and registry else None
                yield ".".join((*path, key)), value, switch, beside
            else:
                yield from _image_repositories(value, (*path, str(key)), switch)


TEMPLATE_SWITCHES = {
    # templates/kueueviz/*.yaml render only `{{- if .Values.enableKueueViz }}`.
    "kueue": {"kueueViz.": ("enableKueueViz", False)},
    # templates/runtimes/*.yaml render only when `trainer.runtimes.enabled`: runtimes.defaultEnabled
    # or one runtime's own `enabled`; the stack leaves them all off, so the first stands for the rest.
    "kubeflow-trainer": {"runtimes.installer.": ("runtimes.defaultEnabled", False),
                         "runtimes.torchtuneDistributed.": ("runtimes.defaultEnabled", False)},
}
"""Switches a chart's templates test that sit outside the values' own nesting: chart -> key path
prefix -> (switch, its default in values.yaml)."""


def _template_switch(chart: str, path: str):
    name = chart.rsplit("-", 1)[0]
    for prefix, switch in TEMPLATE_SWITCHES.get(name, {}).items():
        if path.startswith(prefix):
            return switch
    return None


def _chart_entry(name: str, found: list) -> dict:
    entries = {}
    for path, repository, switch, registry in found:
        switch = _template_switch(name, path) or switch
        entries[path] = {
            "repository": repository,
            **({"enabledBy": switch[0], "enabledByDefault": switch[1]} if switch else {}),
            **({"registryKey": registry[0], "registry": registry[1]} if registry else {}),
        }
    return entries


def _values_images(chart: Path) -> list:
    found = list(_image_repositories(yaml.safe_load((chart / "values.yaml").read_text()) or {}))
    for sub in sorted((chart / "charts").glob("*/values.yaml")):
        found += _image_repositories(yaml.safe_load(sub.read_text()) or {}, (sub.parent.name,))
    return found


def chart_images(reference: Path, extra_charts: tuple[Path, ...] = ()) -> dict:
    charts = {}
    for chart in sorted((reference / "charts").iterdir()):
        if (chart / "values.yaml").is_file():
            charts[chart.name] = _chart_entry(chart.name, _values_images(chart))
    for chart in extra_charts:
        # A chart folder of a project's source tree is named as the chart, its version in Chart.yaml.
        metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
        key = f"{metadata['name']}-{metadata['version']}"
        charts[key] = _chart_entry(key, _values_images(chart))
    return {"source": CHART_IMAGES_SOURCE, "charts": dict(sorted(charts.items()))}


def generate(reference: Path, extra_charts: tuple[Path, ...] = ()) -> dict[str, str]:
    """Each output's name -> its text."""
    documents = {"chart-images": chart_images(reference, extra_charts), "instance-types": instance_types(reference),
                 "node-monitoring": node_monitoring(reference)}
    return {name: json.dumps(document, indent=1, sort_keys=True) + "\n" for name, document in documents.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="the folder of unmodified upstream files")
    parser.add_argument("--chart", type=Path, action="append", default=[],
                        help="a chart folder the reference lacks, at its release tag (repeatable)")
    options = parser.parse_args()
    for name, text in generate(options.reference, tuple(options.chart)).items():
        OUTPUTS[name].parent.mkdir(parents=True, exist_ok=True)
        OUTPUTS[name].write_text(text)
        print(f"wrote {OUTPUTS[name].relative_to(PROJECT)} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
