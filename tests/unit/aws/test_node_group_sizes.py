"""Every update sends the running node group's desired size, moved into the new bounds: EKS accepts the
update, and a pool an autoscaler or a person resized keeps its nodes."""

from __future__ import annotations

import copy

import pytest

from tests.support.harness import PlausibleMocks, run_main, stack_config

from eks_gpu_training.aws.node_group_sizes import RunningSize, clamped_desired_size, desired_size_for

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GPU_GROUP = "gpu-training-p5-training-node-group"
SYSTEM_GROUP = "gpu-training-cluster-system"
SUFFIX = "20261201093000000000000001"  # what the provider appends: 18-digit timestamp, 8 hex digits


@pytest.mark.parametrize(
    ("current", "bounds", "sent"),
    [
        (2, (0, 2), 2),  # inside the bounds: the running size, unchanged
        (2, (3, 4), 3),  # minSize raised above it: up to the new minimum
        (4, (0, 2), 2),  # maxSize lowered below it: down to the new maximum
    ],
)
def test_the_desired_size_sent_is_the_running_one_clamped_to_the_new_bounds(current, bounds, sent):
    assert clamped_desired_size(current, *bounds) == sent


class RunningProd(PlausibleMocks):
    """Prod already deployed at its version: its GPU group runs 2 nodes, its system group 3."""

    def call(self, args):
        running = {f"p5-training-{SUFFIX}": 2, f"system-{SUFFIX}": 3, "p5-training-other-20261201093000000000000002": 7}
        if args.token == "aws:eks/getClusters:getClusters":
            return {"names": ["gpu-training-prod"], "id": "us-west-2"}
        if args.token == "aws:eks/getCluster:getCluster":
            return {**super().call(args), "version": "1.35"}  # already at the stack's version
        if args.token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"clusterName": args.args["clusterName"], "names": sorted(running), "id": "gpu-training-prod"}
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            name = args.args["nodeGroupName"]
            return {"clusterName": "gpu-training-prod", "nodeGroupName": name, "scalingConfigs": [{"desiredSize": running[name], "minSize": 0, "maxSize": 9}], "id": name}
        return super().call(args)


def prod_with(**pool):
    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:gpuNodeGroups"][0].update(pool)
    graph = run_main(config, mocks=RunningProd())
    assert graph.error is None, repr(graph.error)
    return graph


def test_raising_min_size_above_the_running_desired_size_sends_the_new_minimum():
    group = prod_with(minSize=3, desiredSize=3, maxSize=4).one(NODE_GROUP, GPU_GROUP)
    assert group.inputs["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 4}
    assert group.ignore_changes == []


def test_lowering_max_size_below_the_running_desired_size_sends_the_new_maximum():
    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:systemNodeGroup"].update(minSize=2, desiredSize=2, maxSize=2)
    graph = run_main(config, mocks=RunningProd())
    assert graph.error is None, repr(graph.error)
    group = graph.one(NODE_GROUP, SYSTEM_GROUP)  # runs 3 nodes
    assert group.inputs["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 2}
    assert group.ignore_changes == []


def test_raising_max_size_keeps_a_pool_an_autoscaler_scaled_out():
    # Created at 2 (Pulumi's state says 2), scaled to 3 since: the update must send 3, or EKS would
    # set the pool back to 2 and terminate a GPU node of its choosing.
    class ScaledOut(RunningProd):
        def call(self, args):
            result = super().call(args)
            if args.token == "aws:eks/getNodeGroup:getNodeGroup" and args.args["nodeGroupName"].startswith("p5-training-2"):
                result["scalingConfigs"][0]["desiredSize"] = 3
            return result

    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:gpuNodeGroups"][0].update(minSize=2, desiredSize=2, maxSize=4)
    graph = run_main(config, mocks=ScaledOut())
    assert graph.error is None, repr(graph.error)
    group = graph.one(NODE_GROUP, GPU_GROUP)
    assert group.inputs["scalingConfig"] == {"minSize": 2, "desiredSize": 3, "maxSize": 4}
    assert group.ignore_changes == []


def test_bounds_that_hold_the_running_size_send_it_unchanged():
    graph = prod_with()
    gpu = graph.one(NODE_GROUP, GPU_GROUP)
    assert gpu.inputs["scalingConfig"]["desiredSize"] == 2
    assert gpu.ignore_changes == []
    # The system group runs 3 nodes inside its bounds (2-4), though created with 2.
    system = graph.one(NODE_GROUP, SYSTEM_GROUP)
    assert system.inputs["scalingConfig"]["desiredSize"] == 3
    assert system.ignore_changes == []


def test_a_first_deployment_creates_the_groups_at_their_configured_size(prod_graph):
    group = prod_graph.one(NODE_GROUP, GPU_GROUP)
    assert group.inputs["scalingConfig"]["desiredSize"] == 2
    assert group.ignore_changes == ["scalingConfig.desiredSize"]


def test_a_pool_resized_by_hand_within_unchanged_bounds_is_no_change_in_a_preview():
    # Running with the stack file's bounds, resized by hand since: desiredSize is ignored, so Pulumi
    # diffs nothing (a `pulumi preview --expect-no-changes` drift check passes), and an update that
    # leaves the bounds alone never sends scalingConfig.
    class ResizedByHand(PlausibleMocks):
        def call(self, args):
            sizes = {f"p5-training-{SUFFIX}": (3, 2, 4), f"system-{SUFFIX}": (4, 2, 4)}  # desired, min, max
            if args.token == "aws:eks/getClusters:getClusters":
                return {"names": ["gpu-training-prod"], "id": "us-west-2"}
            if args.token == "aws:eks/getCluster:getCluster":
                return {**super().call(args), "version": "1.35"}
            if args.token == "aws:eks/getNodeGroups:getNodeGroups":
                return {"clusterName": args.args["clusterName"], "names": sorted(sizes), "id": "gpu-training-prod"}
            if args.token == "aws:eks/getNodeGroup:getNodeGroup":
                name = args.args["nodeGroupName"]
                desired, low, high = sizes[name]
                return {"clusterName": "gpu-training-prod", "nodeGroupName": name, "version": "1.35",
                        "scalingConfigs": [{"desiredSize": desired, "minSize": low, "maxSize": high}], "id": name}
            return super().call(args)

    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:gpuNodeGroups"][0].update(maxSize=4)
    graph = run_main(config, mocks=ResizedByHand())
    assert graph.error is None, repr(graph.error)
    for name in (GPU_GROUP, SYSTEM_GROUP):
        assert graph.one(NODE_GROUP, name).ignore_changes == ["scalingConfig.desiredSize"]


@pytest.mark.parametrize(
    ("running", "sent"),
    [
        (None, (2, ["scalingConfig.desiredSize"])),  # created at its configured size, then left to others
        (RunningSize(desired=3, min=2, max=4), (3, ["scalingConfig.desiredSize"])),  # bounds stay: no diff
        (RunningSize(desired=3, min=0, max=9), (3, [])),  # bounds move: the running size is sent
        (RunningSize(desired=1, min=0, max=9), (2, [])),  # and moved into the new bounds
    ],
)
def test_desired_size_is_ignored_while_the_bounds_stay_and_sent_from_what_runs_when_they_move(running, sent):
    assert desired_size_for(running, 2, 2, 4) == sent
