"""EksCluster: a created cluster and an adopted one give downstream the same ClusterRef."""

from __future__ import annotations

import json

from eks_gpu_training.aws.cluster import kubeconfig_for
from harness import run_main, stack_config

PROJECT = "eks-gpu-training"


def adopted(stack: str = "prod") -> dict:
    config = stack_config(stack)
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "create": False}
    return config


def test_created_cluster_uses_api_authentication_with_admin_access_entries():
    graph = run_main(stack_config("prod"))
    cluster = graph.one("eks:index:Cluster")
    assert cluster.inputs["authenticationMode"] == "API"
    assert cluster.inputs["version"] == "1.34"
    assert cluster.inputs["endpointPublicAccess"] is False
    assert cluster.inputs["skipDefaultSecurityGroups"] is True
    (entry,) = cluster.inputs["accessEntries"].values()
    assert entry["principalArn"] == "arn:aws:iam::444455556666:role/platform-admin"
    assert entry["accessPolicies"]["cluster-admin"] == {
        "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        "accessScope": {"type": "cluster"},
    }


def test_adopted_cluster_creates_no_cluster_and_reads_the_existing_one():
    graph = run_main(adopted())
    assert graph.error is None, repr(graph.error)
    assert graph.of_type("eks:index:Cluster") == []
    # The only add-on it installs is the node monitoring agent (nodeMonitoring.enabled); never Pod Identity.
    assert [a.inputs["addonName"] for a in graph.of_type("aws:eks/addon:Addon")] == ["eks-node-monitoring-agent"]
    existing = graph.one("aws:eks/cluster:Cluster")
    assert existing.read and existing.id == "gpu-training-prod"


def test_adopted_cluster_must_already_run_the_pod_identity_agent():
    graph = run_main(adopted())
    assert ("aws:eks/getAddon:getAddon", {"clusterName": "gpu-training-prod", "addonName": "eks-pod-identity-agent"}) in [
        (token, {k: v for k, v in args.items() if k in ("clusterName", "addonName")}) for token, args in graph.invokes
    ]
    created = run_main(stack_config("prod"))
    assert not [token for token, _ in created.invokes if token == "aws:eks/getAddon:getAddon"]


def test_adopted_cluster_gets_an_aws_cli_kubeconfig_from_its_endpoint():
    graph = run_main(adopted())
    provider = graph.one("pulumi:providers:kubernetes")
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert kubeconfig["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "gpu-training-prod"]


def test_downstream_is_identical_for_created_and_adopted_clusters():
    created, adopted_graph = run_main(stack_config("prod")), run_main(adopted())

    def downstream(graph):
        return sorted(
            (r.type, r.name)
            for r in graph.resources
            if r.type not in ("eks:index:Cluster", "aws:eks/addon:Addon", "aws:eks/cluster:Cluster")
        )

    assert downstream(created) == downstream(adopted_graph)
    for graph in (created, adopted_graph):
        gpu = graph.one("eks:index:ManagedNodeGroup", "gpu-training-p5-training-node-group")
        assert gpu.inputs["clusterName"] == "gpu-training-prod"


def test_adopted_cluster_hands_its_core_data_to_managed_node_groups():
    graph = run_main(adopted())
    node_group = graph.one("eks:index:ManagedNodeGroup", "gpu-training-cluster-system")
    core = node_group.inputs["cluster"]
    assert core["cluster"] == graph.one("aws:eks/cluster:Cluster").id
    assert core["vpcId"] == "vpc-0f1e2d3c4b5a69788"
    assert core["instanceRoles"] == []


def test_system_node_group_is_untainted_on_demand_and_waits_for_pod_identity():
    graph = run_main(stack_config("prod"))
    system = graph.one("eks:index:ManagedNodeGroup", "gpu-training-cluster-system")
    assert "taints" not in system.inputs
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert system.inputs["capacityType"] == "ON_DEMAND"
    assert system.inputs["scalingConfig"] == {"minSize": 2, "desiredSize": 3, "maxSize": 4}
    assert system.inputs["ignoreScalingChanges"] is True
    assert graph.depends_on(system, graph.one("aws:eks/addon:Addon", "gpu-training-cluster-pod-identity-agent"))


def test_system_node_group_can_be_turned_off():
    config = adopted()
    config[f"{PROJECT}:systemNodeGroup"] = {"enabled": False}
    graph = run_main(config)
    assert graph.error is None
    assert [r.name for r in graph.of_type("eks:index:ManagedNodeGroup")] == ["gpu-training-p5-training-node-group"]


def test_every_in_cluster_resource_uses_the_one_kubernetes_provider():
    graph = run_main(stack_config("prod"))
    (provider,) = graph.of_type("pulumi:providers:kubernetes")
    kubernetes = [r for r in graph.resources if r.type.startswith("kubernetes:")]
    assert {r.type for r in kubernetes} >= {"kubernetes:helm.sh/v3:Release", "kubernetes:apps/v1:DaemonSet"}
    assert [r.name for r in kubernetes if not r.provider.startswith(provider.urn)] == []


def test_kubeconfig_for_authenticates_with_aws_eks_get_token():
    config = json.loads(kubeconfig_for("c1", "eu-west-1", "https://api", "Q0E="))
    assert config["current-context"] == "c1"
    assert config["clusters"][0]["cluster"] == {"server": "https://api", "certificate-authority-data": "Q0E="}
    assert config["users"][0]["user"]["exec"]["command"] == "aws"
    assert config["users"][0]["user"]["exec"]["args"] == [
        "eks", "get-token", "--cluster-name", "c1", "--region", "eu-west-1", "--output", "json"
    ]
