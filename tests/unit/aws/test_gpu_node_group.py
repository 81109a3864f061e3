"""GpuNodeGroup: the pure helpers, and the component under the mock engine."""

from __future__ import annotations

import pulumi
import pytest

from eks_gpu_training import ConfigError, GpuNodeGroup, GpuNodeGroupArgs
from eks_gpu_training.config import GpuNodeGroupConfig
from eks_gpu_training.aws.node_launch import image_volume_device
from eks_gpu_training.aws.gpu_node_group import (
    capacity_options,
    efa_network_interfaces,
    gpu_node_labels,
    gpu_taint,
)
from eks_gpu_training.facts.gpu_nodes import gpu_toleration
from eks_gpu_training.aws.iam import NODE_MANAGED_POLICIES
from tests.support.builders import NETWORK
from tests.support.harness import research_cluster, run_program, stand_in_ref

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"

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


def test_node_labels_add_the_role_and_the_pool_name_to_the_pool_labels():
    assert gpu_node_labels(gpu_pool(labels={"team": "llm"})) == {
        "team": "llm",
        "eks-gpu-training/pool": "train",
        "role": "gpu-training",
    }


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
    assert placement.inputs == {"name": "research-train", "strategy": "cluster", "tags": {"team": "ml"}, "region": "us-west-2"}
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
    node_group = graph.one(NODE_GROUP)
    assert node_group.inputs["subnetIds"] == [s.id for s in NETWORK.subnets]


def test_pool_subnets_are_those_of_its_availability_zone():
    node_group = build(gpu_pool()).one(NODE_GROUP)
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
    node_group = graph.one(NODE_GROUP)
    assert node_group.inputs["capacityType"] == "CAPACITY_BLOCK"
    assert "instanceTypes" not in node_group.inputs  # the launch template names it; EKS refuses both


def test_a_standalone_pool_takes_its_labels_as_an_output_of_another_stack():
    """As ``eks.ManagedNodeGroup`` does: a whole map read from another stack, say, passed on with
    the pool's own labels added."""
    labels = pulumi.Output.from_input({"team": "llm", "cost-center": "4711"})
    graph = build(gpu_pool(minSize=1, maxSize=2, labels=labels))
    assert graph.error is None, graph.error
    assert graph.one(NODE_GROUP).inputs["labels"] == {
        "team": "llm", "cost-center": "4711", "eks-gpu-training/pool": "train", "role": "gpu-training"}


def test_the_platform_refuses_output_labels_and_says_why_in_its_own_words():
    from eks_gpu_training import GpuTrainingPlatform
    from eks_gpu_training.platform.loading import platform_args_from_settings
    from tests.support.harness import stack_config

    args = platform_args_from_settings(stack_config("prod"))
    pools = [args.gpu_node_groups[0].model_copy(update={"labels": pulumi.Output.from_input({"team": "llm"})}),
             *args.gpu_node_groups[1:]]
    args = args.model_copy(update={"gpu_node_groups": pools})
    graph = run_program(lambda: GpuTrainingPlatform("gpu-training", args), {})
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    (problem,) = graph.error.problems
    assert problem.path == "gpuNodeGroups[0].labels"
    assert problem.message.startswith("is an Output: GpuNodeGroup takes one, but the platform checks the pools' labels")
    assert "valid dictionary" not in problem.message


def test_labels_that_are_neither_a_map_nor_an_output_are_refused_by_the_library():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        gpu_pool(labels=["team=llm"])
    assert "labels must be a dict of label -> value or a pulumi.Output of one, not list" in str(refused.value)


def test_node_group_is_tainted_labelled_and_leaves_desired_size_to_autoscalers():
    graph = build(gpu_pool(minSize=1, desiredSize=2, maxSize=4, labels={"team": "llm"}))
    node_group = graph.one(NODE_GROUP)
    assert node_group.inputs["clusterName"] == "research"
    assert node_group.inputs["taints"] == [gpu_taint()]
    assert node_group.inputs["labels"] == {"team": "llm", "eks-gpu-training/pool": "train", "role": "gpu-training"}
    assert node_group.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 2, "maxSize": 4}
    assert node_group.ignore_changes == ["scalingConfig.desiredSize"]
    assert node_group.transforms == 0  # every setting is an input render shows
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert node_group.inputs["launchTemplate"] == {"id": template.id, "version": "1"}
    assert "diskSize" not in node_group.inputs  # the launch template owns the volume


def test_component_validates_its_pool_before_registering_anything():
    bad = GpuNodeGroupConfig.model_validate({"name": "train"})  # placement group without an AZ

    def program():
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=stand_in_ref(), pool=bad, network=NETWORK))  # type: ignore[arg-type]

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert "GpuNodeGroup(train).availabilityZone: is required with a placement group" in str(graph.error)
    assert graph.resources == []


@pytest.mark.parametrize(("instance_types", "interfaces"), [(["p5.48xlarge"], 32), (["p4de.24xlarge"], 4), (["p5en.48xlarge"], 16), (["p6-b200.48xlarge"], 8)])
def test_efa_interfaces_follow_the_instance_type(instance_types, interfaces):
    template = build(gpu_pool(instanceTypes=instance_types)).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(template.inputs["networkInterfaces"]) == interfaces


