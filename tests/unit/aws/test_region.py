"""Every AWS resource and look-up goes to the region a component was given, not to the stack's
``aws:region``; an AWS provider for another region is refused."""

from __future__ import annotations

import importlib
import inspect
import json
import re

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pytest

from eks_gpu_training import ClusterRef, ConfigError, EksCluster, EksClusterArgs
from eks_gpu_training.aws.region import provider_region_problem
from tests.support.harness import page_examples, run_example, run_program

STACK = {"aws:region": "us-west-2"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def takes_region(token: str) -> bool:
    """Whether the pulumi-aws resource or function behind ``token`` has a ``region`` input."""
    module_path, member = token.split(":")[1], token.split(":")[2]
    module = module_path.split("/")[0]
    target = importlib.import_module("pulumi_aws" if module == "index" else f"pulumi_aws.{module}")
    if member[0].islower():
        return "region" in inspect.signature(getattr(target, _snake(member))).parameters
    return "region" in inspect.signature(getattr(target, member)._internal_init).parameters


def regional(graph):
    return [r for r in graph.resources if r.type.startswith("aws:") and takes_region(r.type)]


def test_takes_region_reads_pulumi_aws_signatures():
    assert takes_region("aws:eks/nodeGroup:NodeGroup")
    assert takes_region("aws:eks/getCluster:getCluster")
    assert not takes_region("aws:iam/role:Role")
    assert not takes_region("aws:index/getCallerIdentity:getCallerIdentity")


def test_prod_stack_names_its_region_on_every_regional_resource_and_look_up(prod_graph):
    resources = regional(prod_graph)
    assert len(resources) > 40
    assert {r.name: r.inputs.get("region") for r in resources if r.inputs.get("region") != "us-west-2"} == {}
    lookups = [args for token, args in prod_graph.invokes if token.startswith("aws:") and takes_region(token)]
    assert lookups
    assert {args.get("region") for args in lookups} == {"us-west-2"}


def two_fleets():
    return run_example(page_examples("docs/library.md", "Examples")["Two fleets under your own component"], config=STACK)


def test_the_two_fleets_example_deploys_each_platform_in_its_own_region():
    graph = two_fleets()
    assert graph.error is None, repr(graph.error)
    for region in ("us-west-2", "us-east-1"):
        platform = graph.one("eks-gpu-training:index:GpuTrainingPlatform", f"fleets-{region}")
        resources = regional(graph.subtree(platform))
        assert len(resources) > 10
        assert {r.inputs.get("region") for r in resources} == {region}
    lookups = [(token.rsplit(":", 1)[1], args) for token, args in graph.invokes if token.startswith("aws:") and takes_region(token)]
    clusters = {(token, args["name"], args["region"]) for token, args in lookups if token == "getCluster"}
    assert clusters == {("getCluster", "fleets-us-west-2", "us-west-2"), ("getCluster", "fleets-us-east-1", "us-east-1")}
    # Add-on versions, ECR tokens and the running node groups are read in each platform's own region.
    others = {(token, args.get("region")) for token, args in lookups if token != "getCluster"}
    assert {region for _, region in others} == {"us-east-1", "us-west-2"}
    assert {(token, region) for token in ("getAddonVersion", "getAuthorizationToken")
            for region in ("us-east-1", "us-west-2")} <= others


def test_a_cluster_outside_the_stacks_region_is_created_through_a_provider_for_its_region():
    graph = two_fleets()
    providers = {r.urn: r for r in graph.of_type("pulumi:providers:aws")}
    assert [p.inputs["region"] for p in providers.values()] == ["us-east-1"]
    clusters = {c.inputs["name"]: c for c in graph.of_type("eks:index:Cluster")}
    assert clusters["fleets-us-east-1"].providers["aws"].rsplit("::", 1)[0] in providers
    # The cluster in the stack's own region stays on the default provider, with the stack's settings.
    assert "aws" not in clusters["fleets-us-west-2"].providers


def test_a_cluster_adopted_in_another_region_is_looked_up_there_and_its_kubeconfig_says_so():
    refs = {}

    def program():
        refs["ref"] = ClusterRef.from_existing("research", "us-east-1")
        pulumi.export("kubeconfig", refs["ref"].kubeconfig)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    assert [(token, args["region"]) for token, args in graph.invokes] == [("aws:eks/getCluster:getCluster", "us-east-1")]
    user = json.loads(graph.exports["kubeconfig"])["users"][0]["user"]["exec"]
    assert user["args"][user["args"].index("--region") + 1] == "us-east-1"


def test_refuses_an_adopted_cluster_whose_aws_provider_is_for_another_region():
    def program():
        west = aws.Provider("west", region="us-west-2")
        ClusterRef.from_existing("research", "us-east-1", opts=pulumi.ResourceOptions(provider=west))

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [str(p) for p in graph.error.problems] == [
        "ClusterRef.from_existing(research).region: the AWS provider in opts is for us-west-2, the component for "
        "us-east-1; pass a provider for the same region, or none"
    ]


def test_an_adopted_cluster_may_name_an_aws_provider_for_its_own_region():
    def program():
        east = aws.Provider("east", region="us-east-1")
        ClusterRef.from_existing("research", "us-east-1", opts=pulumi.ResourceOptions(provider=east))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    assert graph.one("pulumi:providers:kubernetes").provider == ""


def _cluster_args(region: str) -> EksClusterArgs:
    from eks_gpu_training import ClusterConfig, NetworkConfig, SubnetConfig, SystemNodeGroupConfig

    return EksClusterArgs(
        cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["192.0.2.0/24"]),
        network=NetworkConfig(
            vpc_id="vpc-0123456789abcdef0",
            subnets=[
                SubnetConfig(id="subnet-0123456789abcdef0", availability_zone=f"{region}a"),
                SubnetConfig(id="subnet-0123456789abcdef1", availability_zone=f"{region}b"),
            ],
        ),
        system_node_group=SystemNodeGroupConfig(),
        region=region,
        partition="aws",
    )


