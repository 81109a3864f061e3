"""A change that rolls GPU nodes is refused before anything is registered, unless the pool opts in to
forceUpdateVersion: a version move, a node group behind its cluster, a pinned release, a launch
template change. A steady-state `pulumi up` against what the program itself deployed is never
refused."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, Optional

import pulumi
import pytest

from tests.support.harness import PlausibleMocks, Graph, refusal_text, research_cluster, run_main, run_program, stack_config

from eks_gpu_training import GpuNodeGroup, GpuNodeGroupArgs
from eks_gpu_training.aws.control_plane_version import control_plane_version
from eks_gpu_training.aws.node_group_rolls import RunningNodeGroup
from eks_gpu_training.config import GpuNodeGroupConfig, NetworkConfig
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.rolls import roll_problems

PROJECT = "eks-gpu-training"
POOLS = f"{PROJECT}:gpuNodeGroups"
GROUP = "p5-training-20261201093000000000000001"
SUFFIX = "20261201093000000000000001"  # what the provider appends: 18-digit timestamp, 8 hex digits
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GET_LAUNCH_TEMPLATE = "aws:ec2/getLaunchTemplate:getLaunchTemplate"


def with_pool(stack: str = "prod", **pool) -> dict:
    config = copy.deepcopy(stack_config(stack))
    config[POOLS][0].update(pool)
    return config


def prod(**pool):
    return with_pool("prod", **pool)


# The pure rule, on plain data.


def test_a_version_move_refuses_every_running_pool_without_the_opt_in():
    args = platform_args_from_settings(prod())
    [problem] = roll_problems(args, "1.34", {"p5-training": RunningNodeGroup(version="1.34", release_version="1.34.2-20251120")})
    assert problem.path == "gpuNodeGroups[0].forceUpdateVersion"
    assert "moves the running cluster from 1.34 to 1.35, which rolls the pool's nodes" in problem.message
    assert "PodEvictionFailure, after the control plane has moved" in problem.message
    assert "set forceUpdateVersion: true" in problem.message


def test_the_opt_in_lets_the_version_move_through():
    args = platform_args_from_settings(prod(forceUpdateVersion=True))
    assert roll_problems(args, "1.34", {"p5-training": RunningNodeGroup(version="1.34")}) == []


def test_a_pinned_release_change_refuses_its_pool():
    args = platform_args_from_settings(prod(releaseVersion="1.35.0-20260205"))
    [problem] = roll_problems(args, "1.35", {"p5-training": RunningNodeGroup(version="1.35", release_version="1.35.0-20260129")})
    assert "releaseVersion moves the running nodes from 1.35.0-20260129 to 1.35.0-20260205" in problem.message
    assert "after the control plane has moved" not in problem.message


def test_nothing_rolls_at_the_same_version_or_without_a_running_group():
    args = platform_args_from_settings(prod())
    assert roll_problems(args, "1.35", {"p5-training": RunningNodeGroup(version="1.35", release_version="1.35.0-20260129")}) == []
    assert roll_problems(args, "1.34", {}) == []  # the pool is created, not rolled


def test_a_node_group_behind_its_created_cluster_is_refused():
    # An upgrade moved the control plane to 1.35 and stopped before the node group.
    args = platform_args_from_settings(prod())
    [problem] = roll_problems(args, "1.35", {"p5-training": RunningNodeGroup(version="1.34")})
    assert "the node group runs Kubernetes 1.34 while cluster.kubernetesVersion is 1.35" in problem.message
    assert "it is moved to 1.35, which rolls the pool's nodes" in problem.message


def test_an_adopted_cluster_its_owners_upgraded_refuses_the_pools_that_follow_it():
    config = prod()
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "create": False}
    args = platform_args_from_settings(config)
    [problem] = roll_problems(args, "1.36", {"p5-training": RunningNodeGroup(version="1.35")})
    assert "the node group runs Kubernetes 1.35 while the adopted cluster runs 1.36 (its owners upgraded" in problem.message
    # The stack's cluster.kubernetesVersion does not decide an adopted cluster's version.
    assert roll_problems(args, "1.35", {"p5-training": RunningNodeGroup(version="1.35")}) == []


# What runs, answered the way the provider describes it, from a first deployment's own registrations.


def described_launch_template(template) -> dict[str, Any]:
    """``aws.ec2.get_launch_template``'s answer for a template registered with these inputs, in the
    data source's shape: plural names, one-element lists for blocks, "" and 0 for what is unset, the
    interfaces' ``deleteOnTermination`` a boolean, the volumes' a string, user data as given (base64)."""
    inputs = template.inputs
    placement = inputs.get("placement")
    capacity = inputs.get("capacityReservationSpecification")
    market = inputs.get("instanceMarketOptions")
    return {
        "id": template.id,
        "name": f"{template.name}-20261201093000000000000001",
        "arn": f"arn:aws:ec2:us-west-2:123456789012:launch-template/{template.id}",
        "latestVersion": 1,
        "defaultVersion": 1,
        "description": inputs.get("description", ""),
        "blockDeviceMappings": [
            {
                "deviceName": mapping["deviceName"],
                "noDevice": "",
                "virtualName": "",
                "ebs": [{**mapping["ebs"], "iops": 0, "kmsKeyId": "", "snapshotId": "", "volumeInitializationRate": 0}],
            }
            for mapping in inputs.get("blockDeviceMappings", [])
        ],
        "metadataOptions": [{**inputs["metadataOptions"], "httpProtocolIpv6": "disabled", "instanceMetadataTags": "disabled"}],
        "placements": [{"groupName": placement["groupName"], "availabilityZone": "", "tenancy": "default"}] if placement else [],
        "tagSpecifications": inputs.get("tagSpecifications", []),
        "userData": inputs.get("userData", ""),
        "networkInterfaces": [
            {**interface, "deleteOnTermination": interface["deleteOnTermination"] == "true", "description": "", "ipv4AddressCount": 0}
            for interface in inputs.get("networkInterfaces", [])
        ],
        "capacityReservationSpecifications": (
            [{"capacityReservationPreference": "", "capacityReservationTargets": [capacity["capacityReservationTarget"]]}] if capacity else []
        ),
        "instanceMarketOptions": [{"marketType": market["marketType"], "spotOptions": []}] if market else [],
        "instanceType": inputs.get("instanceType", ""),
        "tags": inputs.get("tags", {}),
    }


class Deployed(PlausibleMocks):
    """What ``deployment`` (a graph of the program's first run) left running: the cluster at
    ``cluster_version``, each node group at the version and on the launch template version it was
    registered with, each launch template's latest version as registered. ``groups`` overrides
    fields of node group answers by pool name prefix, ``templates`` of launch template answers."""

    def __init__(self, deployment: Graph, cluster_version: str = "1.35", groups: Optional[dict] = None,
                 templates: Optional[dict] = None):
        super().__init__()
        assert deployment.error is None, repr(deployment.error)
        self.cluster_version = cluster_version
        self.templates = {t.id: {**described_launch_template(t), **(templates or {})} for t in deployment.of_type(LAUNCH_TEMPLATE)}
        self.groups = {}
        for group in deployment.of_type(NODE_GROUP):
            inputs = group.inputs
            name = inputs["nodeGroupNamePrefix"] + SUFFIX
            self.groups[name] = {
                "clusterName": inputs["clusterName"],
                "nodeGroupName": name,
                "version": inputs["version"],
                "releaseVersion": inputs.get("releaseVersion") or "1.35.0-20260129",  # EKS fills the latest in
                "scalingConfigs": [inputs["scalingConfig"]],
                "launchTemplates": [{**inputs["launchTemplate"], "name": ""}],
                "id": name,
                **(groups or {}).get(inputs["nodeGroupNamePrefix"], {}),
            }
        self.cluster = next(iter(self.groups.values()))["clusterName"]

    def call(self, args):
        if args.token == "aws:eks/getClusters:getClusters":
            return {"names": [self.cluster], "id": "us-west-2"}
        if args.token == "aws:eks/getCluster:getCluster":
            return {**super().call(args), "version": self.cluster_version}
        if args.token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"clusterName": self.cluster, "names": sorted(self.groups), "id": self.cluster}
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            return self.groups[args.args["nodeGroupName"]]
        if args.token == GET_LAUNCH_TEMPLATE:
            return self.templates[args.args["id"]]
        return super().call(args)


def deployed(config: dict, **running) -> Deployed:
    """The mocks of ``config``'s own first deployment, running."""
    return Deployed(first_deployment(json.dumps(config, sort_keys=True)), **running)


@functools.cache
def first_deployment(config: str) -> Graph:
    """The graph of a configuration's first run, run once per configuration (JSON) and worker: most
    tests here start from the same stack's deployment, and only read it."""
    return run_main(json.loads(config))


def problem_paths(graph: Graph) -> list[str]:
    return [str(p).split(":")[0] for p in getattr(graph.error, "problems", [])]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_a_steady_state_update_of_what_the_program_deployed_is_never_refused(stack):
    config = stack_config(stack)
    graph = run_main(config, mocks=deployed(config))
    assert graph.error is None, refusal_text(graph.error)
    # The running templates were read and compared, not skipped.
    assert [token for token, _ in graph.invokes].count(GET_LAUNCH_TEMPLATE) >= 1
    assert graph.one(NODE_GROUP, f"gpu-training-{config[POOLS][0]['name']}-node-group")


LAUNCH_TEMPLATE_CHANGES = [
    ("prod", {"rootVolumeSizeGib": 1000}, "rootVolumeSizeGib 500 → 1000 makes a new launch template version"),
    ("dev", {"rootVolumeSizeGib": 400}, "rootVolumeSizeGib 200 → 400 makes a new launch template version"),
    ("prod", {"fastImagePull": False}, "fastImagePull true → false (the nodeadm NodeConfig in the user data) makes a new launch template version"),
    ("prod", {"efa": "disabled"}, "efa: 32 → 0 EFA network interfaces makes a new launch template version"),
    ("prod", {"placementGroup": {"mode": "existing", "name": "shared-p5"}},
     "placementGroup: the nodes' placement group gpu-training-prod-p5-training → shared-p5 makes a new launch template version"),
    ("dev", {"instanceTags": {"team": "ml"}}, "instanceTags {} → {'team': 'ml'} makes a new launch template version"),
    ("prod", {"capacityReservationId": "cr-0123456789abcdef0", "placementGroup": {"mode": "none"}},
     "capacityReservationId none → cr-0123456789abcdef0 makes a new launch template version"),
]


@pytest.mark.parametrize(("stack", "change", "reason"), LAUNCH_TEMPLATE_CHANGES, ids=lambda v: str(v)[:40])
def test_a_launch_template_change_of_a_running_pool_is_refused_before_anything_is_registered(stack, change, reason):
    graph = run_main(with_pool(stack, **change), mocks=deployed(stack_config(stack)))
    assert graph.resources == []
    assert problem_paths(graph) == ["gpuNodeGroups[0].forceUpdateVersion"]
    shown = refusal_text(graph.error)
    assert reason in shown
    assert "rolls the pool's nodes" in shown
    assert "Stop or hold the pool's jobs" in shown
    assert "set forceUpdateVersion: true for this change" in shown


@pytest.mark.parametrize(("stack", "change", "reason"), LAUNCH_TEMPLATE_CHANGES, ids=lambda v: str(v)[:40])
def test_the_opt_in_lets_a_launch_template_change_through(stack, change, reason):
    graph = run_main(with_pool(stack, forceUpdateVersion=True, **change), mocks=deployed(stack_config(stack)))
    assert graph.error is None, refusal_text(graph.error)
    assert graph.one(NODE_GROUP, f"gpu-training-{stack_config(stack)[POOLS][0]['name']}-node-group").inputs["forceUpdateVersion"] is True


def test_dropping_the_instance_store_array_is_refused():
    config = stack_config("dev")
    config[f"{PROJECT}:storage"] = {"instanceStore": "none"}
    # fastImagePull needs the array, in the managed pool and the Karpenter pool alike.
    config[POOLS][0]["fastImagePull"] = False
    config[f"{PROJECT}:karpenter"]["gpuNodePools"][0]["fastImagePull"] = False
    graph = run_main(config, mocks=deployed(stack_config("dev")))
    assert "fastImagePull true → false and storage.instanceStore raid0 → none" in refusal_text(graph.error)


def test_every_change_of_a_pool_is_told_in_one_problem():
    graph = run_main(prod(rootVolumeSizeGib=1000, instanceTags={"team": "ml"}), mocks=deployed(prod()))
    [problem] = graph.error.problems
    assert "rootVolumeSizeGib 500 → 1000 makes a new launch template version; " in problem.message
    assert "instanceTags {} → {'team': 'ml'} makes a new launch template version; each rolls the pool's nodes" in problem.message


def test_a_node_group_left_on_an_older_template_version_is_a_pending_roll():
    # An update made template version 2 and stopped (PodEvictionFailure) before the nodes moved to it.
    running = deployed(prod(), groups={"p5-training-": {"launchTemplates": [{"id": "gpu-training-p5-training-launch-template-id", "version": "1", "name": ""}]}},
                       templates={"latestVersion": 2})
    graph = run_main(prod(), mocks=running)
    assert graph.resources == []
    assert "the node group runs launch template version 1, not the latest 2 (an earlier update stopped half-way)" in refusal_text(graph.error)
    assert run_main(prod(forceUpdateVersion=True), mocks=running).error is None


def test_a_node_group_behind_a_half_upgraded_cluster_is_refused_before_anything_is_registered():
    graph = run_main(prod(), mocks=deployed(prod(), groups={"p5-training-": {"version": "1.34"}}))
    assert graph.resources == []
    assert "the node group runs Kubernetes 1.34 while cluster.kubernetesVersion is 1.35" in refusal_text(graph.error)


def adopted(**pool) -> dict:
    config = prod(**pool)
    config[f"{PROJECT}:cluster"] = {**config[f"{PROJECT}:cluster"], "create": False}
    return config


def test_an_adopted_cluster_upgraded_by_its_owners_is_refused_for_the_pools_that_follow_it():
    # Deployed while the adopted cluster ran 1.34 (PlausibleMocks' DescribeCluster); its owners then moved it to 1.36.
    graph = run_main(adopted(), mocks=deployed(adopted(), cluster_version="1.36"))
    assert graph.resources == []
    assert problem_paths(graph) == ["gpuNodeGroups[0].forceUpdateVersion"]
    assert "the node group runs Kubernetes 1.34 while the adopted cluster runs 1.36" in refusal_text(graph.error)


def test_an_adopted_cluster_at_its_node_groups_version_is_not_refused():
    graph = run_main(adopted(), mocks=deployed(adopted(), cluster_version="1.34"))
    assert graph.error is None, refusal_text(graph.error)


def test_an_adopted_cluster_upgrade_goes_through_with_the_opt_in():
    graph = run_main(adopted(forceUpdateVersion=True), mocks=deployed(adopted(), cluster_version="1.36"))
    assert graph.error is None, refusal_text(graph.error)


class RunningAt134(PlausibleMocks):
    """Prod running on 1.34 (PlausibleMocks' DescribeCluster answers 1.34), its pool running."""

    def call(self, args):
        if args.token == "aws:eks/getClusters:getClusters":
            return {"names": ["gpu-training-prod"], "id": "us-west-2"}
        if args.token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"clusterName": "gpu-training-prod", "names": [GROUP], "id": "gpu-training-prod"}
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            return {"clusterName": "gpu-training-prod", "nodeGroupName": GROUP, "version": "1.34", "releaseVersion": "1.34.2-20251120",
                    "scalingConfigs": [{"desiredSize": 2, "minSize": 2, "maxSize": 2}], "id": GROUP}
        return super().call(args)


