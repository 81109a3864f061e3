"""The stack configuration model: defaults, and one negative test per rule.

These tests never start the Pulumi engine: the model and its rules are plain Python.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from eks_gpu_training.config import ConfigError, GpuTrainingPlatformArgs
from eks_gpu_training.platform import parse_platform_args
from tests.support.builders import problems_of, valid_config


def pool(config: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return config["gpuNodeGroups"][index]


def test_valid_config_fills_in_documented_defaults():
    args = parse_platform_args(valid_config())
    assert isinstance(args, GpuTrainingPlatformArgs)
    gpu = args.gpu_node_groups[0]
    assert gpu.ami_type == "AL2023_x86_64_NVIDIA"
    assert gpu.capacity_type == "ON_DEMAND"
    assert (gpu.min_size, gpu.initial_size, gpu.max_size) == (0, 0, 2)
    assert gpu.placement_group.mode == "create"
    assert gpu.placement_group.strategy == "cluster"
    assert gpu.efa_enabled
    assert gpu.efa_interfaces == 32
    assert gpu.root_volume_size_gib == 500
    assert args.cluster.create is True
    assert args.cluster.kubernetes_version == "1.35"
    assert args.system_node_group.enabled
    assert args.system_node_group.instance_types == ["m7i.xlarge"]


def test_default_instance_types_are_one_type_so_a_p5_keeps_all_32_efa_interfaces():
    config = valid_config()
    del pool(config)["instanceTypes"]
    gpu = parse_platform_args(config).gpu_node_groups[0]
    assert gpu.instance_types == ["p5.48xlarge"]
    # One launch template serves every type of a pool: adding p4de would cut every node to 4.
    assert gpu.efa_interfaces == 32


def test_desired_size_defaults_to_min_size_and_zero_is_kept():
    config = valid_config()
    pool(config).update(minSize=1, desiredSize=0, maxSize=2)
    with pytest.raises(ConfigError, match=r"gpuNodeGroups\[0\]\.desiredSize: must lie between"):
        parse_platform_args(config)
    pool(config).update(minSize=0, desiredSize=0)
    assert parse_platform_args(config).gpu_node_groups[0].initial_size == 0


REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown top-level key", lambda c: c.update(gpuPools=[]), "gpuPools: unknown key; allowed: region, cluster"),
    ("unknown nested key", lambda c: pool(c).update(spot=True), "gpuNodeGroups[0].spot: unknown key; allowed: name, instanceTypes"),
    ("missing cluster name", lambda c: c["cluster"].pop("name"), "cluster.name: is required"),
    ("pool protect that is not a boolean", lambda c: pool(c).update(protect="sometimes"), "gpuNodeGroups[0].protect: Input should be a valid boolean"),
    ("missing network", lambda c: c.pop("network"), "network: is required"),
    ("unsupported region", lambda c: c.update(region="us-west-9"), "region: 'us-west-9' is not an AWS region"),
    ("unsupported kubernetes version", lambda c: c["cluster"].update(kubernetesVersion="1.24"), "cluster.kubernetesVersion: '1.24' is not supported"),
    ("admin that is not an IAM ARN", lambda c: c["cluster"].update(adminPrincipalArns=["admin"]), "cluster.adminPrincipalArns[0]: 'admin' is not an IAM role or user ARN"),
    ("unknown log type", lambda c: c["cluster"].update(enabledLogTypes=["api", "kubelet"]), "cluster.enabledLogTypes: 'kubelet' is not an EKS log type"),
    ("malformed subnet id", lambda c: c["network"]["subnets"][0].update(id="sub-1"), "network.subnets[0].id: 'sub-1' does not match"),
    ("subnet listed twice", lambda c: c["network"]["subnets"].append(dict(c["network"]["subnets"][0])), "network.subnets[2].id: 'subnet-0000000000000000a' is listed twice"),
    ("subnet outside the region", lambda c: c["network"]["subnets"][1].update(availabilityZone="us-east-1a"), "network.subnets[1].availabilityZone: 'us-east-1a' is not in region us-west-2"),
    ("misspelt instance type", lambda c: pool(c).update(instanceTypes=["p5.48xlarge", "p5.48xl"]), "gpuNodeGroups[0].instanceTypes[1]: 'p5.48xl' is not an EC2 instance type (botocore ec2 InstanceType); did you mean 'p5.48xlarge'?"),
    ("instance type without GPUs", lambda c: pool(c).update(instanceTypes=["m7i.48xlarge"]), "gpuNodeGroups[0].instanceTypes[0]: 'm7i.48xlarge' is not an x86_64 NVIDIA GPU instance type"),
    ("instance type listed twice", lambda c: pool(c).update(instanceTypes=["p5.48xlarge", "p5.48xlarge"]), "gpuNodeGroups[0].instanceTypes: lists an instance type twice"),
    ("unknown AMI type", lambda c: pool(c).update(amiType="AL2023_GPU"), "gpuNodeGroups[0].amiType: 'AL2023_GPU' is not an EKS AMI type"),
    ("end-of-life AL2 GPU AMI", lambda c: pool(c).update(amiType="AL2_x86_64_GPU"), "gpuNodeGroups[0].amiType: 'AL2_x86_64_GPU' is refused: Amazon Linux 2 EKS AMIs reached end of support on 2025-11-26"),
    ("AMI without NVIDIA driver", lambda c: pool(c).update(amiType="AL2023_x86_64_STANDARD"), "gpuNodeGroups[0].amiType: 'AL2023_x86_64_STANDARD' has no NVIDIA driver"),
    ("unknown capacity type", lambda c: pool(c).update(capacityType="RESERVED"), "gpuNodeGroups[0].capacityType: 'RESERVED' is not an EKS capacity type"),
    ("spot capacity for training", lambda c: pool(c).update(capacityType="SPOT"), "gpuNodeGroups[0].capacityType: SPOT is refused for training pools"),
    ("capacity block without reservation", lambda c: pool(c).update(capacityType="CAPACITY_BLOCK", placementGroup={"mode": "none"}), "gpuNodeGroups[0].capacityReservationId: is required with capacityType CAPACITY_BLOCK"),
    ("capacity block for two instance types", lambda c: pool(c).update(capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0", instanceTypes=["p5.48xlarge", "p5e.48xlarge"], placementGroup={"mode": "none"}), "gpuNodeGroups[0].instanceTypes: a Capacity Block is for exactly one instance type"),
    ("malformed reservation id", lambda c: pool(c).update(capacityReservationId="cr-1"), "gpuNodeGroups[0].capacityReservationId: 'cr-1' does not match"),
    ("reservation forced into a new placement group", lambda c: pool(c).update(capacityReservationId="cr-0123456789abcdef0"), "gpuNodeGroups[0].placementGroup.mode: a capacity reservation cannot be forced into a placement group it was not created in"),
    ("min size above max size", lambda c: pool(c).update(minSize=3, maxSize=2, desiredSize=2), "gpuNodeGroups[0].minSize: must not exceed maxSize (2)"),
    ("desired size above max size", lambda c: pool(c).update(desiredSize=5), "gpuNodeGroups[0].desiredSize: must lie between minSize (0) and maxSize (2)"),
    ("negative min size", lambda c: pool(c).update(minSize=-1), "gpuNodeGroups[0].minSize: Input should be greater than or equal to 0"),
    ("existing placement group without name", lambda c: pool(c).update(placementGroup={"mode": "existing"}), "gpuNodeGroups[0].placementGroup.name: is required when placementGroup.mode is 'existing'"),
    ("placement group name with mode create", lambda c: pool(c).update(placementGroup={"name": "pg-1"}), "gpuNodeGroups[0].placementGroup.name: is only used with mode 'existing'"),
    ("unknown placement strategy", lambda c: pool(c).update(placementGroup={"strategy": "clustered"}), "gpuNodeGroups[0].placementGroup.strategy: 'clustered' is not a placement strategy (botocore ec2 PlacementStrategy); did you mean 'cluster'?"),
    ("spread placement for training", lambda c: pool(c).update(placementGroup={"strategy": "spread"}), "gpuNodeGroups[0].placementGroup.strategy: 'spread' spreads instances apart"),
    ("placement group without availability zone", lambda c: pool(c).pop("availabilityZone"), "gpuNodeGroups[0].availabilityZone: is required with a placement group"),
    ("availability zone without subnets", lambda c: pool(c).update(availabilityZone="us-west-2c"), "gpuNodeGroups[0].availabilityZone: 'us-west-2c' has no subnet in network.subnets"),
    ("subnet outside the network", lambda c: pool(c).update(subnetIds=["subnet-0000000000000000f"]), "gpuNodeGroups[0].subnetIds[0]: 'subnet-0000000000000000f' is not in network.subnets"),
    ("subnet in another zone than the pool", lambda c: pool(c).update(subnetIds=["subnet-0000000000000000b"]), "gpuNodeGroups[0].subnetIds[0]: 'subnet-0000000000000000b' is in us-west-2b, not the pool's availabilityZone us-west-2a"),
    ("placement group over multi-AZ subnets", lambda c: (pool(c).pop("availabilityZone"), pool(c).update(subnetIds=["subnet-0000000000000000a", "subnet-0000000000000000b"])), "gpuNodeGroups[0].subnetIds: span us-west-2a, us-west-2b; a placement group needs all of the pool's subnets in one AZ"),
    ("EFA on for a type without EFA", lambda c: pool(c).update(instanceTypes=["g6e.xlarge"], efa="enabled"), "gpuNodeGroups[0].efa: is 'enabled' but g6e.xlarge has no EFA"),
    ("reserved role label", lambda c: pool(c).update(labels={"role": "inference"}), "gpuNodeGroups[0].labels.role: is reserved"),
    ("invalid label key", lambda c: pool(c).update(labels={"-team": "a"}), "gpuNodeGroups[0].labels.-team: is not a valid Kubernetes label key"),
    ("invalid label value", lambda c: pool(c).update(labels={"team": "a b"}), "gpuNodeGroups[0].labels.team: 'a b' is not a valid Kubernetes label value"),
    ("pool name that is not a DNS label", lambda c: pool(c).update(name="H100_pool"), "gpuNodeGroups[0].name: 'H100_pool' does not match"),
    ("two pools with one name", lambda c: c["gpuNodeGroups"].append(dict(pool(c))), "gpuNodeGroups[1].name: 'h100' is used by gpuNodeGroups[0] too"),
    ("root volume too small for GPU images", lambda c: pool(c).update(rootVolumeSizeGib=20), "gpuNodeGroups[0].rootVolumeSizeGib: Input should be greater than or equal to 100"),
    ("GPU AMI on system nodes", lambda c: c.update(systemNodeGroup={"amiType": "AL2023_x86_64_NVIDIA"}), "systemNodeGroup.amiType: 'AL2023_x86_64_NVIDIA' is an accelerator AMI"),
    ("system desired size out of range", lambda c: c.update(systemNodeGroup={"desiredSize": 9}), "systemNodeGroup.desiredSize: must lie between minSize (2) and maxSize (4)"),
    ("system instance type misspelt", lambda c: c.update(systemNodeGroup={"instanceTypes": ["m7i.xl"]}), "systemNodeGroup.instanceTypes[0]: 'm7i.xl' is not an EC2 instance type"),
    ("created cluster with subnets in one AZ", lambda c: c["network"].update(subnets=c["network"]["subnets"][:1]), "network.subnets: are all in us-west-2a; EKS places a new cluster's control-plane ENIs in subnets of at least two availability zones"),
    ("both API endpoints off", lambda c: c["cluster"].update(endpointPublicAccess=False, endpointPrivateAccess=False), "cluster.endpointPrivateAccess: must be true when endpointPublicAccess is false"),
    ("public endpoint naming no network", lambda c: c["cluster"].pop("endpointPublicAccessCidrs"), "cluster.endpointPublicAccessCidrs: is required with endpointPublicAccess true: list the networks that may reach the public API endpoint, or write 0.0.0.0/0"),
    ("public CIDRs on a private endpoint", lambda c: c["cluster"].update(endpointPublicAccess=False, endpointPrivateAccessCidrs=["10.0.0.0/16"]), "cluster.endpointPublicAccessCidrs: is set but endpointPublicAccess is false"),
    ("private-only endpoint no one can reach", lambda c: (c["cluster"].pop("endpointPublicAccessCidrs"), c["cluster"].update(endpointPublicAccess=False)), "cluster.endpointPrivateAccessCidrs: a private-only endpoint is reachable only from the cluster security group"),
    ("private sources with the private endpoint off", lambda c: c["cluster"].update(endpointPrivateAccess=False, endpointPrivateAccessSecurityGroupIds=["sg-0123456789abcdef0"]), "cluster.endpointPrivateAccessSecurityGroupIds: is set but endpointPrivateAccess is false"),
    ("public CIDR with host bits", lambda c: c["cluster"].update(endpointPublicAccessCidrs=["192.0.2.1/24"]), "cluster.endpointPublicAccessCidrs: '192.0.2.1/24' is not a CIDR block (192.0.2.1/24 has host bits set)"),
    ("IPv6 public CIDR", lambda c: c["cluster"].update(endpointPublicAccessCidrs=["2001:db8::/32"]), "cluster.endpointPublicAccessCidrs: '2001:db8::/32' is IPv6; EKS public access CIDRs are IPv4"),
    ("malformed private security group", lambda c: c["cluster"].update(endpointPrivateAccessSecurityGroupIds=["web"]), "cluster.endpointPrivateAccessSecurityGroupIds[0]: 'web' is not a security group ID"),
    ("malformed release version", lambda c: pool(c).update(releaseVersion="latest"), "gpuNodeGroups[0].releaseVersion: 'latest' does not match"),
    ("release version of another Kubernetes version", lambda c: pool(c).update(releaseVersion="1.33.5-20251120"), "gpuNodeGroups[0].releaseVersion: '1.33.5-20251120' is an AMI for another Kubernetes version than cluster.kubernetesVersion 1.35"),
    ("malformed system release version", lambda c: c.update(systemNodeGroup={"releaseVersion": "v1"}), "systemNodeGroup.releaseVersion: 'v1' does not match"),
    ("unknown update strategy", lambda c: pool(c).update(updateStrategy="SURGE"), "gpuNodeGroups[0].updateStrategy: 'SURGE' is not an EKS update strategy (botocore eks NodegroupUpdateStrategies)"),
    ("repair threshold as count and percentage", lambda c: pool(c).update(nodeRepair={"maxUnhealthyNodeThresholdCount": 1, "maxUnhealthyNodeThresholdPercentage": 50}), "gpuNodeGroups[0].nodeRepair.maxUnhealthyNodeThresholdCount: set either maxUnhealthyNodeThresholdCount or maxUnhealthyNodeThresholdPercentage, not both"),
    ("parallel repairs as count and percentage", lambda c: pool(c).update(nodeRepair={"maxParallelNodesRepairedCount": 1, "maxParallelNodesRepairedPercentage": 50}), "gpuNodeGroups[0].nodeRepair.maxParallelNodesRepairedCount: set either"),
    ("repair percentage above 100", lambda c: pool(c).update(nodeRepair={"maxUnhealthyNodeThresholdPercentage": 150}), "gpuNodeGroups[0].nodeRepair.maxUnhealthyNodeThresholdPercentage: Input should be less than or equal to 100"),
    ("unknown repair action", lambda c: pool(c).update(nodeRepair={"nodeRepairConfigOverrides": [{"nodeMonitoringCondition": "AcceleratedHardwareReady", "nodeUnhealthyReason": "NvidiaXID79Error", "minRepairWaitTimeMins": 5, "repairAction": "reboot"}]}), "gpuNodeGroups[0].nodeRepair.nodeRepairConfigOverrides[0].repairAction: 'reboot' is not an EKS repair action (botocore eks RepairAction); did you mean 'Reboot'?"),
    ("unknown monitoring condition", lambda c: pool(c).update(nodeRepair={"nodeRepairConfigOverrides": [{"nodeMonitoringCondition": "GpuReady", "nodeUnhealthyReason": "x", "minRepairWaitTimeMins": 5, "repairAction": "Reboot"}]}), "gpuNodeGroups[0].nodeRepair.nodeRepairConfigOverrides[0].nodeMonitoringCondition: 'GpuReady' is not a node monitoring agent condition"),
    ("repeated repair override", lambda c: pool(c).update(nodeRepair={"nodeRepairConfigOverrides": [{"nodeMonitoringCondition": "KernelReady", "nodeUnhealthyReason": "x", "minRepairWaitTimeMins": 5, "repairAction": "Reboot"}] * 2}), "gpuNodeGroups[0].nodeRepair.nodeRepairConfigOverrides[1]: repeats condition KernelReady with reason x"),
    ("pool name too long for a prefixed node group name", lambda c: pool(c).update(name="a" * 37), "gpuNodeGroups[0].name: has 37 characters; a managed pool's node group is named '<name>-' plus a 26-character unique suffix, and EKS allows 63, so at most 36"),
    ("instance tag Name", lambda c: pool(c).update(instanceTags={"Name": "x"}), "gpuNodeGroups[0].instanceTags.Name: is set by the pool"),
    ("reserved aws: instance tag", lambda c: pool(c).update(instanceTags={"aws:x": "y"}), "gpuNodeGroups[0].instanceTags.aws:x: tag keys have 1-128 characters"),
    ("EFA pool over several AZs without a placement group", lambda c: (pool(c).pop("availabilityZone"), pool(c).update(placementGroup={"mode": "none"})), "gpuNodeGroups[0].availabilityZone: is required with EFA: the pool's subnets span us-west-2a, us-west-2b, and EFA traffic does not cross availability zones"),
    ("system min size above max size", lambda c: c.update(systemNodeGroup={"minSize": 5, "desiredSize": 5}), "systemNodeGroup.minSize: must not exceed maxSize (4)"),
    ("reserved aws: tag", lambda c: c.update(tags={"aws:owner": "x"}), "tags.aws:owner: tag keys starting with 'aws:' are reserved for AWS"),
    ("tag value too long", lambda c: c.update(tags={"owner": "x" * 300}), "tags.owner: tag values have at most 256 characters"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejects_invalid_configuration_naming_the_key(mutate, expected):
    problems = problems_of(mutate)
    assert any(p.startswith(expected) for p in problems), problems


def test_reports_every_problem_at_once():
    def many(config):
        config["cluster"]["kubernetesVersion"] = "1.9"
        pool(config).update(instanceTypes=["p5.48xl"], capacityType="SPOT")
        config["bogus"] = 1

    paths = {p.split(":")[0] for p in problems_of(many)}
    assert paths == {
        "cluster.kubernetesVersion",
        "gpuNodeGroups[0].instanceTypes[0]",
        "gpuNodeGroups[0].capacityType",
        "bogus",
    }


def test_reports_cross_key_problems_of_every_pool_together():
    def many(config):
        config["gpuNodeGroups"] = [
            {"name": "a", "capacityType": "CAPACITY_BLOCK", "instanceTypes": ["p5.48xlarge", "p4de.24xlarge"], "placementGroup": {"mode": "none"}},
            {"name": "b", "labels": {"role": "x"}, "availabilityZone": "us-west-2a"},
        ]

    paths = {p.split(":")[0] for p in problems_of(many)}
    assert {"gpuNodeGroups[0].capacityReservationId", "gpuNodeGroups[0].instanceTypes", "gpuNodeGroups[1].labels.role"} <= paths


def test_min_above_max_names_min_size_only_when_desired_size_is_unset():
    def inverted(config):
        pool(config).update(minSize=3, maxSize=2)

    assert [p.split(":")[0] for p in problems_of(inverted)] == ["gpuNodeGroups[0].minSize"]


def test_an_adopted_cluster_may_sit_in_one_az():
    # The two-AZ rule is CreateCluster's; an existing cluster already has its control plane.
    config = valid_config()
    config["cluster"]["create"] = False
    config["network"]["subnets"] = config["network"]["subnets"][:1]
    assert parse_platform_args(config).network.subnets[0].availability_zone == "us-west-2a"


def test_a_private_only_endpoint_reachable_from_a_network_is_accepted():
    config = valid_config()
    del config["cluster"]["endpointPublicAccessCidrs"]
    config["cluster"].update(endpointPublicAccess=False, endpointPrivateAccessCidrs=["10.20.0.0/16"])
    assert parse_platform_args(config).cluster.endpoint_private_access is True
    config["cluster"].update(endpointPrivateAccessCidrs=[], endpointPrivateAccessSecurityGroupIds=["sg-0123456789abcdef0"])
    assert parse_platform_args(config).cluster.endpoint_private_access_security_group_ids == ["sg-0123456789abcdef0"]


def test_an_efa_pool_without_placement_group_in_one_az_is_accepted():
    config = valid_config()
    pool(config).update(placementGroup={"mode": "none"})
    assert parse_platform_args(config).gpu_node_groups[0].efa_interfaces == 32


def test_capacity_block_with_its_reservation_and_no_placement_group_is_accepted():
    config = valid_config()
    pool(config).update(
        capacityType="CAPACITY_BLOCK", capacityReservationId="cr-0123456789abcdef0", placementGroup={"mode": "none"}
    )
    gpu = parse_platform_args(config).gpu_node_groups[0]
    assert gpu.capacity_type == "CAPACITY_BLOCK"


def test_reservation_may_use_the_existing_placement_group_it_was_created_in():
    config = valid_config()
    pool(config).update(
        capacityReservationId="cr-0123456789abcdef0", placementGroup={"mode": "existing", "name": "odcr-pg"}
    )
    assert parse_platform_args(config).gpu_node_groups[0].placement_group.name == "odcr-pg"


def test_model_is_frozen_so_validated_args_cannot_drift():
    args = parse_platform_args(valid_config())
    with pytest.raises(ValidationError, match="Instance is frozen"):
        args.gpu_node_groups[0].max_size = 100  # type: ignore[misc]


def test_parse_does_not_mutate_its_input():
    config = valid_config()
    snapshot = copy.deepcopy(config)
    parse_platform_args(config)
    assert config == snapshot
