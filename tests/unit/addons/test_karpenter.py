"""Karpenter and GpuNodePool under the mock engine, and their pure spec builders."""

from __future__ import annotations

import json

import pytest
import yaml

from eks_gpu_training import ConfigError, EksCluster, EksClusterArgs, GpuNodePool, GpuNodePoolArgs, Karpenter, KarpenterArgs
from eks_gpu_training.config import KARPENTER_CHART_VERSIONS, ClusterConfig, KarpenterConfig, KarpenterGpuNodePoolConfig, SystemNodeGroupConfig
from eks_gpu_training.addons.gpu_node_pool import (
    AL2023_AMI_ALIAS,
    karpenter_efa_network_interfaces,
    karpenter_gpu_taint,
    node_pool_spec,
)
from eks_gpu_training.addons.karpenter import KARPENTER_CHART, KARPENTER_CRD_CHART, karpenter_values
from tests.support.harness import ACCOUNT_ID, research_cluster, run_main, run_program, stack_config
from tests.support.builders import NETWORK, without_karpenter

PROJECT = "eks-gpu-training"
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
# What the harness's mocks name autonamed resources in the prod stack.
NODE_ROLE_NAME = "gpu-training-karpenter-node-role-1a2b3c"
CONTROLLER_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/gpu-training-karpenter-controller-role-1a2b3c"
QUEUE_NAME = "gpu-training-karpenter-interruption-queue-4d5e6f"
QUEUE_ARN = f"arn:aws:sqs:us-west-2:{ACCOUNT_ID}:{QUEUE_NAME}"


def karpenter_pool(**settings) -> KarpenterGpuNodePoolConfig:
    return KarpenterGpuNodePoolConfig.model_validate({"name": "burst", "availabilityZone": "us-west-2a", **settings})


def build(*pools: KarpenterGpuNodePoolConfig, system: bool = True):
    """A program of its own composition: cluster, Karpenter and its pools, no platform."""

    def program():
        cluster = research_cluster(NETWORK, system_node_group=system)
        karpenter = Karpenter("k", KarpenterArgs(cluster=cluster.ref, config=KarpenterConfig(enabled=True), tags={"team": "ml"}))
        for pool in pools:
            GpuNodePool(
                f"k-{pool.name}",
                GpuNodePoolArgs(
                    cluster=cluster.ref,
                    pool=pool,
                    network=NETWORK,
                    node_role_name=karpenter.node_role_name,
                    karpenter_release=karpenter.release,
                    tags={"team": "ml"},
                ),
            )

    graph = run_program(program)
    assert graph.error is None, repr(graph.error)
    return graph


def karpenter_release(graph):
    return next(r for r in graph.of_type(RELEASE) if r.inputs["name"] == "karpenter")


# --- the controller --------------------------------------------------------------------------------


def test_controller_role_is_bound_to_the_service_account_through_pod_identity(prod_graph):
    association = prod_graph.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "gpu-training-karpenter-pod-identity")
    assert association.inputs["clusterName"] == "gpu-training-prod"
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "karpenter")
    role = prod_graph.one("aws:iam/role:Role", "gpu-training-karpenter-controller-role")
    assert association.inputs["roleArn"] == CONTROLLER_ROLE_ARN
    assert prod_graph.depends_on(association, role)
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Condition"]["ArnEquals"] == {"aws:SourceArn": f"arn:aws:eks:us-west-2:{ACCOUNT_ID}:cluster/gpu-training-prod"}
    # no IRSA: the cluster makes no OIDC provider and nothing trusts one
    assert "Federated" not in trust["Principal"]