def test_node_group_follows_the_cluster_version_and_pins_the_release_version_when_asked():
    node_group = build(gpu_pool(releaseVersion="1.34.2-20251120")).one(NODE_GROUP)
    assert node_group.inputs["version"] == "1.35"  # the default of the cluster research_cluster creates
    assert node_group.inputs["releaseVersion"] == "1.34.2-20251120"
    assert "releaseVersion" not in build(gpu_pool()).one(NODE_GROUP).inputs


def test_node_group_is_named_from_a_prefix_so_a_replacement_never_clashes():
    graph = build(gpu_pool())
    node_group = graph.one(NODE_GROUP)
    assert node_group.inputs["nodeGroupNamePrefix"] == "train-"
    assert "nodeGroupName" not in node_group.inputs


def test_node_group_rolls_with_the_minimal_strategy_one_node_at_a_time():
    node_group = build(gpu_pool()).one(NODE_GROUP)
    assert node_group.inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}


def test_node_group_waits_for_a_created_cluster():
    graph = build(gpu_pool())
    assert graph.depends_on(graph.one(NODE_GROUP), graph.one("eks:index:Cluster"))


def test_node_repair_is_on_for_gpu_pools_one_node_at_a_time_halting_above_half_the_pool():
    node_group = build(gpu_pool()).one(NODE_GROUP)
    assert node_group.inputs["nodeRepairConfig"] == {
        "enabled": True,
        "maxUnhealthyNodeThresholdPercentage": 50,
        "maxParallelNodesRepairedCount": 1,
    }


def test_node_repair_overrides_reach_the_node_group():
    override = {
        "nodeMonitoringCondition": "AcceleratedHardwareReady",
        "nodeUnhealthyReason": "NvidiaXID79Error",
        "minRepairWaitTimeMins": 5,
        "repairAction": "Reboot",
    }
    repair = {"maxUnhealthyNodeThresholdCount": 1, "maxParallelNodesRepairedPercentage": 25, "nodeRepairConfigOverrides": [override]}
    node_group = build(gpu_pool(nodeRepair=repair)).one(NODE_GROUP)
    assert node_group.inputs["nodeRepairConfig"] == {
        "enabled": True,
        "maxUnhealthyNodeThresholdCount": 1,
        "maxParallelNodesRepairedPercentage": 25,
        "nodeRepairConfigOverrides": [override],
    }
    assert build(gpu_pool(nodeRepair={"enabled": False})).one(NODE_GROUP).inputs["nodeRepairConfig"] == {"enabled": False}


def test_stack_tags_stay_out_of_the_launch_template_tag_specifications():
    template = build(gpu_pool()).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["tags"] == {"team": "ml"}
    assert template.inputs["tagSpecifications"] == [
        {"resourceType": "instance", "tags": {"Name": "research-train"}},
        {"resourceType": "volume", "tags": {"Name": "research-train"}},
    ]


def test_instance_tags_are_an_explicit_opt_in_on_instances_and_volumes():
    template = build(gpu_pool(instanceTags={"cost-center": "ml"})).one("aws:ec2/launchTemplate:LaunchTemplate")
    assert [spec["tags"] for spec in template.inputs["tagSpecifications"]] == [
        {"cost-center": "ml", "Name": "research-train"}
    ] * 2


def test_protect_covers_the_node_group_and_the_placement_group_it_creates():
    def program():
        cluster = research_cluster(NETWORK, system_node_group=False)
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=gpu_pool(), network=NETWORK, protect=True))

    graph = run_program(program)
    assert graph.one(NODE_GROUP).protect
    assert graph.one("aws:ec2/placementGroup:PlacementGroup").protect
    assert not graph.one("aws:ec2/launchTemplate:LaunchTemplate").protect
    unprotected = build(gpu_pool())
    assert not unprotected.one(NODE_GROUP).protect


def test_the_pools_own_protect_overrides_the_components_either_way():
    def program(pool: GpuNodeGroupConfig, protect: bool):
        def build_pool():
            cluster = research_cluster(NETWORK, system_node_group=False)
            GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK, protect=protect))
        return build_pool

    lifted = run_program(program(gpu_pool(protect=False), protect=True))
    assert (lifted.one(NODE_GROUP).protect, lifted.one("aws:ec2/placementGroup:PlacementGroup").protect) == (False, False)
    kept = run_program(program(gpu_pool(protect=True), protect=False))
    assert (kept.one(NODE_GROUP).protect, kept.one("aws:ec2/placementGroup:PlacementGroup").protect) == (True, True)
    followed = run_program(program(gpu_pool(), protect=True))
    assert followed.one(NODE_GROUP).protect


def test_a_reserved_pool_is_replaced_old_group_first_so_it_never_needs_its_reservation_twice():
    block = gpu_pool(
        capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0", placementGroup={"mode": "none"}
    )
    assert build(block).one(NODE_GROUP).delete_before_replace is True
    odcr = gpu_pool(capacityReservationId="cr-0123456789abcdef0", placementGroup={"mode": "none"})
    assert build(odcr).one(NODE_GROUP).delete_before_replace is True


def test_an_on_demand_pool_is_replaced_new_group_first():
    assert build(gpu_pool()).one(NODE_GROUP).delete_before_replace is False


def test_rolls_respect_pod_disruption_budgets_unless_the_pool_opts_in_to_force():
    assert build(gpu_pool()).one(NODE_GROUP).inputs["forceUpdateVersion"] is False
    assert build(gpu_pool(forceUpdateVersion=True)).one(NODE_GROUP).inputs["forceUpdateVersion"] is True
