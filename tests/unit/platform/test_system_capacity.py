"""The system node group must hold the controllers the stack puts on it: the fit check, and its
constants held to what the pinned charts render."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.support.cluster_objects import selects_node
from tests.support.harness import stack_config

from eks_gpu_training.facts import yaml_io
from eks_gpu_training.addons import system_footprints as footprints
from eks_gpu_training.addons.gpu_operator import gpu_operator_values
from eks_gpu_training.addons.karpenter import KARPENTER_CHART, karpenter_values
from eks_gpu_training.config import KARPENTER_CHART_VERSIONS, ConfigError, GpuOperatorConfig, SystemNodeGroupConfig
from eks_gpu_training.facts.node_os import node_os_of
from eks_gpu_training.facts.quantity import MIB, parse_quantity
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.system_capacity import system_node_pods, unplaced, validate_system_capacity
from eks_gpu_training.facts.node_allocatable import allocatable

SYSTEM = "eks-gpu-training:systemNodeGroup"


def problems(config) -> list[str]:
    try:
        platform_args_from_settings(config)
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


def dev_with_system(**system) -> dict:
    config = copy.deepcopy(stack_config("dev"))
    config[SYSTEM] = {**config[SYSTEM], **system}
    return config


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_stacks_system_nodes_hold_their_controllers(stack):
    assert validate_system_capacity(platform_args_from_settings(stack_config(stack))) == []


def test_refuses_two_m7i_large_for_karpenter_kueue_and_the_gpu_operator():
    [problem] = problems(dev_with_system(instanceTypes=["m7i.large"]))
    assert problem.startswith("systemNodeGroup.instanceTypes: 2 x m7i.large (1930m CPU, 6903Mi, 29 pods allocatable each) cannot hold")
    assert "karpenter 2x1000m" in problem
    assert "kueue-controller-manager 2x500m" in problem
    assert "allowed: instanceTypes [m7i.xlarge] or desiredSize 3" in problem


def test_refuses_one_system_node_for_karpenters_two_replicas_with_hostname_anti_affinity():
    [problem] = problems(dev_with_system(minSize=1, desiredSize=1))
    assert "karpenter needs 2 nodes (required hostname anti-affinity, one replica per node)" in problem


def test_refuses_no_system_node_at_creation():
    [problem] = problems(dev_with_system(minSize=0, desiredSize=0))
    assert "no system node is created (desiredSize 0)" in problem


def test_the_smallest_of_several_system_types_must_hold_everything():
    [problem] = problems(dev_with_system(instanceTypes=["m7i.xlarge", "c7i.large"]))
    assert "2 x c7i.large" in problem


def test_refuses_a_system_type_whose_allocatable_is_unknown():
    [problem] = problems(dev_with_system(instanceTypes=["t3.medium"]))
    assert problem.startswith("systemNodeGroup.instanceTypes[0]: 't3.medium': its kubelet allocatable is not known here")
    assert "allowed: m5.large, m5.xlarge" in problem


def test_two_m7i_large_suffice_without_karpenter_and_kueue():
    config = dev_with_system(instanceTypes=["m7i.large"])
    config["eks-gpu-training:karpenter"] = {"enabled": False}
    config["eks-gpu-training:kueue"] = {"enabled": False}
    config["eks-gpu-training:scheduling"] = {}
    assert [p for p in problems(config) if p.startswith("systemNodeGroup")] == []


def test_a_disabled_system_node_group_is_not_checked():
    args = platform_args_from_settings(stack_config("dev"))
    tiny = SystemNodeGroupConfig(enabled=False, instance_types=["m7i.large"], min_size=0, desired_size=0)
    assert validate_system_capacity(args.model_copy(update={"system_node_group": tiny})) == []


def test_daemonsets_count_on_every_node_and_pods_count_against_max_pods():
    node = allocatable("m7i.large")
    many = [footprints.PodFootprint("tiny", replicas=60, cpu_millicores=0, memory_mib=0)]
    assert "no node has room for tiny" in unplaced(node, 2, many, list(footprints.EKS_NODE_DAEMONSETS))
    heavy = [footprints.PodFootprint("heavy", 1, 1900, 0)]
    assert "the DaemonSets alone (3800m CPU, 0Mi) exceed one node" == unplaced(node, 1, [], heavy * 2)


# What Helm's engine renders for the pinned charts, compared with the constants.

SYSTEM_NODE_LABELS = {
    "role": "system",
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "node.kubernetes.io/instance-type": "m7i.xlarge",
}
"""The labels a system node carries that the charts' selectors read."""


def runs_on_system_nodes(pod_spec: dict) -> bool:
    """A system node satisfies the pod's nodeSelector and required node affinity (no taint to tolerate)."""
    return selects_node(pod_spec, SYSTEM_NODE_LABELS)


