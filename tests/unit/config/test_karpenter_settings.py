"""The `karpenter` configuration section: defaults, and one negative test per rule (no engine)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform import parse_platform_args
from tests.support.builders import valid_config


def karpenter_config(**pool_settings) -> dict[str, Any]:
    config = valid_config()
    config["karpenter"] = {
        "enabled": True,
        "gpuNodePools": [{"name": "burst", "availabilityZone": "us-west-2a", **pool_settings}],
    }
    return config


def kpool(config: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return config["karpenter"]["gpuNodePools"][index]


def problems_of(mutate: Callable[[dict[str, Any]], Any]) -> list[str]:
    config = karpenter_config()
    mutate(config)
    with pytest.raises(ConfigError) as error:
        parse_platform_args(config)
    return [str(p) for p in error.value.problems]


def test_karpenter_is_off_by_default_so_existing_stacks_stay_valid():
    args = parse_platform_args(valid_config())
    assert args.karpenter.enabled is False
    assert args.karpenter.gpu_node_pools == []
    assert args.karpenter.chart_version == "1.14.3"


def test_pool_defaults_are_the_seeds_nodepool_tuned_for_training():
    pool = parse_platform_args(karpenter_config()).karpenter.gpu_node_pools[0]
    assert pool.instance_types == ["p5.48xlarge"]
    assert pool.capacity_types == ["on-demand"]
    assert pool.gpu_limit == 16
    assert pool.placement_group.mode == "create"
    assert pool.efa_enabled
    assert pool.efa_interfaces == 32
    assert pool.gpus_per_node == 8
    assert pool.disruption.consolidate_after == "30m"
    assert pool.disruption.expire_after == "Never"
    assert [b.model_dump(exclude_none=True) for b in pool.disruption.budgets] == [
        {"nodes": "0", "reasons": ["Drifted"]},
        {"nodes": "1"},
    ]


def test_efa_enabled_follows_the_same_rule_as_managed_node_groups():
    config = karpenter_config(instanceTypes=["g6e.xlarge"], placementGroup={"mode": "none"}, gpuLimit=1)
    pool = parse_platform_args(config).karpenter.gpu_node_pools[0]
    assert pool.efa_enabled is False
    assert pool.efa_interfaces == 0


def test_reserved_capacity_with_its_reservations_is_accepted():
    config = karpenter_config(
        capacityTypes=["on-demand", "reserved"],
        capacityReservationIds=["cr-0123456789abcdef0"],
        placementGroup={"mode": "existing", "name": "odcr-pg"},
    )
    pool = parse_platform_args(config).karpenter.gpu_node_pools[0]
    assert pool.capacity_types == ["on-demand", "reserved"]


def test_gpu_limit_of_exactly_one_node_is_accepted():
    config = karpenter_config(instanceTypes=["p5.48xlarge"], gpuLimit=8)
    assert parse_platform_args(config).karpenter.gpu_node_pools[0].gpu_limit == 8


P = "karpenter.gpuNodePools[0]"

def created_network(config: dict[str, Any]) -> None:
    config["network"] = {"create": True, "availabilityZones": ["us-west-2a", "us-west-2b"]}


REJECTIONS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("spot capacity for training", lambda c: kpool(c).update(capacityTypes=["on-demand", "spot"]), f"{P}.capacityTypes[1]: spot is refused for training pools: a reclaimed node stops the whole distributed job"),
    ("EKS spelling of a capacity type", lambda c: kpool(c).update(capacityTypes=["ON_DEMAND"]), f"{P}.capacityTypes[0]: 'ON_DEMAND' is not a karpenter.sh/capacity-type value"),
    ("misspelt capacity type", lambda c: kpool(c).update(capacityTypes=["on-demnd"]), f"{P}.capacityTypes[0]: 'on-demnd' is not a karpenter.sh/capacity-type value; allowed: on-demand, reserved; did you mean 'on-demand'?"),
    ("no capacity type", lambda c: kpool(c).update(capacityTypes=[]), f"{P}.capacityTypes: List should have at least 1 item"),
    ("capacity type twice", lambda c: kpool(c).update(capacityTypes=["on-demand", "on-demand"]), f"{P}.capacityTypes: lists a capacity type twice"),
    ("reserved without a reservation", lambda c: kpool(c).update(capacityTypes=["reserved"]), f"{P}.capacityTypes: 'reserved' needs the reservations to launch into"),
    ("reservation without reserved", lambda c: kpool(c).update(capacityReservationIds=["cr-0123456789abcdef0"], placementGroup={"mode": "none"}), f"{P}.capacityReservationIds: Karpenter launches into a reservation only for a NodePool that allows 'reserved'"),
    ("malformed reservation id", lambda c: kpool(c).update(capacityReservationIds=["cr-1"]), f"{P}.capacityReservationIds: 'cr-1' is not a capacity reservation id"),
    ("reservation forced into a new placement group", lambda c: kpool(c).update(capacityTypes=["reserved"], capacityReservationIds=["cr-0123456789abcdef0"]), f"{P}.placementGroup.mode: a capacity reservation cannot be forced into a placement group it was not created in"),
    ("GPU limit below one node", lambda c: kpool(c).update(gpuLimit=4), f"{P}.gpuLimit: 4 is less than one p5.48xlarge node's 8 GPUs"),
    ("zero GPU limit", lambda c: kpool(c).update(gpuLimit=0), f"{P}.gpuLimit: Input should be greater than or equal to 1"),
    ("placement group over multi-AZ subnets", lambda c: (kpool(c).pop("availabilityZone"), kpool(c).update(subnetIds=["subnet-0000000000000000a", "subnet-0000000000000000b"])), f"{P}.subnetIds: span us-west-2a, us-west-2b; a placement group needs all of the pool's subnets in one AZ"),
    ("placement group without availability zone", lambda c: kpool(c).pop("availabilityZone"), f"{P}.availabilityZone: is required with a placement group"),
    ("subnet in another zone than the pool", lambda c: kpool(c).update(subnetIds=["subnet-0000000000000000b"]), f"{P}.subnetIds[0]: 'subnet-0000000000000000b' is in us-west-2b, not the pool's availabilityZone us-west-2a"),
    ("existing placement group without name", lambda c: kpool(c).update(placementGroup={"mode": "existing"}), f"{P}.placementGroup.name: is required when placementGroup.mode is 'existing'"),
    ("instance type without GPUs", lambda c: kpool(c).update(instanceTypes=["m7i.48xlarge"]), f"{P}.instanceTypes[0]: 'm7i.48xlarge' is not an x86_64 NVIDIA GPU instance type"),
    ("misspelt instance type", lambda c: kpool(c).update(instanceTypes=["p5.48xl"]), f"{P}.instanceTypes[0]: 'p5.48xl' is not an EC2 instance type"),
    ("EFA on for a type without EFA", lambda c: kpool(c).update(instanceTypes=["g6e.xlarge"], efa="enabled", gpuLimit=1), f"{P}.efa: is 'enabled' but g6e.xlarge has no EFA"),
    ("reserved role label", lambda c: kpool(c).update(labels={"role": "x"}), f"{P}.labels.role: is reserved"),
    ("label in Karpenter's domain", lambda c: kpool(c).update(labels={"karpenter.sh/team": "a"}), f"{P}.labels.karpenter.sh/team: is restricted by Karpenter"),
    ("hostname label", lambda c: kpool(c).update(labels={"kubernetes.io/hostname": "a"}), f"{P}.labels.kubernetes.io/hostname: is restricted by Karpenter"),
    ("consolidateAfter in words", lambda c: kpool(c).update(disruption={"consolidateAfter": "30 minutes"}), f"{P}.disruption.consolidateAfter: '30 minutes' does not match"),
    ("budget schedule without duration", lambda c: kpool(c).update(disruption={"budgets": [{"nodes": "0", "schedule": "@daily"}]}), f"{P}.disruption.budgets[0]: schedule and duration are set together or not at all"),
    ("budget of unknown reason", lambda c: kpool(c).update(disruption={"budgets": [{"nodes": "1", "reasons": ["Expired"]}]}), f"{P}.disruption.budgets[0].reasons[0]: Input should be 'Empty', 'Drifted' or 'Underutilized'"),
    ("budget nodes as a fraction", lambda c: kpool(c).update(disruption={"budgets": [{"nodes": "0.5"}]}), f"{P}.disruption.budgets[0].nodes: '0.5' does not match"),
    ("two pools with one name", lambda c: c["karpenter"]["gpuNodePools"].append(dict(kpool(c))), "karpenter.gpuNodePools[1].name: 'burst' is used by karpenter.gpuNodePools[0] too"),
    ("pools while Karpenter is off", lambda c: c["karpenter"].update(enabled=False), "karpenter.enabled: is false but gpuNodePools lists 1 pool(s)"),
    ("unknown pool key", lambda c: kpool(c).update(capacityType="on-demand"), f"{P}.capacityType: unknown key; allowed: name, instanceTypes, availabilityZone"),
    ("chart version that is not x.y.z", lambda c: c["karpenter"].update(chartVersion="latest"), "karpenter.chartVersion: 'latest' is not supported; allowed: 1.14.3, 1.14.1"),
    ("EFA pool over several AZs without a placement group", lambda c: (kpool(c).pop("availabilityZone"), kpool(c).update(placementGroup={"mode": "none"}, instanceTypes=["p5.48xlarge"])), f"{P}.availabilityZone: is required with EFA"),
    ("placement group name of a managed pool", lambda c: c["gpuNodeGroups"][0].update(name="karpenter-burst"), f"{P}.name: gives the placement group name 'research-karpenter-burst' that gpuNodeGroups[0].name gives too"),
    ("retained pools in a VPC that destroy deletes", created_network, "karpenter.retainOnRemoval: is true (the default) on a stack that creates its VPC (network.create) and is not protected (cluster.protect false): `pulumi destroy` would leave the NodePools' GPU instances running in that VPC and then fail to delete it; set retainOnRemoval: false (destroy then deletes the NodePools first, and Karpenter drains and terminates their nodes), or cluster.protect: true (destroy is refused)"),
    ("stack tag Karpenter reserves", lambda c: c.update(tags={"kubernetes.io/cluster/research": "owned"}), "tags.kubernetes.io/cluster/research: is a tag Karpenter sets itself"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_rejects_invalid_karpenter_configuration_naming_the_key(mutate, expected):
    problems = problems_of(mutate)
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize("settings", [
    pytest.param({"karpenter": {"retainOnRemoval": False}}, id="Karpenter drains its nodes on destroy"),
    pytest.param({"cluster": {"protect": True}}, id="destroy is refused"),
    pytest.param({"karpenter": {"enabled": False, "gpuNodePools": []}}, id="no Karpenter"),
])
def test_a_created_vpc_accepts_karpenter_where_destroy_leaves_no_instance_in_it(settings):
    config = karpenter_config()
    created_network(config)
    for section, values in settings.items():
        config[section] = {**config[section], **values}
    assert parse_platform_args(config).network.create is True


def test_an_adopted_vpc_keeps_retained_pools_through_destroy():
    # destroy does not delete a VPC the stack did not create, so the retained nodes stay where they run.
    args = parse_platform_args(karpenter_config())
    assert (args.network.create, args.cluster.protect, args.karpenter.retain_on_removal) == (False, False, True)


def test_reserved_tags_are_fine_while_karpenter_is_off():
    config = valid_config()
    config["tags"] = {"karpenter.sh/nodepool": "x"}
    assert parse_platform_args(config).tags == {"karpenter.sh/nodepool": "x"}


def test_managed_node_group_and_karpenter_pool_share_the_placement_rules():
    def both_multi_az(config):
        for pool in (config["gpuNodeGroups"][0], kpool(config)):
            pool.pop("availabilityZone")
            pool["subnetIds"] = ["subnet-0000000000000000a", "subnet-0000000000000000b"]

    messages = [p.split(": ", 1)[1] for p in problems_of(both_multi_az) if p.split(":")[0].endswith(".subnetIds")]
    assert len(messages) == 2
    assert messages[0] == messages[1]