def test_controller_role_carries_the_six_upstream_policies_scoped_to_the_cluster(prod_graph):
    controller = prod_graph.one("aws:iam/role:Role", "gpu-training-karpenter-controller-role")
    policies = {r.name: json.loads(r.inputs["policy"]) for r in prod_graph.of_type("aws:iam/policy:Policy")}
    assert set(policies) == {
        f"gpu-training-karpenter-{role}-policy"
        for role in ("node-lifecycle", "iam-integration", "eks-integration", "interruption", "zonal-shift", "resource-discovery")
    }
    attachments = [a for a in prod_graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.parent == controller.urn]
    assert len(attachments) == 6
    assert all(prod_graph.depends_on(a, controller) for a in attachments)
    lifecycle = policies["gpu-training-karpenter-node-lifecycle-policy"]["Statement"]
    deletion = next(s for s in lifecycle if s["Sid"] == "AllowScopedDeletion")
    assert deletion["Condition"]["StringEquals"] == {"aws:ResourceTag/kubernetes.io/cluster/gpu-training-prod": "owned"}
    passing = policies["gpu-training-karpenter-iam-integration-policy"]["Statement"][0]
    assert passing["Resource"] == f"arn:aws:iam::{ACCOUNT_ID}:role/{NODE_ROLE_NAME}"
    assert policies["gpu-training-karpenter-interruption-policy"]["Statement"][0]["Resource"] == QUEUE_ARN