def footprint_of(obj: dict) -> footprints.PodFootprint:
    spec = obj["spec"]["template"]["spec"]
    requests = [(c.get("resources") or {}).get("requests") or {} for c in spec["containers"]]
    anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return footprints.PodFootprint(
        obj["metadata"]["name"],
        replicas=obj["spec"].get("replicas", 1) if obj["kind"] == "Deployment" else 1,
        cpu_millicores=int(sum(parse_quantity(str(r.get("cpu", "0"))) for r in requests) * 1000),
        memory_mib=int(sum(parse_quantity(str(r.get("memory", "0"))) for r in requests) / MIB),
        one_per_node=any(term.get("topologyKey") == "kubernetes.io/hostname" for term in anti),
    )


def rendered_system_pods(folder) -> tuple[set, set]:
    """(Deployments, DaemonSets) of one rendered release that land on system nodes."""
    deployments, daemonsets = set(), set()
    for path in sorted(folder.glob("*.yaml")):
        obj = yaml_io.load(path.read_text())
        if obj["kind"] in ("Deployment", "DaemonSet") and runs_on_system_nodes(obj["spec"]["template"]["spec"]):
            (deployments if obj["kind"] == "Deployment" else daemonsets).add(footprint_of(obj))
    return deployments, daemonsets


def expected_by_chart(chart: str, version: str) -> tuple[set, set]:
    if chart.endswith("/karpenter"):
        return {footprints.KARPENTER_CONTROLLER[version]}, set()
    if chart.endswith("/kueue"):
        return {footprints.KUEUE_CONTROLLER[version]}, set()
    if chart == "gpu-operator":
        return set(footprints.GPU_OPERATOR_CONTROLLERS[version]), set(footprints.GPU_OPERATOR_DAEMONSETS[version])
    if chart.endswith("eks-node-monitoring-agent"):
        return set(), set(footprints.NODE_MONITORING_DAEMONSETS[version])
    if chart.endswith("/jobset"):
        return {footprints.JOBSET_CONTROLLER[version]}, set()
    if chart.endswith("/kubeflow-trainer"):
        return {footprints.TRAINER_CONTROLLER[version]}, set()
    return set(), set()


def test_the_footprint_constants_are_what_the_pinned_charts_render(rendered_stack, reference_dir):
    stack, out, _ = rendered_stack
    checked = []
    for path in sorted((out / "values").glob("*.yaml")):
        release = yaml_io.load(path.read_text())
        version = str(release["version"])
        if "eks-node-monitoring-agent" in release["chart"]:
            # EKS resolves the add-on's build at deployment; render used the one chart source it has.
            version = footprints.NODE_MONITORING_CHART_VERSION
        folder = out / release["rendered"]["folder"]
        assert rendered_system_pods(folder) == expected_by_chart(release["chart"], version), (stack, release["chart"])
        checked.append(release["chart"])
    assert any("karpenter" in c for c in checked)
    assert "gpu-operator" in checked


@pytest.mark.parametrize("version", ["v24.9.2", "v26.7.0"])
def test_the_gpu_operator_footprint_holds_for_every_supported_chart_version(version, chart_sources, tmp_path):
    from eks_gpu_training.offline.render.charts import render_release

    values = gpu_operator_values(GpuOperatorConfig(chart_version=version), node_os_of("AL2023_x86_64_NVIDIA"), {"role": "system"})
    rendered = render_release(
        {"release": "gpu-operator", "chart": "gpu-operator", "version": version, "namespace": "gpu-operator", "values": values},
        chart_sources.locate("gpu-operator", version),
    )
    assert not rendered.error, rendered.error
    assert not rendered.skipped, rendered.skipped
    for i, (_, obj) in enumerate(rendered.objects):
        (tmp_path / f"{i}.yaml").write_text(yaml.safe_dump(obj))
    assert rendered_system_pods(tmp_path) == expected_by_chart("gpu-operator", version)


@pytest.mark.parametrize("version", KARPENTER_CHART_VERSIONS)
def test_the_karpenter_footprint_holds_for_every_supported_chart_version(version, chart_sources, tmp_path):
    from eks_gpu_training.offline.render.charts import render_release

    values = karpenter_values("research", "https://example.eks.amazonaws.com", "research-queue", {"role": "system"},
                              region="us-west-2", node_repair=False)
    rendered = render_release(
        {"release": "karpenter", "chart": KARPENTER_CHART, "version": version, "namespace": "kube-system", "values": values},
        chart_sources.locate(KARPENTER_CHART, version),
    )
    assert not rendered.error, rendered.error
    assert not rendered.skipped, rendered.skipped
    for i, (_, obj) in enumerate(rendered.objects):
        (tmp_path / f"{i}.yaml").write_text(yaml.safe_dump(obj))
    assert rendered_system_pods(tmp_path) == expected_by_chart(KARPENTER_CHART, version)


def test_every_controller_the_stack_enables_is_counted():
    args = platform_args_from_settings(stack_config("prod"))
    controllers, daemonsets = system_node_pods(args)
    names = {c.name for c in controllers}
    assert {"coredns", "karpenter", "kueue-controller-manager", "gpu-operator", "fsx-csi-controller"} <= names
    assert {"aws-node", "kube-proxy", "eks-node-monitoring-agent", "gpu-operator-node-feature-discovery-worker", "fsx-csi-node"} <= {d.name for d in daemonsets}