def test_upgrading_a_running_cluster_is_refused_before_any_resource_is_registered():
    graph = run_main(prod(), mocks=RunningAt134())
    assert graph.resources == []
    assert problem_paths(graph) == ["gpuNodeGroups[0].forceUpdateVersion"]


def test_upgrading_with_the_opt_in_deploys_and_tells_eks_to_force():
    graph = run_main(prod(forceUpdateVersion=True), mocks=RunningAt134())
    assert graph.error is None, repr(graph.error)
    assert graph.one(NODE_GROUP, "gpu-training-p5-training-node-group").inputs["forceUpdateVersion"] is True


# The standalone component refuses what it can compare: the launch template of a cluster named by a
# string, the version of a ref that holds it as one.

NETWORK = NetworkConfig.model_validate(
    {"vpcId": "vpc-0123456789abcdef0", "subnets": [{"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"}]}
)


def research_pool(**settings):
    """A program of its own: the created cluster ``research`` and one p5 pool beside it."""
    pool = GpuNodeGroupConfig.model_validate({"name": "train", "availabilityZone": "us-west-2a", **settings})

    def program():
        cluster = research_cluster(NETWORK, system_node_group=False)
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK))

    return program


def research_deployed(**running) -> Deployed:
    return Deployed(run_program(research_pool()), **running)


