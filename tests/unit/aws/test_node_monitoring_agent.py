"""The EKS node monitoring agent add-on: its version from EKS, its configuration against the add-on's
schema and chart, and its DCGM host engine on tainted GPU nodes."""

from __future__ import annotations

import json

import pytest
import yaml

from eks_gpu_training.aws.node_monitoring_agent import node_monitoring_agent_configuration
from eks_gpu_training.config import NODE_MONITORING_AGENT_ADDON
from eks_gpu_training.offline.engine import run_main, stack_config
from eks_gpu_training.facts.gpu_nodes import gpu_toleration

ADDON = "aws:eks/addon:Addon"
AGENT = "gpu-training-node-monitoring-addon"
GET_ADDON_VERSION = "aws:eks/getAddonVersion:getAddonVersion"


@pytest.fixture(scope="module")
def schema():
    """The add-on's configuration schema as the package ships it (``tests/unit/project/test_package_data.py``
    holds it to the upstream file)."""
    from eks_gpu_training.offline.agent_data import configuration_schema

    return configuration_schema("eks-node-monitoring-agent", None)[0]


def test_configuration_passes_the_addon_schema(schema):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (the [check] extra) validates the add-on configuration")
    jsonschema.Draft7Validator(schema).validate(node_monitoring_agent_configuration())


def test_the_schema_refuses_what_eks_would_refuse(schema):
    """The schema is strict (additionalProperties: false), so the check above means something."""
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (the [check] extra) validates the add-on configuration")
    errors = list(jsonschema.Draft7Validator(schema).iter_errors({"dcgmAgent": {"runtimeClassName": "nvidia"}}))
    assert [e.message for e in errors] == ["Additional properties are not allowed ('runtimeClassName' was unexpected)"]


