"""GpuNodeGroup: the pure helpers, and the component under the mock engine."""

from __future__ import annotations

import pulumi
import pytest

from eks_gpu_training import ConfigError, GpuNodeGroup, GpuNodeGroupArgs
from eks_gpu_training.config import GpuNodeGroupConfig, NetworkConfig
from eks_gpu_training.aws.gpu_node_group import (
    capacity_options,
    efa_network_interfaces,
    gpu_node_labels,
    gpu_taint,
    gpu_toleration,
    image_volume_device,
)
from eks_gpu_training.aws.iam import NODE_MANAGED_POLICIES, node_group_update_transform
from harness import research_cluster, run_program

NETWORK = NetworkConfig.model_validate(
    {
        "vpcId": "vpc-0123456789abcdef0",
        "subnets": [
            {"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"},
            {"id": "subnet-0000000000000000c", "availabilityZone": "us-west-2a"},
            {"id": "subnet-0000000000000000b", "availabilityZone": "us-west-2b"},
        ],
    }
)


def gpu_pool(**settings) -> GpuNodeGroupConfig:
    return GpuNodeGroupConfig.model_validate({"name": "train", "availabilityZone": "us-west-2a", **settings})


def build(pool: GpuNodeGroupConfig):
    """A program that builds its own composition: a cluster and one GPU pool, no platform."""

    def program():
        cluster = research_cluster(NETWORK, system_node_group=False)
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK, tags={"team": "ml"}))

    graph = run_program(program)
    assert graph.error is None, repr(graph.error)
    return graph


