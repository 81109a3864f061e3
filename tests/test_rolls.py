"""A version change that rolls GPU nodes is refused before anything is registered, unless the pool
opts in to forceUpdateVersion."""

from __future__ import annotations

import copy

from harness import PlausibleMocks, run_main, stack_config

from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.rolls import roll_problems

POOLS = "eks-gpu-training:gpuNodeGroups"
GROUP = "p5-training-20261201093000000000000001"


def prod(**pool):
    config = copy.deepcopy(stack_config("prod"))
    config[POOLS][0].update(pool)
    return config


def test_a_version_move_refuses_every_running_pool_without_the_opt_in():
    args = platform_args_from_settings(prod())
    [problem] = roll_problems(args, "1.34", {"p5-training": "1.34.2-20251120"})
    assert problem.path == "gpuNodeGroups[0].forceUpdateVersion"
    assert "moves the running cluster from 1.34 to 1.35, which rolls the pool's nodes" in problem.message
    assert "PodEvictionFailure" in problem.message and "set forceUpdateVersion: true" in problem.message


def test_the_opt_in_lets_the_version_move_through():
    args = platform_args_from_settings(prod(forceUpdateVersion=True))
    assert roll_problems(args, "1.34", {"p5-training": "1.34.2-20251120"}) == []


def test_a_pinned_release_change_refuses_its_pool():
    args = platform_args_from_settings(prod(releaseVersion="1.35.0-20260205"))
    [problem] = roll_problems(args, "1.35", {"p5-training": "1.35.0-20260129"})
    assert "releaseVersion moves the running nodes from 1.35.0-20260129 to 1.35.0-20260205" in problem.message


def test_nothing_rolls_at_the_same_version_or_without_a_running_group():
    args = platform_args_from_settings(prod())
    assert roll_problems(args, "1.35", {"p5-training": "1.35.0-20260129"}) == []
    assert roll_problems(args, "1.34", {}) == []  # the pool is created, not rolled


class RunningAt134(PlausibleMocks):
    """Prod running on 1.34 (PlausibleMocks' DescribeCluster answers 1.34), its pool running."""

    def call(self, args):
        if args.token == "aws:eks/getClusters:getClusters":
            return {"names": ["gpu-training-prod"], "id": "us-west-2"}
        if args.token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"clusterName": "gpu-training-prod", "names": [GROUP], "id": "gpu-training-prod"}
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            return {"clusterName": "gpu-training-prod", "nodeGroupName": GROUP, "releaseVersion": "1.34.2-20251120",
                    "scalingConfigs": [{"desiredSize": 2, "minSize": 2, "maxSize": 2}], "id": GROUP}
        return super().call(args)


def test_upgrading_a_running_cluster_is_refused_before_any_resource_is_registered():
    graph = run_main(prod(), mocks=RunningAt134())
    assert graph.resources == []
    assert [str(p).split(":")[0] for p in graph.error.problems] == ["gpuNodeGroups[0].forceUpdateVersion"]


def test_upgrading_with_the_opt_in_deploys_and_tells_eks_to_force():
    graph = run_main(prod(forceUpdateVersion=True), mocks=RunningAt134())
    assert graph.error is None, repr(graph.error)
    assert graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-p5-training-node-group").inputs["forceUpdateVersion"] is True