def test_a_gpu_node_group_of_another_program_is_updated_in_its_steady_state():
    graph = run_program(research_pool(), mocks=research_deployed())
    assert graph.error is None, refusal_text(graph.error)
    assert [token for token, _ in graph.invokes].count(GET_LAUNCH_TEMPLATE) == 1


def test_a_gpu_node_group_of_another_program_refuses_a_launch_template_roll():
    graph = run_program(research_pool(rootVolumeSizeGib=800), mocks=research_deployed())
    assert not [r for r in graph.resources if r.name.startswith("train")]
    shown = refusal_text(graph.error)
    assert "  - GpuNodeGroup(train).pool.forceUpdateVersion: rootVolumeSizeGib 500 → 800 makes a new launch template version" in shown
    assert run_program(research_pool(rootVolumeSizeGib=800, forceUpdateVersion=True), mocks=research_deployed()).error is None


def test_a_gpu_node_group_of_another_program_refuses_to_move_a_node_group_behind_its_cluster():
    graph = run_program(research_pool(), mocks=research_deployed(groups={"train-": {"version": "1.34"}}))
    assert "the node group runs Kubernetes 1.34 while the cluster ref's kubernetes_version is 1.35" in refusal_text(graph.error)


def test_an_instance_tag_a_program_computes_is_not_compared():
    # Known only at deployment: the check cannot tell whether it changes, so it does not refuse.
    def program():
        pool = GpuNodeGroupConfig.model_validate(
            {"name": "train", "availabilityZone": "us-west-2a", "instanceTags": {"team": pulumi.Output.from_input("ml")}}
        )
        cluster = research_cluster(NETWORK, system_node_group=False)
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK))

    graph = run_program(program, mocks=research_deployed())
    assert graph.error is None, refusal_text(graph.error)
    assert graph.one(LAUNCH_TEMPLATE).inputs["tagSpecifications"][0]["tags"] == {"team": "ml", "Name": "research-train"}


