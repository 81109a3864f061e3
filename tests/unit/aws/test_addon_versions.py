"""Every EKS add-on gets EKS's default build for the cluster's Kubernetes version unless the stack
pins one; CoreDNS is one of them, managed by the stack."""

from __future__ import annotations

import copy

import pytest

from tests.support.harness import run_main, stack_config

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform.loading import platform_args_from_settings

GET_ADDON_VERSION = "aws:eks/getAddonVersion:getAddonVersion"
ADDON = "aws:eks/addon:Addon"
CLUSTER = "eks-gpu-training:cluster"


def lookups(graph) -> dict[str, tuple[str, bool]]:
    return {args["addonName"]: (args["kubernetesVersion"], args["mostRecent"]) for token, args in graph.invokes if token == GET_ADDON_VERSION}


def test_every_add_on_of_prod_is_looked_up_for_the_clusters_version_at_ekss_default_build(prod_graph):
    # mostRecent False: EKS's default build of the minor, which does not move with every new build.
    assert lookups(prod_graph) == {
        name: ("1.35", False) for name in ("coredns", "eks-pod-identity-agent", "aws-fsx-csi-driver", "eks-node-monitoring-agent")
    }
    versions = {a.inputs["addonName"]: a.inputs["addonVersion"] for a in prod_graph.of_type(ADDON)}
    # PlausibleMocks answers v1.0.0-eksbuild.1 for these (the node monitoring agent: its chart's build).
    assert versions == {
        "coredns": "v1.0.0-eksbuild.1",
        "eks-pod-identity-agent": "v1.0.0-eksbuild.1",
        "aws-fsx-csi-driver": "v1.0.0-eksbuild.1",
        "eks-node-monitoring-agent": "v1.7.0-eksbuild.1",
    }


def test_a_pinned_add_on_version_is_used_as_is_and_not_looked_up():
    config = copy.deepcopy(stack_config("prod"))
    config[CLUSTER] = {**config[CLUSTER], "corednsVersion": "v1.12.4-eksbuild.1", "podIdentityAgentVersion": "v1.3.10-eksbuild.2"}
    config["eks-gpu-training:storage"]["fsx"]["csiDriverVersion"] = "v1.7.0-eksbuild.1"
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    versions = {a.inputs["addonName"]: a.inputs["addonVersion"] for a in graph.of_type(ADDON)}
    assert versions["coredns"] == "v1.12.4-eksbuild.1"
    assert versions["eks-pod-identity-agent"] == "v1.3.10-eksbuild.2"
    assert versions["aws-fsx-csi-driver"] == "v1.7.0-eksbuild.1"
    assert set(lookups(graph)) == {"eks-node-monitoring-agent"}


def test_coredns_is_a_managed_add_on_that_takes_over_the_self_managed_one_on_system_nodes(prod_graph):
    coredns = prod_graph.one(ADDON, "gpu-training-cluster-coredns")
    assert coredns.inputs["resolveConflictsOnCreate"] == coredns.inputs["resolveConflictsOnUpdate"] == "OVERWRITE"
    assert prod_graph.depends_on(coredns, prod_graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-cluster-system"))
    # pulumi-eks makes no second CoreDNS add-on.
    assert prod_graph.one("eks:index:Cluster").inputs["corednsAddonOptions"]["enabled"] is False


def test_an_adopted_cluster_gets_no_coredns_add_on():
    config = copy.deepcopy(stack_config("prod"))
    config[CLUSTER] = {**config[CLUSTER], "create": False}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    assert [a.name for a in graph.of_type(ADDON) if a.inputs["addonName"] == "coredns"] == []


@pytest.mark.parametrize("key", ["corednsVersion", "podIdentityAgentVersion"])
def test_refuses_an_add_on_pin_that_is_not_an_eks_build(key):
    config = copy.deepcopy(stack_config("prod"))
    config[CLUSTER] = {**config[CLUSTER], key: "1.12.4"}
    with pytest.raises(ConfigError) as error:
        platform_args_from_settings(config)
    assert f"cluster.{key}: '1.12.4' does not match ^v" in str(error.value)