def test_taint_and_toleration_match_the_seed():
    assert gpu_taint() == {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
    assert gpu_toleration() == {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_node_labels_add_the_role_to_the_pool_labels():
    assert gpu_node_labels(gpu_pool(labels={"team": "llm"})) == {"team": "llm", "role": "gpu-training", "eks-gpu-training/pool": "train"}


def test_efa_layout_puts_an_efa_interface_on_card_zero_and_efa_only_at_device_zero_of_the_rest():
    interfaces = efa_network_interfaces(4, ["sg-a"])
    assert [(i["network_card_index"], i["device_index"], i["interface_type"]) for i in interfaces] == [
        (0, 0, "efa"),
        (1, 0, "efa-only"),
        (2, 0, "efa-only"),
        (3, 0, "efa-only"),
    ]
    assert all(i["security_groups"] == ["sg-a"] for i in interfaces)


def test_bottlerocket_images_live_on_the_data_volume():
    assert image_volume_device("BOTTLEROCKET_x86_64_NVIDIA") == "/dev/xvdb"
    assert image_volume_device("AL2023_x86_64_NVIDIA") == "/dev/xvda"


def test_capacity_block_targets_its_reservation_with_the_capacity_block_market():
    pool = gpu_pool(
        instanceTypes=["p5.48xlarge"],
        capacityType="CAPACITY_BLOCK",
        capacityReservationId="cr-0123456789abcdef0",
        placementGroup={"mode": "none"},
    )
    assert capacity_options(pool) == {
        "capacity_reservation_specification": {
            "capacity_reservation_target": {"capacity_reservation_id": "cr-0123456789abcdef0"}
        },
        "instance_market_options": {"market_type": "capacity-block"},
        "instance_type": "p5.48xlarge",
    }
    on_demand_reservation = gpu_pool(capacityReservationId="cr-0123456789abcdef0", placementGroup={"mode": "none"})
    assert "instance_market_options" not in capacity_options(on_demand_reservation)
    assert capacity_options(gpu_pool()) == {}


def test_update_transform_sets_max_unavailable_only_on_the_eks_node_group():
    transform = node_group_update_transform(1)
    node_group = pulumi.ResourceTransformArgs(
        custom=True, type_="aws:eks/nodeGroup:NodeGroup", name="n", props={"clusterName": "c"}, opts=pulumi.ResourceOptions()
    )
    result = transform(node_group)
    assert result.props == {"clusterName": "c", "updateConfig": {"maxUnavailable": 1}}
    other = pulumi.ResourceTransformArgs(
        custom=True, type_="aws:ec2/launchTemplate:LaunchTemplate", name="t", props={}, opts=pulumi.ResourceOptions()
    )
    assert transform(other) is None


def test_node_role_carries_the_worker_policies():
    graph = build(gpu_pool())
    attachments = graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(
        f"arn:aws:iam::aws:policy/{name}" for name in NODE_MANAGED_POLICIES
    )
    role = graph.one("aws:iam/role:Role")
    assert "ec2.amazonaws.com" in role.inputs["assumeRolePolicy"]


def test_launch_template_requires_imdsv2_and_an_encrypted_gp3_root_volume():
    template = build(gpu_pool(rootVolumeSizeGib=800)).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["metadataOptions"]["httpTokens"] == "required"
    assert template.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (volume,) = template.inputs["blockDeviceMappings"]
    assert volume["deviceName"] == "/dev/xvda"
    assert volume["ebs"]["volumeType"] == "gp3"
    assert volume["ebs"]["encrypted"] == "true"
    assert volume["ebs"]["volumeSize"] == 800


def test_placement_group_is_created_without_efa_when_asked():
    graph = build(gpu_pool(instanceTypes=["g6e.xlarge"]))
    placement = graph.one("aws:ec2/placementGroup:PlacementGroup")
    assert placement.inputs == {"name": "research-train", "strategy": "cluster", "tags": {"team": "ml"}}
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["placement"] == {"groupName": "research-train"}
    assert "networkInterfaces" not in template.inputs


def test_existing_placement_group_is_referenced_not_created():
    graph = build(gpu_pool(placementGroup={"mode": "existing", "name": "shared-pg"}))
    assert graph.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    assert graph.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["placement"] == {"groupName": "shared-pg"}


def test_no_placement_group_leaves_placement_out():
    graph = build(gpu_pool(placementGroup={"mode": "none"}, availabilityZone=None, efa="disabled"))
    assert "placement" not in graph.one("aws:ec2/launchTemplate:LaunchTemplate").inputs
    node_group = graph.one("eks:index:ManagedNodeGroup")
    assert node_group.inputs["subnetIds"] == [s.id for s in NETWORK.subnets]


def test_pool_subnets_are_those_of_its_availability_zone():
    node_group = build(gpu_pool()).one("eks:index:ManagedNodeGroup")
    assert node_group.inputs["subnetIds"] == ["subnet-0000000000000000a", "subnet-0000000000000000c"]


def test_efa_security_group_allows_all_traffic_within_itself_and_is_on_every_interface():
    graph = build(gpu_pool(instanceTypes=["p4de.24xlarge"]))
    group = graph.one("aws:ec2/securityGroup:SecurityGroup")
    for rule_type in ("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"):
        rule = graph.one(rule_type)
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.inputs["securityGroupId"] == rule.inputs["referencedSecurityGroupId"] == group.id
    interfaces = graph.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["networkInterfaces"]
    assert len(interfaces) == 4
    # the cluster security group (control plane and pod traffic) and the EFA group, on each interface
    assert all(i["securityGroups"] == ["sg-0c1a55e7c1a55e7c1", group.id] for i in interfaces)


def test_efa_disabled_lays_out_no_interfaces_even_on_p5():
    graph = build(gpu_pool(efa="disabled"))
    assert graph.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert "networkInterfaces" not in graph.one("aws:ec2/launchTemplate:LaunchTemplate").inputs


def test_capacity_block_pool_launches_into_its_reservation():
    pool = gpu_pool(
        instanceTypes=["p5.48xlarge"],
        capacityType="CAPACITY_BLOCK",
        capacityReservationId="cr-0123456789abcdef0",
        placementGroup={"mode": "none"},
    )
    graph = build(pool)
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert template.inputs["instanceType"] == "p5.48xlarge"
    node_group = graph.one("eks:index:ManagedNodeGroup")
    assert node_group.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in node_group.inputs  # the launch template names it; EKS refuses both


def test_node_group_is_tainted_labelled_and_leaves_desired_size_to_autoscalers():
    graph = build(gpu_pool(minSize=1, desiredSize=2, maxSize=4, labels={"team": "llm"}))
    node_group = graph.one("eks:index:ManagedNodeGroup")
    assert node_group.inputs["nodeGroupName"] == "train"
    assert node_group.inputs["clusterName"] == "research"
    assert node_group.inputs["taints"] == [gpu_taint()]
    assert node_group.inputs["labels"] == {"team": "llm", "role": "gpu-training", "eks-gpu-training/pool": "train"}
    assert node_group.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 2, "maxSize": 4}
    assert node_group.inputs["ignoreScalingChanges"] is True
    assert node_group.transforms == 1  # node_group_update_transform: maxUnavailable
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert node_group.inputs["launchTemplate"] == {"id": template.id, "version": "1"}
    assert "diskSize" not in node_group.inputs  # the launch template owns the volume


def test_component_validates_its_pool_before_registering_anything():
    bad = GpuNodeGroupConfig.model_validate({"name": "train"})  # placement group without an AZ

    def program():
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=None, pool=bad, network=NETWORK))  # type: ignore[arg-type]

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert "GpuNodeGroup(train).availabilityZone: is required with a placement group" in str(graph.error)
    assert graph.resources == []


@pytest.mark.parametrize("instance_types,interfaces", [(["p5.48xlarge"], 32), (["p4de.24xlarge"], 4), (["p5en.48xlarge"], 16), (["p6-b200.48xlarge"], 8)])
def test_efa_interfaces_follow_the_instance_type(instance_types, interfaces):
    template = build(gpu_pool(instanceTypes=instance_types)).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(template.inputs["networkInterfaces"]) == interfaces