def test_the_charts_dcgm_daemonset_tolerates_the_gpu_taint_only_with_this_configuration(reference_dir):
    """Rendered with Helm's own engine: the chart default (tolerations: []) keeps the host engine off
    tainted GPU nodes (aws/containers-roadmap#2567); the configuration puts it there."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (a test dependency) renders the chart offline")
    chart = helm.Chart.load(str(reference_dir / "charts" / "eks-node-monitoring-agent-1.7.0"))

    def dcgm_pod(values):
        rendered = chart.render(values, name="eks-node-monitoring-agent", namespace="kube-system", is_install=True)
        return yaml.safe_load(rendered["eks-node-monitoring-agent/templates/dcgm-daemonset.yaml"])["spec"]["template"]["spec"]

    assert (dcgm_pod({}).get("tolerations") or []) == []
    pod = dcgm_pod(node_monitoring_agent_configuration())
    assert gpu_toleration() in pod["tolerations"]
    instance_types = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert instance_types["key"] == "node.kubernetes.io/instance-type"
    assert {"p5.48xlarge", "p4de.24xlarge", "g6e.xlarge", "p6-b200.48xlarge"} <= set(instance_types["values"])


def test_prod_installs_the_addon_at_the_version_eks_resolves_for_its_kubernetes_version(prod_graph):
    addon = prod_graph.one(ADDON, AGENT)
    assert addon.inputs["addonName"] == "eks-node-monitoring-agent"
    assert addon.inputs["clusterName"] == "gpu-training-prod"
    # The version is the invoke's answer (PlausibleMocks answers with the 1.7.0 chart's build).
    assert addon.inputs["addonVersion"] == "v1.7.0-eksbuild.1"
    lookups = [args for token, args in prod_graph.invokes if token == GET_ADDON_VERSION and args["addonName"] == NODE_MONITORING_AGENT_ADDON]
    assert [(a["addonName"], a["kubernetesVersion"], a["mostRecent"]) for a in lookups] == [("eks-node-monitoring-agent", "1.35", False)]
    assert json.loads(addon.inputs["configurationValues"]) == node_monitoring_agent_configuration()
    assert (addon.inputs["resolveConflictsOnCreate"], addon.inputs["resolveConflictsOnUpdate"]) == ("OVERWRITE", "OVERWRITE")


def test_the_addon_waits_for_the_cluster_and_system_nodes_not_the_gpu_nodes(prod_graph):
    addon = prod_graph.one(ADDON, AGENT)
    assert prod_graph.depends_on(addon, prod_graph.one("eks:index:Cluster"))
    assert prod_graph.depends_on(addon, prod_graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-cluster-system"))
    gpu_groups = [
        g for kind in ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup") for g in prod_graph.of_type(kind) if g.inputs.get("taints")
    ]
    assert gpu_groups
    assert not any(prod_graph.depends_on(addon, g) for g in gpu_groups)


def test_an_adopted_cluster_resolves_the_version_for_the_kubernetes_version_it_runs():
    config = stack_config("prod")
    config["eks-gpu-training:cluster"] = {**config["eks-gpu-training:cluster"], "create": False, "kubernetesVersion": "1.32"}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    # The mocked DescribeCluster answers 1.34: the running cluster's version wins over the stack's.
    lookups = [args["kubernetesVersion"] for token, args in graph.invokes if token == GET_ADDON_VERSION and args["addonName"] == NODE_MONITORING_AGENT_ADDON]
    assert lookups == ["1.34"]


def test_turning_monitoring_off_installs_no_agent():
    config = stack_config("prod")
    config["eks-gpu-training:nodeMonitoring"] = {"enabled": False}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    # What remains are the add-ons other sections ask for: CoreDNS and Pod Identity (a created cluster) and the FSx CSI driver (storage.fsx).
    assert sorted(a.name for a in graph.of_type(ADDON)) == [
        "gpu-training-cluster-coredns", "gpu-training-cluster-pod-identity-agent", "gpu-training-lustre-csi-driver",
    ]
    assert not [token for token, args in graph.invokes if token == GET_ADDON_VERSION and args["addonName"] == NODE_MONITORING_AGENT_ADDON]


def test_the_gpu_operator_starts_no_second_host_engine_on_port_5555(prod_graph):
    release = next(r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "gpu-operator")
    assert release.inputs["values"]["dcgm"] == {"enabled": False}
    assert release.inputs["values"]["dcgmExporter"]["enabled"] is True


def test_check_fails_an_addon_configuration_eks_would_refuse_and_passes_the_stacks_own():
    from eks_gpu_training.offline.check.addons import check_addon

    resource = {
        "type": ADDON,
        "name": AGENT,
        "inputs": {"addonName": "eks-node-monitoring-agent", "configurationValues": json.dumps({"dcgmAgent": {"runtimeClassName": "nvidia"}})},
    }
    assert list(check_addon(resource)) == [
        (
            "fail",
            f"{ADDON} {AGENT} (eks-node-monitoring-agent): configurationValues.dcgmAgent: Additional properties are not "
            "allowed ('runtimeClassName' was unexpected) (eks-node-monitoring-agent 1.7.0 configuration.schema.json)",
        )
    ]
    good = {**resource, "inputs": {**resource["inputs"], "configurationValues": json.dumps(node_monitoring_agent_configuration())}}
    assert list(check_addon(good)) == []
    older = {**good, "inputs": {**good["inputs"], "addonVersion": "v1.6.7-eksbuild.2"}}
    assert list(check_addon(older)) == [("skip", f"{ADDON} {AGENT} (eks-node-monitoring-agent): configuration values not "
                                         "checked: the package ships the configuration schema of eks-node-monitoring-agent "
                                         "1.7.0, not 1.6.7")]


def test_a_pinned_addon_version_is_used_as_is_and_nothing_is_resolved(health_graph):
    graph = health_graph
    assert graph.one(ADDON, AGENT).inputs["addonVersion"] == "v1.6.7-eksbuild.2"
    assert not [token for token, args in graph.invokes if token == GET_ADDON_VERSION and args["addonName"] == NODE_MONITORING_AGENT_ADDON]


def test_an_addon_version_eks_would_not_name_is_refused():
    config = stack_config("prod")
    config["eks-gpu-training:nodeMonitoring"] = {"addonVersion": "1.7.0"}
    graph = run_main(config)
    assert [p.path for p in graph.error.problems] == ["nodeMonitoring.addonVersion"]
