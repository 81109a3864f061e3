"""Every values key the project sets exists in the pinned chart's own values.yaml.

Helm ignores a key a chart does not read, so a misspelt or renamed key (``dcgmExporter.servicemonitor``,
``driver.enable``) installs cleanly and silently does nothing. The charts' values.yaml files under
``../shared/reference`` are the upstream ones (GPU Operator v26.7.0 and v24.9.2, its
node-feature-discovery 0.19.0 subchart, EFA device plugin v0.5.30); the tests skip without them.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from eks_gpu_training.addons.karpenter import KARPENTER_CHART, KARPENTER_CRD_CHART
from eks_gpu_training.addons.job_apis import JOBSET_CHART, TRAINER_CHART
from eks_gpu_training.addons.kueue import KUEUE_CHART
import yaml

from eks_gpu_training.offline.check import helm as check_helm
from eks_gpu_training.config import GPU_OPERATOR_CHART_VERSIONS, GpuOperatorConfig
from eks_gpu_training.addons.efa_device_plugin import CHART as EFA_CHART
from eks_gpu_training.addons.efa_device_plugin import CHART_VERSION as EFA_CHART_VERSION
from eks_gpu_training.addons.efa_device_plugin import efa_device_plugin_values, efa_instance_types
from eks_gpu_training.addons.gpu_operator import CHART as GPU_OPERATOR_CHART
from eks_gpu_training.addons.gpu_operator import gpu_operator_values
from eks_gpu_training.facts.node_os import NODE_OS_BY_AMI_TYPE
from eks_gpu_training.facts.gpu_nodes import gpu_toleration

NFD = "node-feature-discovery"
NFD_VERSION = "0.19.0"


def unknown_keys(values: Any, chart: Any) -> list[str]:
    """Key paths of ``values`` the chart's values do not declare, or whose kind disagrees (the
    render check's walk, ``eks_gpu_training.offline.check.helm``)."""
    return list(check_helm.unknown_keys(values, chart))


def test_the_walk_catches_misspelt_and_mistyped_keys():
    chart = {"driver": {"enabled": True}, "daemonsets": {"tolerations": []}, "mig": {"strategy": "single"}}
    assert unknown_keys({"driver": {"enabled": False}, "daemonsets": {"tolerations": [{"key": "a"}]}}, chart) == []
    assert unknown_keys({"driver": {"enable": False}}, chart) == [
        "driver.enable: not declared in the chart's values.yaml; did you mean 'enabled'?"
    ]
    assert unknown_keys({"drivers": {"enabled": False}}, chart) == [
        "drivers: not declared in the chart's values.yaml; did you mean 'driver'?"
    ]
    assert len(unknown_keys({"driver": {"enabled": "false"}}, chart)) == 1
    assert len(unknown_keys({"mig": "none"}, chart)) == 1
    assert len(unknown_keys({"daemonsets": {"tolerations": {"key": "a"}}}, chart)) == 1


def load(path: Path) -> dict[str, Any]:
    assert path.is_file(), f"{path} is missing from the reference artefacts"
    return yaml.safe_load(path.read_text())


def gpu_operator_chart(reference: Path, version: str) -> dict[str, Any]:
    return load(reference / "gpu-operator" / f"values-{version}.yaml")


def nfd_chart(reference: Path) -> dict[str, Any]:
    return load(reference / "gpu-operator" / f"node-feature-discovery-{NFD_VERSION}" / "values.yaml")


def module_chart_values(chart: str, version: str) -> dict[str, Any]:
    """The values.yaml of the JobSet or Trainer chart at ``version``, from its Go module at the
    release's tag (``tests/support/module_charts.py``: the reference folder holds neither)."""
    from tests.support.module_charts import JOBSET, TRAINER, module_source

    module_chart = {JOBSET_CHART: JOBSET, TRAINER_CHART: TRAINER}[chart]
    return load(module_source(module_chart, f"v{version}") / module_chart.folder / "values.yaml")


def karpenter_values_file(reference: Path, chart: str, version: str) -> Path:
    """The values.yaml of the ``karpenter`` or ``karpenter-crd`` chart at ``version``: the reference
    folder's, or the module's at the release's tag (``tests/support/module_charts.py``)."""
    from tests.support.module_charts import karpenter_chart_folder, proxy_or_skip

    with proxy_or_skip():
        return karpenter_chart_folder(reference, chart.rsplit("/", 1)[-1], version) / "values.yaml"


def gpu_operator_problems(values: dict[str, Any], reference: Path, version: str) -> list[str]:
    """The GPU Operator's own keys against its values.yaml; ``node-feature-discovery.*`` against the subchart's."""
    own = {k: v for k, v in values.items() if k != NFD}
    problems = unknown_keys(own, gpu_operator_chart(reference, version))
    if NFD in values:
        assert NFD in gpu_operator_chart(reference, version), "the NFD subchart is no longer bundled"
        problems += [f"{NFD}.{p}" for p in unknown_keys(values[NFD], nfd_chart(reference))]
    return problems