def test_refuses_a_created_cluster_under_an_aws_provider_for_another_region():
    def program():
        west = aws.Provider("west", region="us-west-2")
        EksCluster("c", _cluster_args("us-east-1"), opts=pulumi.ResourceOptions(providers={"aws": west}))

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["EksCluster(c).region"]


def test_a_created_cluster_uses_the_aws_provider_it_is_given_for_its_region():
    def program():
        east = aws.Provider("east", region="us-east-1")
        EksCluster("c", _cluster_args("us-east-1"), opts=pulumi.ResourceOptions(providers={"aws": east}))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    east = graph.one("pulumi:providers:aws")
    assert graph.one("eks:index:Cluster").providers["aws"].startswith(east.urn)
    assert {r.inputs["region"] for r in regional(graph)} == {"us-east-1"}


def test_refuses_a_ref_whose_region_is_not_where_its_default_provider_put_the_cluster():
    def program():
        cluster = eks.Cluster("research", name="research", skip_default_node_group=True)
        ClusterRef.from_eks_cluster(cluster, region="us-east-1")

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["ClusterRef.from_eks_cluster.region"]
    assert "aws:region us-west-2, not us-east-1" in str(graph.error)


def test_a_ref_of_a_cluster_made_with_a_provider_for_its_region_is_accepted():
    def program():
        east = aws.Provider("east", region="us-east-1")
        cluster = eks.Cluster("research", name="research", opts=pulumi.ResourceOptions(providers={"aws": east}))
        ClusterRef.from_eks_cluster(cluster, region="us-east-1")

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)


@pytest.mark.parametrize(
    ("region", "provider_region", "refused"),
    [("us-east-1", "us-west-2", True), ("us-east-1", "us-east-1", False), ("us-east-1", None, False), ("us-east-1", "", False)],
)
def test_provider_region_problem_only_for_a_known_other_region(region, provider_region, refused):
    assert (provider_region_problem(region, provider_region, "x.region") is not None) is refused


def test_pulumi_up_shows_a_provider_region_mismatch_as_its_message_not_a_traceback():
    from tests.support.harness import refusal_text

    def program():
        west = aws.Provider("west", region="us-west-2")
        ClusterRef.from_existing("research", "us-east-1", opts=pulumi.ResourceOptions(provider=west))

    shown = refusal_text(run_program(program, STACK).error)
    assert "Traceback" not in shown
    assert shown.endswith("ClusterRef.from_existing(research).region: the AWS provider in opts is for us-west-2, the component for "
                          "us-east-1; pass a provider for the same region, or none")


def test_refuses_a_component_given_an_aws_provider_for_another_region_than_its_clusters():
    from eks_gpu_training import EfaDevicePlugin
    from tests.support.harness import stand_in_ref

    def program():
        west = aws.Provider("west", region="us-west-2")
        EfaDevicePlugin("efa", cluster=stand_in_ref("us-east-1"), opts=pulumi.ResourceOptions(providers={"aws": west}))

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["EfaDevicePlugin(efa).opts"]


def test_a_component_may_be_given_an_aws_provider_for_its_clusters_region():
    from eks_gpu_training import GpuNodeGroup, GpuNodeGroupConfig
    from tests.support.harness import research_cluster

    def program():
        west = aws.Provider("west", region="us-west-2")
        network = _cluster_args("us-west-2").network
        GpuNodeGroup("h100", cluster=research_cluster(network), pool=GpuNodeGroupConfig(name="h100", availability_zone="us-west-2a"),
                     opts=pulumi.ResourceOptions(providers={"aws": west}))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    west = graph.one("pulumi:providers:aws")
    pool = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert pool.provider.startswith(west.urn)
    assert pool.inputs["region"] == "us-west-2"


CARRIED = {
    "aws:profile": "training",
    "aws:assumeRoles": [{"roleArn": "arn:aws:iam::444455556666:role/deployer", "sessionName": "pulumi"}],
    "aws:defaultTags": {"tags": {"team": "ml-platform"}},
}
"""The stack's AWS settings a regional provider made by the library must carry over."""


def test_the_regional_provider_carries_the_stacks_profile_assumed_roles_and_default_tags():
    graph = run_example(page_examples("docs/library.md", "Examples")["Two fleets under your own component"],
                        config={**STACK, **CARRIED})
    assert graph.error is None, repr(graph.error)
    (provider,) = graph.of_type("pulumi:providers:aws")
    # pulumi-aws sends a provider's object settings as JSON.
    assert (provider.inputs["region"], provider.inputs["profile"]) == ("us-east-1", "training")
    assert json.loads(provider.inputs["assumeRoles"]) == CARRIED["aws:assumeRoles"]
    assert json.loads(provider.inputs["defaultTags"]) == CARRIED["aws:defaultTags"]


def test_a_carried_setting_pulumi_aws_would_not_take_is_refused_before_anything_registers():
    config = {**STACK, "aws:assumeRoles": [{"roleArn": "arn:aws:iam::444455556666:role/deployer", "sesionName": "pulumi"}],
              "aws:defaultTags": {"tag": {"team": "ml-platform"}}}
    graph = run_program(lambda: EksCluster("c", _cluster_args("us-east-1")), config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [str(p) for p in graph.error.problems] == [
        "aws:assumeRoles[0].sesionName: unknown key; allowed: duration, externalId, policy, policyArns, roleArn, "
        "sessionName, sourceIdentity, tags, transitiveTagKeys",
        "aws:defaultTags.tag: unknown key; allowed: tags",
    ]