def test_node_role_joins_the_cluster_through_an_ec2_linux_access_entry(prod_graph):
    node_role = prod_graph.one("aws:iam/role:Role", "gpu-training-karpenter-node-role")
    assert json.loads(node_role.inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    entry = prod_graph.one("aws:eks/accessEntry:AccessEntry", "gpu-training-karpenter-node-access-entry")
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["clusterName"] == "gpu-training-prod"
    assert prod_graph.depends_on(entry, node_role)
    assert prod_graph.depends_on(entry, prod_graph.one("eks:index:Cluster"))


def test_interruption_queue_is_encrypted_short_lived_and_fed_by_five_rules(prod_graph):
    queue = prod_graph.one("aws:sqs/queue:Queue")
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    rules = prod_graph.of_type("aws:cloudwatch/eventRule:EventRule")
    patterns = {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules}
    assert patterns == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }
    targets = prod_graph.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5
    assert all(t.inputs["arn"] == QUEUE_ARN for t in targets)
    policy = json.loads(prod_graph.one("aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    assert policy["Statement"][0]["Principal"] == {"Service": "events.amazonaws.com"}
    assert policy["Statement"][0]["Resource"] == QUEUE_ARN
    # Only the five interruption rules may send (each rule's ARN, as the mocks give it, ends in its name).
    rule_names = {r.name for r in prod_graph.of_type("aws:cloudwatch/eventRule:EventRule")}
    (condition,) = policy["Statement"][0]["Condition"].values()
    assert len(rule_names) == 5
    assert {arn.rsplit("/", 1)[1] for arn in condition["aws:SourceArn"]} == rule_names


def test_helm_releases_are_pinned_and_the_controller_waits_for_its_crds_and_credentials(prod_graph):
    crds = next(r for r in prod_graph.of_type(RELEASE) if r.inputs["name"] == "karpenter-crd")
    release = karpenter_release(prod_graph)
    assert (crds.inputs["chart"], crds.inputs["version"]) == (KARPENTER_CRD_CHART, "1.14.3")
    assert (release.inputs["chart"], release.inputs["version"]) == (KARPENTER_CHART, "1.14.3")
    assert release.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert release.inputs["namespace"] == "kube-system"
    assert release.inputs["skipCrds"] is True
    for dependency in (crds, prod_graph.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "gpu-training-karpenter-pod-identity"), prod_graph.one("eks:index:Cluster")):
        assert prod_graph.depends_on(release, dependency)
    controller = prod_graph.one("aws:iam/role:Role", "gpu-training-karpenter-controller-role")
    permissions = [a for a in prod_graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.parent == controller.urn]
    assert len(permissions) == 6
    assert all(prod_graph.depends_on(release, a) for a in permissions)


def test_controller_settings_name_the_cluster_its_endpoint_and_the_queue(prod_graph):
    settings = karpenter_release(prod_graph).inputs["values"]["settings"]
    assert settings["clusterName"] == "gpu-training-prod"
    assert settings["clusterEndpoint"] == "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
    assert settings["interruptionQueue"] == QUEUE_NAME
    assert settings["featureGates"] == {"reservedCapacity": True, "nodeRepair": True}


def test_node_repair_is_a_setting_that_turns_the_alpha_gate_off():
    assert karpenter_values("c", None, "q", {}, region="us-west-2", node_repair=False)["settings"]["featureGates"]["nodeRepair"] is False


def test_controller_runs_on_system_nodes_and_never_tolerates_the_gpu_taint(prod_graph):
    values = karpenter_release(prod_graph).inputs["values"]
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux", "role": "system"}
    assert all(t.get("key") not in ("nvidia.com/gpu", None) for t in values["tolerations"])
    assert values["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]


def test_controller_gets_its_region_from_the_environment_not_instance_metadata(prod_graph):
    # aws/karpenter-provider-aws#8219: pods cannot reach IMDS with hop limit 1, and Karpenter panics.
    assert karpenter_release(prod_graph).inputs["values"]["controller"]["env"] == [{"name": "AWS_REGION", "value": "us-west-2"}]


@pytest.mark.parametrize("version", KARPENTER_CHART_VERSIONS)
def test_region_reaches_the_controller_container_through_the_charts_env_value(reference_dir, version):
    from tests.support.module_charts import karpenter_chart_folder, proxy_or_skip

    with proxy_or_skip():
        chart = karpenter_chart_folder(reference_dir, "karpenter", version)
    assert yaml.safe_load((chart / "values.yaml").read_text())["controller"]["env"] == []
    # The deployment template appends controller.env to the controller container's env list.
    assert "{{- with .Values.controller.env }}" in (chart / "templates" / "deployment.yaml").read_text()


def test_a_hand_built_cluster_ref_without_endpoint_leaves_discovery_to_the_controller():
    assert "clusterEndpoint" not in karpenter_values("c", None, "q", {}, region="us-west-2", node_repair=True)["settings"]


def test_without_a_system_node_group_the_controller_keeps_only_the_os_selector():
    values = karpenter_values("c", "https://e", "q", {}, region="us-west-2", node_repair=True)
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert build(system=False).of_type(RELEASE)


# --- the GPU pools ---------------------------------------------------------------------------------


def test_every_custom_resource_depends_on_the_karpenter_release_and_uses_the_cluster_provider(prod_graph):
    release = karpenter_release(prod_graph)
    (provider,) = prod_graph.of_type("pulumi:providers:kubernetes")
    custom = prod_graph.of_type(NODE_CLASS) + prod_graph.of_type(NODE_POOL)
    assert len(custom) == 2
    for resource in custom:
        assert prod_graph.depends_on(resource, release), resource.name
        assert resource.provider.startswith(provider.urn)
    (node_class,), (node_pool,) = prod_graph.of_type(NODE_CLASS), prod_graph.of_type(NODE_POOL)
    assert prod_graph.depends_on(node_pool, node_class)


def test_node_pool_is_tainted_on_demand_limited_and_consolidates_only_empty_nodes(prod_graph):
    spec = prod_graph.one(NODE_POOL).inputs["spec"]
    template = spec["template"]["spec"]
    assert template["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["template"]["metadata"]["labels"] == {"role": "gpu-training", "environment": "prod"}
    requirements = {r["key"]: r["values"] for r in template["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert requirements["node.kubernetes.io/instance-type"] == ["p5.48xlarge"]
    assert requirements["topology.kubernetes.io/zone"] == ["us-west-2b"]
    assert spec["limits"] == {"nvidia.com/gpu": 16}
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["consolidateAfter"] == "30m"
    assert template["expireAfter"] == "Never"
    assert template["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu-training"}


def test_node_class_selects_the_placement_group_the_stack_created(prod_graph):
    placement = prod_graph.one(PLACEMENT_GROUP, "gpu-training-karpenter-gpu-training-placement-group")
    assert placement.inputs["strategy"] == "cluster"
    assert placement.inputs["name"] == "gpu-training-prod-karpenter-gpu-training"
    node_class = prod_graph.one(NODE_CLASS)
    assert node_class.inputs["spec"]["placementGroupSelector"] == {"name": placement.inputs["name"]}
    assert prod_graph.depends_on(node_class, placement)


def test_node_class_uses_the_pool_subnets_of_its_zone_and_the_cluster_and_efa_groups(prod_graph):
    spec = prod_graph.one(NODE_CLASS).inputs["spec"]
    zone_of = {s["id"]: s["availabilityZone"] for s in stack_config("prod")[f"{PROJECT}:network"]["subnets"]}
    assert {zone_of[t["id"]] for t in spec["subnetSelectorTerms"]} == {"us-west-2b"}
    efa = prod_graph.one("aws:ec2/securityGroup:SecurityGroup", "gpu-training-karpenter-gpu-training-efa")
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0c1a55e7c1a55e7c1"}, {"id": efa.id}]
    assert len(spec["networkInterfaces"]) == 33  # the primary interface and 32 EFA devices of a p5.48xlarge
    assert spec["role"] == NODE_ROLE_NAME


def test_node_class_pins_an_al2023_ami_and_requires_imdsv2_and_an_encrypted_root_volume(prod_graph):
    spec = prod_graph.one(NODE_CLASS).inputs["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": AL2023_AMI_ALIAS}]
    assert AL2023_AMI_ALIAS.startswith("al2023@v")
    assert not AL2023_AMI_ALIAS.endswith("@latest")
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    ebs = spec["blockDeviceMappings"][0]["ebs"]
    assert (ebs["volumeType"], ebs["volumeSize"], ebs["encrypted"]) == ("gp3", "500Gi", True)


def test_a_stack_tag_change_leaves_the_node_class_alone_so_no_karpenter_node_drifts():
    def node_class(tags):
        config = stack_config("prod")
        config[f"{PROJECT}:tags"] = tags
        graph = run_main(config)
        assert graph.error is None, repr(graph.error)
        return graph.one(NODE_CLASS).inputs["spec"]

    before, after = node_class({"team": "ml"}), node_class({"team": "ml", "cost-center": "4711"})
    assert "tags" not in before
    assert before == after


def test_existing_placement_group_is_selected_by_name_not_created():
    graph = build(karpenter_pool(placementGroup={"mode": "existing", "name": "shared-pg"}))
    assert graph.of_type(PLACEMENT_GROUP) == []
    assert graph.one(NODE_CLASS).inputs["spec"]["placementGroupSelector"] == {"name": "shared-pg"}


def test_pool_without_placement_group_or_efa_selects_neither():
    graph = build(karpenter_pool(instanceTypes=["g6e.xlarge"], gpuLimit=1, placementGroup={"mode": "none"}, availabilityZone=None))
    spec = graph.one(NODE_CLASS).inputs["spec"]
    assert "placementGroupSelector" not in spec
    assert "networkInterfaces" not in spec
    assert graph.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert [t["id"] for t in spec["subnetSelectorTerms"]] == [s.id for s in NETWORK.subnets]
    zones = next(r for r in graph.one(NODE_POOL).inputs["spec"]["template"]["spec"]["requirements"] if r["key"] == "topology.kubernetes.io/zone")
    assert zones["values"] == ["us-west-2a", "us-west-2b"]


def test_reserved_pool_selects_its_reservations_and_allows_reserved_capacity():
    pool = karpenter_pool(
        instanceTypes=["p5.48xlarge"],
        capacityTypes=["on-demand", "reserved"],
        capacityReservationIds=["cr-0123456789abcdef0"],
        placementGroup={"mode": "none"},
    )
    graph = build(pool)
    assert graph.one(NODE_CLASS).inputs["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    requirements = graph.one(NODE_POOL).inputs["spec"]["template"]["spec"]["requirements"]
    assert next(r for r in requirements if r["key"] == "karpenter.sh/capacity-type")["values"] == ["on-demand", "reserved"]


def test_two_pools_get_their_own_node_class_pool_and_placement_group():
    graph = build(karpenter_pool(name="a"), karpenter_pool(name="b", instanceTypes=["p5.48xlarge"]))
    assert sorted(r.inputs["metadata"]["name"] for r in graph.of_type(NODE_CLASS)) == ["a", "b"]
    assert sorted(r.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"] for r in graph.of_type(NODE_POOL)) == ["a", "b"]
    assert sorted(r.inputs["name"] for r in graph.of_type(PLACEMENT_GROUP)) == ["research-karpenter-a", "research-karpenter-b"]


def test_component_validates_its_pool_before_registering_anything():
    pool = KarpenterGpuNodePoolConfig.model_construct(**{**karpenter_pool().__dict__, "capacity_types": ["spot"]})

    def program():
        cluster = EksCluster(
            "c",
            EksClusterArgs(cluster=ClusterConfig(name="r", endpoint_public_access_cidrs=["192.0.2.0/24"]), network=NETWORK, system_node_group=SystemNodeGroupConfig(enabled=False), region="us-west-2", partition="aws"),
        )
        karpenter = Karpenter("k", KarpenterArgs(cluster=cluster.ref, config=KarpenterConfig(enabled=True)))
        GpuNodePool("bad", GpuNodePoolArgs(cluster=cluster.ref, pool=pool, network=NETWORK, node_role_name="r", karpenter_release=karpenter.release))

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert "GpuNodePool(bad).capacityTypes[0]: spot is refused for training pools" in str(graph.error)
    assert not [r for r in graph.resources if "bad" in r.name]


# --- the whole stack -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"capacityTypes": ["spot"]}, "karpenter.gpuNodePools[0].capacityTypes[0]: spot is refused for training pools"),
        ({"gpuLimit": 4}, "karpenter.gpuNodePools[0].gpuLimit: 4 is less than one p5.48xlarge node's 8 GPUs"),
        (
            {"availabilityZone": None, "subnetIds": ["subnet-0f1e2d3c4b5a60001", "subnet-0f1e2d3c4b5a60002"]},
            "karpenter.gpuNodePools[0].subnetIds: span us-west-2a, us-west-2b; a placement group needs all of the pool's subnets in one AZ",
        ),
    ],
    ids=["spot", "gpu limit below one node", "placement group over two AZs"],
)
def test_bad_karpenter_pool_fails_before_any_resource_is_registered(change, expected):
    config = stack_config("prod")
    pool = {**config[f"{PROJECT}:karpenter"]["gpuNodePools"][0], **change}
    config[f"{PROJECT}:karpenter"] = {**config[f"{PROJECT}:karpenter"], "gpuNodePools": [{k: v for k, v in pool.items() if v is not None}]}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert expected in str(graph.error)
    assert graph.resources == []


def test_karpenter_off_creates_none_of_it():
    config = without_karpenter(stack_config("prod"))
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    assert [r for r in graph.resources if "karpenter" in r.name] == []
    assert graph.exports["karpenterNodePoolNames"] == []


def test_adopted_cluster_gets_the_same_karpenter():
    config = stack_config("prod")
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "create": False}
    graph = run_main(config)
    assert graph.error is None
    assert karpenter_release(graph).inputs["values"]["settings"]["clusterEndpoint"].startswith("https://")
    assert len(graph.of_type(NODE_POOL)) == 1


def test_stacks_export_their_karpenter_pools(stack_graph):
    stack, graph = stack_graph
    pools = stack_config(stack)[f"{PROJECT}:karpenter"]["gpuNodePools"]
    assert graph.exports["karpenterNodePoolNames"] == [p["name"] for p in pools]


def test_dev_runs_karpenter_with_a_small_on_demand_pool_without_placement_group(dev_graph):
    spec = dev_graph.one(NODE_POOL).inputs["spec"]
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == ["g6e.xlarge"]
    assert spec["limits"] == {"nvidia.com/gpu": 2}
    assert "placementGroupSelector" not in dev_graph.one(NODE_CLASS).inputs["spec"]


# --- pure helpers ----------------------------------------------------------------------------------


def test_karpenter_taint_is_the_seeds_in_kubernetes_spelling():
    assert karpenter_gpu_taint() == {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


@pytest.mark.parametrize("count", [1, 4, 32])
def test_efa_layout_has_an_ip_primary_and_one_efa_only_device_per_card(count):
    interfaces = karpenter_efa_network_interfaces(count)
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa = interfaces[1:]
    assert [i["networkCardIndex"] for i in efa] == list(range(count))
    # AWS's layout: efa-only at device 1 of card 0 (beside the primary), at device 0 of every other card
    assert [(i["deviceIndex"], i["interfaceType"]) for i in efa] == [(1, "efa-only")] + [(0, "efa-only")] * (count - 1)


def test_efa_layout_is_empty_without_efa():
    assert karpenter_efa_network_interfaces(0) == []


def test_node_pool_spec_drops_unset_budget_fields():
    spec = node_pool_spec(karpenter_pool(), node_class_name="burst", zones=["us-west-2a"])
    assert spec["disruption"]["budgets"] == [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "1"}]