# A STANDARD cluster EKS upgraded itself at the end of standard support.


def test_a_control_plane_eks_upgraded_itself_is_no_version_move():
    args = platform_args_from_settings(prod())
    assert args.cluster.support_type == "STANDARD"
    assert roll_problems(args, "1.36", {"p5-training": RunningNodeGroup(version="1.35")}) == []
    extended = prod()
    extended[f"{PROJECT}:cluster"] = {**extended[f"{PROJECT}:cluster"], "supportType": "EXTENDED"}
    [problem] = roll_problems(platform_args_from_settings(extended), "1.36", {"p5-training": RunningNodeGroup(version="1.35")})
    assert "moves the running cluster from 1.36 to 1.35" in problem.message


def test_an_up_after_eks_upgraded_a_standard_cluster_keeps_its_control_plane_and_warns(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warnings.append(message))
    graph = run_main(prod(), mocks=deployed(prod(), cluster_version="1.36"))
    assert graph.error is None, refusal_text(graph.error)
    # No version: the provider keeps what runs, with or without a refresh (no UpdateClusterVersion).
    assert "version" not in graph.one("eks:index:Cluster").inputs
    # The nodes stay where they run: no roll until the stack file names 1.36.
    assert {g.inputs["version"] for g in graph.of_type(NODE_GROUP)} == {"1.35"}
    [warning] = [w for w in warnings if "cluster.kubernetesVersion" in w]
    assert "EKS upgraded the running control plane to 1.36" in warning
    assert "The stack sends the control plane no version, so it stays at 1.36" in warning
    assert "Set cluster.kubernetesVersion: '1.36' in the stack file" in warning


@pytest.mark.parametrize(("running", "support_type", "sent"), [
    ("1.36", "STANDARD", None),     # EKS upgraded it: no version sent, so it stays
    ("1.36", "EXTENDED", "1.35"),   # nobody but the stack moves an EXTENDED cluster
    ("1.34", "STANDARD", "1.35"),   # an upgrade the stack file asks for
    (None, "STANDARD", "1.35"),     # not running yet
])
def test_the_control_plane_is_sent_no_version_only_when_eks_upgraded_it(running, support_type, sent):
    assert control_plane_version("1.35", running, support_type) == sent
