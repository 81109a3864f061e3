"""The EFA device plugin: created when a GPU pool has EFA, on EFA-capable GPU nodes only."""

from __future__ import annotations

import copy

from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
from eks_gpu_training.platform import parse_platform_args
from eks_gpu_training.addons.efa_device_plugin import (
    CHART,
    CHART_REPOSITORY,
    CHART_VERSION,
    INSTANCE_TYPE_LABEL,
    efa_device_plugin_values,
    efa_instance_types,
    efa_needed,
)
from tests.support.builders import raw_settings, without_karpenter
from tests.support.harness import stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
NS = "eks-gpu-training"


def efa_releases(graph):
    return [r for r in graph.of_type(RELEASE) if r.inputs["chart"] == CHART]


def platform_args(stack: str, karpenter: bool = True, **overrides):
    """A stack's arguments with some keys replaced; ``karpenter=False``: ``without_karpenter``."""
    config = stack_config(stack) if karpenter else without_karpenter(stack_config(stack))
    return parse_platform_args({**raw_settings(config), **copy.deepcopy(overrides)})


def test_efa_is_needed_when_any_gpu_pool_has_efa():
    assert efa_needed(platform_args("prod"))
    assert not efa_needed(platform_args("dev"))
    assert not efa_needed(platform_args("prod", karpenter=False, gpuNodeGroups=[], scheduling={}))
    prod_pool = stack_config("prod")[f"{NS}:gpuNodeGroups"][0]
    dev_pool = stack_config("dev")[f"{NS}:gpuNodeGroups"][0]
    assert efa_needed(platform_args("prod", karpenter=False, gpuNodeGroups=[{**dev_pool, "name": "small"}, prod_pool]))
    assert not efa_needed(platform_args("prod", karpenter=False, gpuNodeGroups=[{**prod_pool, "efa": "disabled"}]))


def test_a_karpenter_pool_with_efa_needs_the_plugin_too():
    # prod's Karpenter pool is p5.48xlarge with EFA; without any managed pool the plugin is still needed
    assert efa_needed(platform_args("prod", gpuNodeGroups=[], scheduling={}))


def test_prod_has_one_efa_plugin_release_that_tolerates_the_gpu_taint(prod_graph):
    (release,) = efa_releases(prod_graph)
    assert release.inputs["name"] == CHART
    assert release.inputs["version"] == CHART_VERSION == "v0.5.30"
    assert release.inputs["repositoryOpts"] == {"repo": CHART_REPOSITORY}
    assert release.inputs["namespace"] == "kube-system"
    assert gpu_toleration() in release.inputs["values"]["tolerations"]
    assert release.inputs["values"] == efa_device_plugin_values()


def test_dev_has_no_efa_plugin(dev_graph):
    assert efa_releases(dev_graph) == []


def test_plugin_runs_only_on_efa_capable_gpu_training_nodes():
    values = efa_device_plugin_values()
    assert values["nodeSelector"] == {"role": "gpu-training"}
    labels = values["supportedInstanceLabels"]
    assert labels["keys"] == [INSTANCE_TYPE_LABEL]
    assert labels["values"] == efa_instance_types()
    assert "p5.48xlarge" in labels["values"]
    assert "p4d.24xlarge" in labels["values"]
    assert all(GPU_INSTANCE_TYPES[t].efa_interfaces > 0 for t in labels["values"])
    assert "g6e.xlarge" not in labels["values"]  # dev's type has no EFA
    assert {t for t, f in GPU_INSTANCE_TYPES.items() if f.efa_interfaces} == set(labels["values"])


def test_efa_plugin_release_waits_for_the_gpu_node_groups_so_helm_never_waits_for_a_boot(prod_graph):
    (release,) = efa_releases(prod_graph)
    assert prod_graph.depends_on(release, prod_graph.one("eks:index:Cluster"))
    groups = [r for r in prod_graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")]
    assert groups
    assert all(prod_graph.depends_on(release, group) for group in groups)
