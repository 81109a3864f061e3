"""The GPU Operator: values derived from the node OS, GPU sharing refused, no wait on GPU nodes."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training.config import (
    GPU_OPERATOR_CHART_VERSIONS,
    NVIDIA_AMI_TYPES,
    ConfigError,
    GpuOperatorConfig,
)
from eks_gpu_training.platform import parse_platform_args
from eks_gpu_training.addons.gpu_operator import CHART, CHART_REPOSITORY, NAMESPACE, gpu_node_os, gpu_operator_values
from eks_gpu_training.facts.node_os import AL2023_NVIDIA, BOTTLEROCKET_NVIDIA, NODE_OS_BY_AMI_TYPE
from tests.support.builders import raw_settings, without_karpenter
from tests.support.harness import Graph, Registration, run_main, stack_config
from eks_gpu_training.facts.gpu_nodes import gpu_toleration

RELEASE = "kubernetes:helm.sh/v3:Release"
NS = "eks-gpu-training"
SYSTEM = {"role": "system"}


def operator_releases(graph: Graph) -> list[Registration]:
    return [r for r in graph.of_type(RELEASE) if r.inputs["chart"] == CHART]


def with_config(stack: str, **overrides) -> dict:
    """A stack's configuration with some project keys replaced."""
    config = copy.deepcopy(stack_config(stack))
    for key, value in overrides.items():
        config[f"{NS}:{key}"] = value
    return config


def prod_pools(**changes) -> list[dict]:
    pools = copy.deepcopy(stack_config("prod")[f"{NS}:gpuNodeGroups"])
    pools[0].update(changes)
    return pools


# --- values derived from the node OS -------------------------------------------------------------


def test_al2023_nodes_get_no_driver_and_no_toolkit_but_the_operators_device_plugin():
    values = gpu_operator_values(GpuOperatorConfig(), AL2023_NVIDIA, SYSTEM)
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["devicePlugin"] == {"enabled": True}


def test_bottlerocket_nodes_also_keep_their_own_device_plugin():
    values = gpu_operator_values(GpuOperatorConfig(), BOTTLEROCKET_NVIDIA, SYSTEM)
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["devicePlugin"] == {"enabled": False}


def test_toolkit_is_installed_only_where_the_node_os_lacks_it():
    from eks_gpu_training.facts.node_os import GpuNodeOs

    bare = GpuNodeOs("driver only", ships_driver=True, ships_container_toolkit=False, ships_device_plugin=False)
    assert gpu_operator_values(GpuOperatorConfig(), bare, SYSTEM)["toolkit"] == {"enabled": True}


def test_every_accepted_gpu_ami_type_has_known_node_os_facts():
    assert set(NODE_OS_BY_AMI_TYPE) == set(NVIDIA_AMI_TYPES)
    assert all(os.ships_driver for os in NODE_OS_BY_AMI_TYPE.values())


@pytest.mark.parametrize("node_os", [AL2023_NVIDIA, BOTTLEROCKET_NVIDIA], ids=lambda o: o.name)
def test_dcgm_exporter_and_gfd_on_and_no_gpu_sharing(node_os):
    values = gpu_operator_values(GpuOperatorConfig(), node_os, SYSTEM)
    assert values["dcgmExporter"]["enabled"] is True
    assert values["gfd"] == {"enabled": True}
    assert values["mig"] == {"strategy": "none"}
    assert values["migManager"] == {"enabled": False}
    assert "config" not in values["devicePlugin"]  # no time-slicing / MPS configuration


@pytest.mark.parametrize("node_os", [AL2023_NVIDIA, BOTTLEROCKET_NVIDIA], ids=lambda o: o.name)
def test_operands_and_nfd_worker_tolerate_the_gpu_taint(node_os):
    values = gpu_operator_values(GpuOperatorConfig(), node_os, SYSTEM)
    assert gpu_toleration() in values["daemonsets"]["tolerations"]
    assert gpu_toleration() in values["node-feature-discovery"]["worker"]["tolerations"]


def test_operator_and_nfd_controllers_run_on_system_nodes():
    values = gpu_operator_values(GpuOperatorConfig(), AL2023_NVIDIA, SYSTEM)
    terms = values["operator"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["system"]}]}]
    assert values["node-feature-discovery"]["master"]["nodeSelector"] == SYSTEM
    assert values["node-feature-discovery"]["gc"]["nodeSelector"] == SYSTEM


def test_without_a_system_node_group_controllers_are_not_pinned():
    values = gpu_operator_values(GpuOperatorConfig(), AL2023_NVIDIA, {})
    assert "operator" not in values
    assert all("nodeSelector" not in part for part in values["node-feature-discovery"].values())