# Every branch of the values function: both node OS families, with and without system nodes, with
# and without the Prometheus operator (and ServiceMonitor labels).
VALUE_VARIANTS = [
    pytest.param(node_os, selector, config, id=f"{node_os.name}-{'system' if selector else 'nosystem'}-{label}")
    for node_os, selector, (label, config) in itertools.product(
        sorted(set(NODE_OS_BY_AMI_TYPE.values()), key=lambda o: o.name),
        [{"role": "system"}, {}],
        [
            ("noprom", GpuOperatorConfig()),
            ("prom", GpuOperatorConfig(prometheus_operator=True, service_monitor_labels={"release": "prometheus"})),
        ],
    )
]


@pytest.mark.parametrize("version", GPU_OPERATOR_CHART_VERSIONS)
@pytest.mark.parametrize(("node_os", "selector", "config"), VALUE_VARIANTS)
def test_gpu_operator_values_exist_in_the_chart(reference_dir, version, node_os, selector, config):
    values = gpu_operator_values(config.model_copy(update={"chart_version": version}), node_os, selector)
    assert gpu_operator_problems(values, reference_dir, version) == []


def test_stack_releases_set_only_keys_of_their_pinned_charts(reference_dir, stack_graph):
    _, graph = stack_graph
    releases = graph.of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    for release in releases:
        chart, version, values = release.inputs["chart"], release.inputs["version"], release.inputs.get("values", {})
        if chart == GPU_OPERATOR_CHART:
            assert gpu_operator_problems(values, reference_dir, version) == [], release.name
        elif chart == EFA_CHART:
            assert version == EFA_CHART_VERSION
            chart_values = load(reference_dir / "efa-device-plugin" / f"values-{version}.yaml")
            assert unknown_keys(values, chart_values) == [], release.name
        elif chart in (KARPENTER_CHART, KARPENTER_CRD_CHART):
            chart_values = load(karpenter_values_file(reference_dir, chart, version))
            assert unknown_keys(values, chart_values) == [], release.name
        elif chart == KUEUE_CHART:
            chart_values = load(reference_dir / "charts" / f"kueue-{version}" / "values.yaml")
            assert unknown_keys(values, chart_values) == [], release.name
        elif chart in (JOBSET_CHART, TRAINER_CHART):
            assert unknown_keys(values, module_chart_values(chart, version)) == [], release.name
        else:
            pytest.fail(f"no reference values for chart {chart} of release {release.name}")


def test_efa_plugin_values_exist_in_the_chart(reference_dir):
    chart = load(reference_dir / "efa-device-plugin" / f"values-{EFA_CHART_VERSION}.yaml")
    assert unknown_keys(efa_device_plugin_values(), chart) == []


def test_efa_plugin_chart_tolerates_nothing_by_default_so_the_gpu_taint_needs_our_toleration(reference_dir):
    chart = load(reference_dir / "efa-device-plugin" / f"values-{EFA_CHART_VERSION}.yaml")
    assert chart["tolerations"] == []
    assert gpu_toleration() in efa_device_plugin_values()["tolerations"]


def test_efa_instance_types_are_ones_upstream_lists_as_efa_capable(reference_dir):
    chart = load(reference_dir / "efa-device-plugin" / f"values-{EFA_CHART_VERSION}.yaml")
    upstream = set(chart["supportedInstanceLabels"]["values"])
    assert set(efa_instance_types()) <= upstream, sorted(set(efa_instance_types()) - upstream)
    assert chart["supportedInstanceLabels"]["keys"] == ["node.kubernetes.io/instance-type"]


def test_nfd_subchart_worker_tolerates_nothing_by_default(reference_dir):
    # The NFD subchart's own default leaves the worker off tainted GPU nodes; the values set the
    # worker's tolerations explicitly (a list replaces the GPU Operator chart's list wholesale).
    assert nfd_chart(reference_dir)["worker"]["tolerations"] == []


def test_nfd_values_satisfy_the_subchart_schema(reference_dir):
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = reference_dir / "gpu-operator" / f"node-feature-discovery-{NFD_VERSION}" / "values.schema.json"
    schema = json.loads(schema_path.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    for node_os, selector, config in (p.values for p in VALUE_VARIANTS):
        values = gpu_operator_values(config, node_os, selector)[NFD]
        assert [e.message for e in validator.iter_errors(values)] == []
        tolerations = values["worker"]["tolerations"]
        assert gpu_toleration() in tolerations
    # and the schema does check tolerations (a wrong type is caught)
    assert list(validator.iter_errors({"worker": {"tolerations": [{"key": 1}]}}))
