"""``up --scale``: a stack's GPU pools grown to a fleet, its quotas with them, in a fleet-sized
simulated network; checked through the same validation and render as the stack file itself."""

from __future__ import annotations

from collections import Counter

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.facts.gpu_nodes import network_layer_key
from eks_gpu_training.local.fleet import managed_nodes
from eks_gpu_training.local.scale import SCALE_MAX, SCALED_TOPOLOGY, pool_shares, scale_settings, scaled_stack
from eks_gpu_training.offline.engine import PlausibleMocks
from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.platform.stack_files import locate_stack


def test_nodes_are_shared_by_the_pools_in_proportion_to_their_start():
    assert pool_shares([{"desiredSize": 2}, {"desiredSize": 6}], 100) == [25, 75]
    assert pool_shares([{"minSize": 1}, {"minSize": 1}, {"minSize": 1}], 100) == [34, 33, 33]
    # A pool at zero stays there while another has nodes; all at zero share alike.
    assert pool_shares([{"desiredSize": 0}, {"desiredSize": 3}], 10) == [0, 10]
    assert pool_shares([{"minSize": 0}, {"minSize": 0}], 9) == [5, 4]
    # Every pool with nodes keeps one, however small its share.
    assert pool_shares([{"desiredSize": 1}, {"desiredSize": 999}], 10) == [1, 9]


def test_prod_grown_to_a_thousand_nodes_keeps_its_teams_halves_and_leaves_karpenter_alone():
    args = scaled_stack(locate_stack("prod"), 1000).platform_args()
    (pool,) = args.gpu_node_groups
    assert (pool.min_size, pool.desired_size, pool.max_size) == (1000, 1000, 1000)
    quotas = {(team.name, quota.pool): quota.gpus for team in args.scheduling.teams for quota in team.quotas}
    assert quotas == {("pretraining", "p5-training"): 4000, ("research", "p5-training"): 4000,
                      ("pretraining", "gpu-training"): 8, ("research", "gpu-training"): 8}
    assert [p.gpu_limit for p in args.karpenter.gpu_node_pools] == [16]


def test_limits_and_namespace_quotas_grow_by_the_same_factor():
    settings = {
        "eks-gpu-training:gpuNodeGroups": [{"name": "a", "desiredSize": 2, "minSize": 2, "maxSize": 2}],
        "eks-gpu-training:scheduling": {
            "namespaces": [{"name": "training", "quota": {"gpus": 16}}],
            "teams": [{"name": "t", "quotas": [{"pool": "a", "gpus": 8, "borrowingLimit": 4, "lendingLimit": 2}]}],
        },
    }
    scaled = scale_settings(settings, "eks-gpu-training", 20)
    assert scaled["eks-gpu-training:scheduling"]["teams"][0]["quotas"][0] == {
        "pool": "a", "gpus": 80, "borrowingLimit": 40, "lendingLimit": 20}
    assert scaled["eks-gpu-training:scheduling"]["namespaces"][0]["quota"]["gpus"] == 160
    assert settings["eks-gpu-training:gpuNodeGroups"][0]["desiredSize"] == 2  # the stack's own settings untouched


@pytest.mark.parametrize(("nodes", "message"), [
    (0, f"must lie between 1 and {SCALE_MAX} nodes; got 0"),
    (SCALE_MAX + 1, f"must lie between 1 and {SCALE_MAX} nodes; got {SCALE_MAX + 1}"),
])
def test_a_scale_out_of_range_is_refused_before_anything_is_read_further(nodes, message):
    with pytest.raises(ConfigError) as refused:
        scaled_stack(locate_stack("prod"), nodes).platform_args()
    assert [(p.path, p.message) for p in refused.value.problems] == [("--scale", message)]


def test_fewer_nodes_than_pools_is_refused():
    settings = {"eks-gpu-training:gpuNodeGroups": [{"name": "a", "desiredSize": 1}, {"name": "b", "desiredSize": 1}]}
    with pytest.raises(ConfigError) as refused:
        scale_settings(settings, "eks-gpu-training", 1)
    assert refused.value.problems[0].message == "at least one node per GPU pool: 2 or more; got 1"


def test_a_thousand_node_fleet_sits_in_16_node_blocks_four_to_a_layer_2_node():
    located = scaled_stack(locate_stack("prod"), 1000)
    result = render_stack("prod", located=located, mocks=PlausibleMocks())
    nodes = [n for n in managed_nodes(located.platform_args(), [r.as_json() for r in result.resources], SCALED_TOPOLOGY)
             if n.pool == "p5-training"]
    assert len(nodes) == 1000
    blocks = Counter(n.labels[network_layer_key(3)] for n in nodes)
    assert len(blocks) == 63
    assert set(blocks.values()) == {16, 8}
    spines = Counter(n.labels[network_layer_key(2)] for n in nodes)
    assert len(spines) == 16
    assert max(spines.values()) == 64
    assert len({n.labels[network_layer_key(1)] for n in nodes}) == 1