def test_nfd_pods_run_under_the_runtimes_default_seccomp_profile():
    nfd = gpu_operator_values(GpuOperatorConfig(), AL2023_NVIDIA, SYSTEM)["node-feature-discovery"]
    for part in ("master", "worker", "gc"):
        assert nfd[part]["podSecurityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}


def test_service_monitor_only_with_the_prometheus_operator():
    assert gpu_operator_values(GpuOperatorConfig(), AL2023_NVIDIA, SYSTEM)["dcgmExporter"]["serviceMonitor"] == {
        "enabled": False
    }
    config = GpuOperatorConfig(prometheus_operator=True, service_monitor_labels={"release": "kube-prometheus-stack"})
    monitor = gpu_operator_values(config, AL2023_NVIDIA, SYSTEM)["dcgmExporter"]["serviceMonitor"]
    assert monitor == {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}}


def test_node_os_follows_the_pools_ami_type():
    assert gpu_node_os(parse_platform_args(raw_settings(stack_config("prod")))) == AL2023_NVIDIA
    raw = raw_settings(without_karpenter(stack_config("prod")))  # Karpenter pools run AL2023
    raw["gpuNodeGroups"] = prod_pools(amiType="BOTTLEROCKET_x86_64_NVIDIA", fastImagePull=False)
    assert gpu_node_os(parse_platform_args(raw)) == BOTTLEROCKET_NVIDIA
    raw["gpuNodeGroups"] = []
    raw["scheduling"] = {}  # prod's training apps and teams name its pool
    assert gpu_node_os(parse_platform_args(raw)) == AL2023_NVIDIA


# --- the stacks ----------------------------------------------------------------------------------


def test_each_stack_has_exactly_one_gpu_operator_release(stack_graph):
    stack, graph = stack_graph
    (release,) = operator_releases(graph)
    assert release.inputs["name"] == "gpu-operator"
    assert release.inputs["repositoryOpts"] == {"repo": CHART_REPOSITORY}
    assert release.inputs["version"] == stack_config(stack)[f"{NS}:gpuOperator"]["chartVersion"]
    assert release.inputs["namespace"] == NAMESPACE
    (namespace,) = [
        r for r in graph.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == NAMESPACE
    ]
    assert graph.depends_on(release, namespace)
    provider = graph.one("pulumi:providers:kubernetes")
    assert release.provider.startswith(provider.urn)
    assert namespace.provider.startswith(provider.urn)

    values = release.inputs["values"]
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}  # both stacks run AL2023_x86_64_NVIDIA
    assert values["devicePlugin"] == {"enabled": True}
    assert values["dcgmExporter"]["enabled"] is True
    assert values["gfd"]["enabled"] is True
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is False  # no Prometheus operator in either
    assert values["mig"] == {"strategy": "none"}
    assert values["migManager"] == {"enabled": False}
    assert gpu_toleration() in values["daemonsets"]["tolerations"]
    assert gpu_toleration() in values["node-feature-discovery"]["worker"]["tolerations"]


def is_gpu_node_group(graph: Graph, resource: Registration) -> bool:
    """A GPU node group, its component, or anything inside one."""
    chain = [resource, *graph.ancestors(resource)]
    return any(r.type == "eks-gpu-training:index:GpuNodeGroup" for r in chain) or (
        resource.type == "aws:eks/nodeGroup:NodeGroup" and bool(resource.inputs.get("taints"))
    )


def upstream(graph: Graph, resource: Registration) -> list[Registration]:
    """Everything ``resource`` waits for: its dependencies and its ancestors' dependencies, transitively."""
    known = {r.urn: r for r in graph.resources}
    seen: dict[str, Registration] = {}
    pending = [resource]
    while pending:
        current = pending.pop()
        for r in [current, *graph.ancestors(current)]:
            urns = set(r.dependencies) | {u for us in r.property_dependencies.values() for u in us}
            if r.provider:
                urns.add(r.provider.rsplit("::", 1)[0])  # a provider reference is "<urn>::<id>"
            for urn in urns:
                if urn in known and urn not in seen:
                    seen[urn] = known[urn]
                    pending.append(known[urn])
    return list(seen.values())


