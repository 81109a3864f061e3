"""EksCluster: a created cluster and an adopted one give downstream the same ClusterRef."""

from __future__ import annotations

import json

from eks_gpu_training.aws.cluster_ref import kubeconfig_for
import pytest

from tests.support.harness import run_main, stack_config

PROJECT = "eks-gpu-training"


def adopted(stack: str = "prod") -> dict:
    config = stack_config(stack)
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "create": False}
    return config


@pytest.fixture(scope="module")
def adopted_graph():
    graph = run_main(adopted())
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="module")
def tuned_prod_graph():
    """Prod on 1.34 with a pinned system AMI release and private endpoint sources of every kind."""
    config = stack_config("prod")
    config[f"{PROJECT}:systemNodeGroup"] = {**config[f"{PROJECT}:systemNodeGroup"], "releaseVersion": "1.34.2-20251120"}
    config[f"{PROJECT}:cluster"] = {
        **config[f"{PROJECT}:cluster"],
        # The pinned AMI release is one built for 1.34.
        "kubernetesVersion": "1.34",
        "endpointPrivateAccessCidrs": ["10.20.0.0/16", "fd00::/8"],
        "endpointPrivateAccessSecurityGroupIds": ["sg-0123456789abcdef0"],
    }
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    return graph


def test_created_cluster_uses_api_authentication_with_admin_access_entries(prod_graph):
    graph = prod_graph
    cluster = graph.one("eks:index:Cluster")
    assert cluster.inputs["authenticationMode"] == "API"
    assert cluster.inputs["version"] == "1.35"
    assert cluster.inputs["endpointPublicAccess"] is False
    assert cluster.inputs["skipDefaultSecurityGroups"] is True
    # The admins' entries are the component's own, not pulumi-eks's.
    assert "accessEntries" not in cluster.inputs
    entry = graph.one("aws:eks/accessEntry:AccessEntry", "gpu-training-cluster-admin-444455556666-role-platform-admin")
    assert entry.inputs["principalArn"] == "arn:aws:iam::444455556666:role/platform-admin"
    assert entry.inputs["clusterName"] == "gpu-training-prod"
    (association,) = [r for r in graph.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation") if r.parent == entry.urn]
    assert {k: association.inputs[k] for k in ("principalArn", "policyArn", "accessScope")} == {
        "principalArn": "arn:aws:iam::444455556666:role/platform-admin",
        "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        "accessScope": {"type": "cluster"},
    }


def test_adopted_cluster_creates_no_cluster_and_reads_the_existing_one(adopted_graph):
    graph = adopted_graph
    assert graph.error is None, repr(graph.error)
    assert graph.of_type("eks:index:Cluster") == []
    # The Pod Identity agent must already run in an adopted cluster; the add-ons it installs are the
    # node monitoring agent (nodeMonitoring.enabled) and the FSx CSI driver (storage.fsx.enabled).
    assert sorted(a.inputs["addonName"] for a in graph.of_type("aws:eks/addon:Addon")) == ["aws-fsx-csi-driver", "eks-node-monitoring-agent"]
    assert ("aws:eks/getCluster:getCluster", {"name": "gpu-training-prod"}) in [
        (token, {k: v for k, v in args.items() if k == "name"}) for token, args in graph.invokes
    ]


def test_adopted_cluster_must_already_run_the_pod_identity_agent(adopted_graph, prod_graph):
    graph = adopted_graph
    assert ("aws:eks/getAddon:getAddon", {"clusterName": "gpu-training-prod", "addonName": "eks-pod-identity-agent"}) in [
        (token, {k: v for k, v in args.items() if k in ("clusterName", "addonName")}) for token, args in graph.invokes
    ]
    created = prod_graph
    assert not [token for token, _ in created.invokes if token == "aws:eks/getAddon:getAddon"]


def test_adopted_cluster_gets_an_aws_cli_kubeconfig_from_its_endpoint(adopted_graph):
    graph = adopted_graph
    provider = graph.one("pulumi:providers:kubernetes")
    kubeconfig = json.loads(provider.inputs["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert kubeconfig["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "gpu-training-prod"]


def test_downstream_is_identical_for_created_and_adopted_clusters(prod_graph, adopted_graph):
    created = prod_graph

    def downstream(graph):
        return sorted(
            (r.type, r.name)
            for r in graph.resources
            if r.type not in ("eks:index:Cluster", "aws:eks/addon:Addon")
            and not r.name.startswith(("gpu-training-cluster-api-ingress-", "gpu-training-cluster-api-endpoint", "gpu-training-cluster-admin-"))
        )

    assert downstream(created) == downstream(adopted_graph)
    for graph in (created, adopted_graph):
        gpu = graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-p5-training-node-group")
        assert gpu.inputs["clusterName"] == "gpu-training-prod"


def test_adopted_cluster_node_groups_get_its_name_version_subnets_and_their_own_role(adopted_graph):
    # No pulumi-eks core data: an aws.eks.NodeGroup needs the cluster's name, a node role and subnets,
    # and follows the version the adopted cluster reports.
    graph = adopted_graph
    for name in ("gpu-training-cluster-system", "gpu-training-p5-training-node-group"):
        node_group = graph.one("aws:eks/nodeGroup:NodeGroup", name)
        assert node_group.inputs["clusterName"] == "gpu-training-prod"
        assert node_group.inputs["version"] == "1.34"
        assert node_group.inputs["nodeRoleArn"].startswith("arn:aws:iam::")
        assert node_group.inputs["subnetIds"]
        assert "cluster" not in node_group.inputs


def test_system_node_group_is_untainted_on_demand_and_does_not_wait_for_pod_identity(prod_graph):
    graph = prod_graph
    system = graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-cluster-system")
    assert "taints" not in system.inputs
    assert system.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert system.inputs["capacityType"] == "ON_DEMAND"
    assert system.inputs["scalingConfig"] == {"minSize": 2, "desiredSize": 3, "maxSize": 4}
    assert system.ignore_changes == ["scalingConfig.desiredSize"]
    # Cluster, then system nodes: the Pod Identity add-on is not on that path.
    assert graph.depends_on(system, graph.one("eks:index:Cluster"))
    assert not graph.depends_on(system, graph.one("aws:eks/addon:Addon", "gpu-training-cluster-pod-identity-agent"))


def test_only_what_uses_pod_identity_waits_for_its_add_on(prod_graph):
    graph = prod_graph
    addon = graph.one("aws:eks/addon:Addon", "gpu-training-cluster-pod-identity-agent")
    waiters = sorted(r.name for r in graph.resources if graph.depends_on(r, addon))
    assert waiters == [
        "gpu-training-karpenter-pod-identity",
        "gpu-training-topology-labeler-pod-identity",
        # the training role's association in each of prod's namespaces
        "gpu-training-training-identity-research",
        "gpu-training-training-identity-training",
    ]
    # The Pod Identity associations; the FSx CSI driver add-on has none (it calls no AWS API here).
    assert all(graph.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", name) for name in waiters)
    assert graph.one("aws:eks/addon:Addon", "gpu-training-lustre-csi-driver").inputs["podIdentityAssociations"] == []


def test_system_node_group_follows_the_cluster_version_with_its_own_hardened_launch_template(tuned_prod_graph):
    graph = tuned_prod_graph
    system = graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-cluster-system")
    assert system.inputs["version"] == "1.34"
    assert system.inputs["releaseVersion"] == "1.34.2-20251120"
    assert system.inputs["nodeGroupNamePrefix"] == "system-"
    assert system.inputs["updateConfig"] == {"maxUnavailable": 1}
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate", "gpu-training-cluster-system-launch-template")
    assert system.inputs["launchTemplate"] == {"id": template.id, "version": "1"}
    assert template.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
    (volume,) = template.inputs["blockDeviceMappings"]
    assert volume["ebs"]["volumeType"] == "gp3"
    assert volume["ebs"]["encrypted"] == "true"
    assert volume["ebs"]["volumeSize"] == 50
    assert "diskSize" not in system.inputs
    # Stack tags stay on the template itself; instances get only their Name.
    assert [spec["tags"] for spec in template.inputs["tagSpecifications"]] == [{"Name": "gpu-training-prod-system"}] * 2


def test_private_endpoint_opens_port_443_of_a_group_only_the_control_plane_carries(tuned_prod_graph):
    graph = tuned_prod_graph
    group = graph.one("aws:ec2/securityGroup:SecurityGroup", "gpu-training-cluster-api-endpoint")
    rules = {r.name: r.inputs for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")}
    endpoint_rules = {name: inputs for name, inputs in rules.items() if name.startswith("gpu-training-cluster-api-ingress-")}
    assert {name: {k: v for k, v in inputs.items() if k not in ("description", "tags")} for name, inputs in endpoint_rules.items()} == {
        "gpu-training-cluster-api-ingress-cidr-0": {"region": "us-west-2", "securityGroupId": group.id, "ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": "10.20.0.0/16"},
        "gpu-training-cluster-api-ingress-cidr-1": {"region": "us-west-2", "securityGroupId": group.id, "ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv6": "fd00::/8"},
        "gpu-training-cluster-api-ingress-sg-0": {"region": "us-west-2", "securityGroupId": group.id, "ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "referencedSecurityGroupId": "sg-0123456789abcdef0"},
    }
    # pulumi-eks gives EKS this group alone as vpcConfig.securityGroupIds: the control-plane ENIs'.
    assert graph.one("eks:index:Cluster").inputs["clusterSecurityGroup"] == group.id
    # No rule of the group lets anything out, and nothing else is let in.
    assert [r for r in graph.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule") if r.inputs["securityGroupId"] == group.id] == []
    assert {r.name for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") if r.inputs["securityGroupId"] == group.id} == set(endpoint_rules)
    # What nodes, Karpenter's nodes and FSx clients carry is the group EKS created, never this one.
    node_groups = set()
    for template in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate"):
        for interface in template.inputs.get("networkInterfaces") or []:
            node_groups.update(interface.get("securityGroups") or [])
        node_groups.update(template.inputs.get("vpcSecurityGroupIds") or [])
    for node_class in [r for r in graph.resources if r.inputs.get("kind") == "EC2NodeClass"]:
        node_groups.update(term.get("id") for term in node_class.inputs["spec"]["securityGroupSelectorTerms"])
    assert "sg-0c1a55e7c1a55e7c1" in node_groups
    assert group.id not in node_groups
    lustre_peers = {r.inputs.get("referencedSecurityGroupId") for r in graph.resources if "lustre" in r.name and r.type.startswith("aws:vpc/")}
    assert "sg-0c1a55e7c1a55e7c1" in lustre_peers
    assert group.id not in lustre_peers


def test_a_cluster_whose_endpoint_no_one_else_reaches_gets_no_endpoint_group(dev_graph):
    assert [r.name for r in dev_graph.of_type("aws:ec2/securityGroup:SecurityGroup") if "api-endpoint" in r.name] == []
    assert "clusterSecurityGroup" not in dev_graph.one("eks:index:Cluster").inputs


def test_prod_reaches_its_private_endpoint_and_dev_names_its_public_cidrs(prod_graph, dev_graph):
    prod = prod_graph
    assert [r.inputs["cidrIpv4"] for r in prod.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") if "api-ingress" in r.name] == ["10.20.0.0/16"]
    assert "publicAccessCidrs" not in prod.one("eks:index:Cluster").inputs
    dev = dev_graph
    cidrs = dev.one("eks:index:Cluster").inputs["publicAccessCidrs"]
    assert cidrs
    assert "0.0.0.0/0" not in cidrs


def test_component_refuses_a_private_only_cluster_no_one_can_reach():
    from eks_gpu_training import EksCluster, EksClusterArgs
    from eks_gpu_training.config import ClusterConfig, ConfigError, NetworkConfig, SystemNodeGroupConfig
    from tests.support.harness import run_program

    network = NetworkConfig.model_validate({"vpcId": "vpc-0123456789abcdef0", "subnets": [
        {"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"},
        {"id": "subnet-0000000000000000b", "availabilityZone": "us-west-2b"},
    ]})

    def program():
        EksCluster("c", EksClusterArgs(
            cluster=ClusterConfig(name="r", endpoint_public_access=False),
            network=network, system_node_group=SystemNodeGroupConfig(), region="us-west-2", partition="aws",
        ))

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert "cluster.endpointPrivateAccessCidrs: a private-only endpoint is reachable only from the cluster security group" in str(graph.error)
    assert graph.resources == []


def test_prod_protects_the_cluster_gpu_node_groups_placement_groups_and_file_system_from_deletion(prod_graph, dev_graph):
    prod = prod_graph
    protected = sorted(r.name for r in prod.resources if r.protect)
    # Not the Karpenter pool's placement group: retained (karpenter.retainOnRemoval), it stays in
    # AWS anyway, and protected as well it could never leave the stack.
    assert protected == [
        "gpu-training-cluster-eks",
        "gpu-training-lustre-file-system",
        "gpu-training-p5-training-node-group",
        "gpu-training-p5-training-placement-group",
    ]
    assert [r.name for r in dev_graph.resources if r.protect] == []


def test_a_pool_unprotected_on_its_own_can_switch_to_a_capacity_block_while_cluster_and_file_system_stay_protected():
    # The documented Capacity Block switch replaces the node group and deletes its created
    # placement group: the pool's own `protect: false` lifts that refusal for this pool alone.
    config = stack_config("prod")
    (pool,) = config[f"{PROJECT}:gpuNodeGroups"]
    config[f"{PROJECT}:gpuNodeGroups"] = [{
        **pool, "protect": False, "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0",
        "placementGroup": {"mode": "none"},
    }]
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    assert sorted(r.name for r in graph.resources if r.protect) == ["gpu-training-cluster-eks", "gpu-training-lustre-file-system"]
    assert not graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-p5-training-node-group").protect


def test_a_pool_protected_on_its_own_is_protected_on_an_unprotected_stack():
    config = stack_config("dev")
    config[f"{PROJECT}:gpuNodeGroups"] = [{**p, "protect": True} for p in config[f"{PROJECT}:gpuNodeGroups"]]
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    # Dev's pool has no placement group; the system node group is no GPU pool.
    assert [r.name for r in graph.resources if r.protect] == ["gpu-training-dev-gpu-node-group"]


def test_system_node_group_can_be_turned_off():
    config = adopted()
    config[f"{PROJECT}:systemNodeGroup"] = {"enabled": False}
    graph = run_main(config)
    assert graph.error is None
    assert [r.name for r in graph.of_type("aws:eks/nodeGroup:NodeGroup")] == ["gpu-training-p5-training-node-group"]


def test_every_in_cluster_resource_uses_the_one_kubernetes_provider(prod_graph):
    graph = prod_graph
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


def test_in_cluster_objects_wait_for_the_443_rules_that_let_pulumi_reach_a_private_endpoint(tuned_prod_graph):
    graph = tuned_prod_graph
    rules = [r for r in graph.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule") if "api-ingress" in r.name]
    assert len(rules) == 3
    for release in graph.of_type("kubernetes:helm.sh/v3:Release"):
        assert all(graph.depends_on(release, rule) for rule in rules), release.name
    # Every other in-cluster object through the one Kubernetes provider.
    provider = graph.one("pulumi:providers:kubernetes", "gpu-training-cluster-k8s")
    assert all(graph.depends_on(provider, rule) for rule in rules)


def test_node_groups_wait_for_their_roles_policy_attachments(prod_graph):
    for node_group in prod_graph.of_type("aws:eks/nodeGroup:NodeGroup"):
        role = next(r for r in prod_graph.of_type("aws:iam/role:Role") if prod_graph.depends_on(node_group, r))
        attachments = [a for a in prod_graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.parent == role.urn]
        assert len(attachments) == 3, node_group.name
        assert all(prod_graph.depends_on(node_group, a) for a in attachments), node_group.name


def test_protect_turns_on_eks_deletion_protection_and_prod_opts_out_of_paid_extended_support(prod_graph, dev_graph):
    prod = prod_graph.one("eks:index:Cluster")
    assert (prod.inputs["deletionProtection"], prod.inputs["upgradePolicy"]) == (True, {"supportType": "STANDARD"})
    # Dev sets neither: no EKS protection, and EKS's own default policy, written out so it is seen.
    dev = dev_graph.one("eks:index:Cluster")
    assert (dev.inputs["deletionProtection"], dev.inputs["upgradePolicy"]) == (False, {"supportType": "EXTENDED"})


def test_both_eks_guards_change_in_place_on_a_running_cluster():
    import botocore.session

    model = botocore.session.get_session().get_service_model("eks")
    update = model.operation_model("UpdateClusterConfig").input_shape.members
    assert {"deletionProtection", "upgradePolicy"} <= set(update)
    assert set(update["upgradePolicy"].members["supportType"].enum) == {"STANDARD", "EXTENDED"}


def test_an_unknown_support_type_is_refused_with_the_allowed_ones_before_anything_registers():
    from eks_gpu_training.config import ConfigError

    config = stack_config("prod")
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "supportType": "standard"}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [str(p) for p in graph.error.problems] == [
        "cluster.supportType: 'standard' is not an EKS support type (botocore eks SupportType); allowed: EXTENDED, STANDARD "
        "(docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html)"
    ]


def test_only_the_releases_with_gpu_node_daemonsets_wait_for_the_gpu_node_groups(prod_graph):
    # ClusterRef.ready lists no GPU nodes; the platform adds its managed GPU node groups for the two
    # releases whose DaemonSets Helm waits for on GPU nodes.
    gpu_group = prod_graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-p5-training-node-group")
    releases = prod_graph.of_type("kubernetes:helm.sh/v3:Release")
    waiting = sorted(r.inputs["name"] for r in releases if prod_graph.depends_on(r, gpu_group))
    assert waiting == ["aws-efa-k8s-device-plugin", "gpu-operator"]
    assert len(releases) > len(waiting)