def test_operator_release_waits_for_the_managed_gpu_node_groups_so_helm_never_waits_for_a_boot(stack_graph):
    _, graph = stack_graph
    (release,) = operator_releases(graph)
    # Directly: ClusterRef.ready (cluster, system node group), the managed GPU node groups and the
    # namespace; not the Pod Identity add-on, which the operator does not use.
    gpu_groups = [r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")]
    assert gpu_groups
    direct = {graph.by_urn(u).name for u in release.dependencies}
    assert {"gpu-training-cluster-eks", "gpu-training-cluster-system", "gpu-training-gpu-operator-namespace"} <= direct
    assert all(graph.depends_on(release, group) for group in gpu_groups)
    assert "gpu-training-cluster-pod-identity-agent" not in direct
    # The GPU node groups do not wait for the operator: no cycle, and the nodes boot first.
    for group in gpu_groups:
        assert release not in upstream(graph, group)


def test_the_dependency_walk_finds_gpu_node_group_resources_where_they_are_waited_for(prod_graph):
    # The walk above is only worth something if it finds GPU node group resources where there are
    # some: the GPU managed node group waits for its launch template, which lives in a GpuNodeGroup.
    (group,) = [r for r in prod_graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")]
    template = prod_graph.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-training-p5-training-launch-template")
    assert template in upstream(prod_graph, group)
    assert is_gpu_node_group(prod_graph, template)


def test_seed_chart_version_v24_9_2_works_when_a_stack_asks_for_it():
    graph = run_main(with_config("prod", gpuOperator={"chartVersion": "v24.9.2"}))
    assert graph.error is None, repr(graph.error)
    (release,) = operator_releases(graph)
    assert release.inputs["version"] == "v24.9.2"


def test_supported_chart_versions_start_with_the_current_default():
    assert GPU_OPERATOR_CHART_VERSIONS[0] == "v26.7.0" == GpuOperatorConfig().chart_version
    assert "v24.9.2" in GPU_OPERATOR_CHART_VERSIONS


def test_prometheus_operator_turns_the_service_monitor_on():
    graph = run_main(
        with_config(
            "dev", gpuOperator={"prometheusOperator": True, "serviceMonitorLabels": {"release": "prometheus"}}
        )
    )
    assert graph.error is None, repr(graph.error)
    (release,) = operator_releases(graph)
    assert release.inputs["values"]["dcgmExporter"]["serviceMonitor"] == {
        "enabled": True,
        "additionalLabels": {"release": "prometheus"},
    }


# --- refused configurations: nothing is registered -------------------------------------------------


def assert_refused(config: dict, key: str, *phrases: str) -> str:
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError), repr(graph.error)
    assert graph.resources == [], "a refused configuration must create nothing"
    lines = [line for line in str(graph.error).splitlines() if line.strip().startswith(f"- {key}:")]
    assert lines, f"no problem names {key}: {graph.error}"
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("strategy", ["single", "mixed"])
def test_mig_is_refused_naming_the_key(strategy):
    assert_refused(
        with_config("prod", gpuOperator={"migStrategy": strategy}), "gpuOperator.migStrategy", "latency", "VRAM"
    )


def test_time_slicing_is_refused_naming_the_key():
    assert_refused(
        with_config("prod", gpuOperator={"timeSlicingReplicas": 4}), "gpuOperator.timeSlicingReplicas", "latency", "VRAM"
    )


@pytest.mark.parametrize(
    ("label", "value"), [("nvidia.com/mig.config", "all-1g.10gb"), ("nvidia.com/device-plugin.config", "time-sliced")]
)
def test_a_training_pool_asking_for_gpu_sharing_by_label_is_refused(label, value):
    pools = prod_pools(labels={"environment": "prod", label: value})
    assert_refused(with_config("prod", gpuNodeGroups=pools), f"gpuNodeGroups[0].labels.{label}", "latency", "VRAM")


def test_mig_disabled_label_is_allowed():
    pools = prod_pools(labels={"nvidia.com/mig.config": "all-disabled"})
    assert run_main(with_config("prod", gpuNodeGroups=pools)).error is None


def test_unsupported_chart_version_is_refused_with_the_supported_ones():
    line = assert_refused(with_config("prod", gpuOperator={"chartVersion": "v25.3.0"}), "gpuOperator.chartVersion")
    assert "v26.7.0" in line
    assert "v24.9.2" in line


def test_service_monitor_labels_need_the_prometheus_operator():
    assert_refused(
        with_config("prod", gpuOperator={"serviceMonitorLabels": {"release": "x"}}),
        "gpuOperator.serviceMonitorLabels",
        "prometheusOperator",
    )


def test_gpu_pools_of_different_os_families_are_refused():
    pools = prod_pools()
    pools.append({**pools[0], "name": "bottlerocket", "amiType": "BOTTLEROCKET_x86_64_NVIDIA", "fastImagePull": False})
    assert_refused(with_config("prod", gpuNodeGroups=pools), "gpuNodeGroups[1].amiType", "one OS family")


def test_bottlerocket_managed_pools_beside_karpenter_pools_are_refused():
    # Karpenter pools select the AL2023 alias, so they fix the OS family at Amazon Linux 2023.
    pools = prod_pools(amiType="BOTTLEROCKET_x86_64_NVIDIA", fastImagePull=False)
    assert_refused(with_config("prod", gpuNodeGroups=pools), "karpenter.gpuNodePools[0]", "one OS family")


def test_bottlerocket_stack_turns_the_operators_device_plugin_off():
    pools = prod_pools(amiType="BOTTLEROCKET_x86_64_NVIDIA", fastImagePull=False)
    graph = run_main(without_karpenter(with_config("prod", gpuNodeGroups=pools)))
    assert graph.error is None, repr(graph.error)
    (release,) = operator_releases(graph)
    values = release.inputs["values"]
    assert (values["driver"], values["toolkit"], values["devicePlugin"]) == ({"enabled": False},) * 3
