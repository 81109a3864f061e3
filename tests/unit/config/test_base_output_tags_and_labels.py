"""Tags and labels take Outputs as values, like the IDs and names AWS and Kubernetes take as Inputs:
rules that need the value skip them; a wrong type is a ConfigError with its key path."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pytest

from eks_gpu_training import (
    ConfigError,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
    parse_platform_args,
)
from eks_gpu_training.config import validate_tags
from tests.support.harness import research_cluster, run_program, stand_in_ref, two_az_network

NETWORK = two_az_network()


def test_output_tag_and_label_values_reach_the_node_group():
    def program():
        # Any Output will do: here the name of a bucket made in the same program.
        owner = aws.s3.Bucket("owner").bucket
        pool = GpuNodeGroupConfig(
            name="h100", availability_zone="us-west-2a", labels={"example.com/owner": owner}, instance_tags={"owner": owner}
        )
        GpuNodeGroup("h100", cluster=research_cluster(NETWORK), pool=pool, tags={"owner": owner, "team": "ml"})

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    node_group = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert node_group.inputs["tags"] == {"owner": "owner-7g8h9i", "team": "ml"}
    assert node_group.inputs["labels"]["example.com/owner"] == "owner-7g8h9i"
    template = next(r for r in graph.of_type("aws:ec2/launchTemplate:LaunchTemplate") if r.name == "h100-launch-template")
    assert template.inputs["tagSpecifications"][0]["tags"]["owner"] == "owner-7g8h9i"
    assert graph.output_text() == []


def test_rules_on_tag_and_label_values_skip_outputs_and_still_check_text():
    unknown = pulumi.Output.from_input("x" * 300)
    assert validate_tags({"owner": unknown}) == []
    assert [p.path for p in validate_tags({"owner": "a,b"})] == ["tags.owner"]
    pool = GpuNodeGroupConfig(name="h100", availability_zone="us-west-2a", labels={"example.com/owner": unknown, "example.com/bad": "no spaces"})
    args = GpuNodeGroupArgs(cluster=stand_in_ref(), pool=pool, network=NETWORK)
    from eks_gpu_training.config import validate_gpu_node_group

    assert [str(p).split(":")[0] for p in validate_gpu_node_group(args.pool, NETWORK, "pool")] == ["pool.labels.example.com/bad"]


def test_stack_tags_take_output_values_in_a_program():
    args = parse_platform_args(
        {
            "region": "us-west-2",
            "cluster": {"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
            "network": {"vpcId": NETWORK.vpc_id, "subnets": [{"id": s.id, "availabilityZone": s.availability_zone} for s in NETWORK.subnets]},
            "tags": {"owner": pulumi.Output.from_input("ml-platform")},
        }
    )
    assert isinstance(args.tags["owner"], pulumi.Output)


def test_refuses_a_tag_value_that_is_neither_text_nor_an_output():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupConfig(name="h100", labels={"example.com/owner": 7})
    assert [str(p) for p in raised.value.problems] == ["GpuNodeGroupConfig.labels.example.com/owner: must be a string or a pulumi.Output, not int"]


def test_an_output_of_a_whole_tag_map_reaches_every_aws_resource_of_a_pool():
    """Cost tags read from another stack come as one Output of a map, as pulumi-aws takes them; its
    keys are not known before deployment, so only AWS checks them."""

    def program():
        tags = aws.s3.Bucket("owner").bucket.apply(lambda owner: {"owner": owner, "team": "ml"})
        GpuNodeGroup("h100", cluster=research_cluster(NETWORK), pool=GpuNodeGroupConfig(name="h100", availability_zone="us-west-2a"),
                     tags=tags)

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    expected = {"owner": "owner-7g8h9i", "team": "ml"}
    node_group = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert node_group.inputs["tags"] == expected
    assert graph.one("aws:iam/role:Role", "h100-node-role").inputs["tags"] == expected
    assert graph.one("aws:ec2/launchTemplate:LaunchTemplate", "h100-launch-template").inputs["tags"] == expected


def test_an_output_of_a_whole_tag_map_skips_the_tag_rules():
    assert validate_tags(pulumi.Output.from_input({"aws:reserved": "x"})) == []


def test_a_node_group_takes_output_sizes_and_skips_the_size_rules_for_them():
    def program():
        # Any Output will do: here a count that waits for a bucket made in the same program.
        size = aws.s3.Bucket("sizes").bucket.apply(lambda _: 4)
        pool = GpuNodeGroupConfig(name="h100", availability_zone="us-west-2a", min_size=1, desired_size=size, max_size=size)
        GpuNodeGroup("h100", cluster=research_cluster(NETWORK), pool=pool)

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    node_group = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    scaling = node_group.inputs["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (1, 4, 4)
    assert graph.depends_on(node_group, graph.one("aws:s3/bucket:Bucket"))


def test_known_sizes_are_still_checked_beside_the_output_fields():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupConfig(name="h100", min_size=-1)
    assert [str(p) for p in raised.value.problems] == ["GpuNodeGroupConfig.min_size: Input should be greater than or equal to 0"]
    from eks_gpu_training.config import validate_gpu_node_group

    pool = GpuNodeGroupConfig(name="h100", availability_zone="us-west-2a", min_size=3, max_size=2)
    assert [str(p).split(":")[0] for p in validate_gpu_node_group(pool, NETWORK, "pool")] == ["pool.minSize"]


def test_the_platform_refuses_output_sizes_naming_the_key():
    with pytest.raises(ConfigError) as raised:
        parse_platform_args(
            {
                "region": "us-west-2",
                "cluster": {"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
                "network": {"vpcId": NETWORK.vpc_id, "subnets": [{"id": s.id, "availabilityZone": s.availability_zone} for s in NETWORK.subnets]},
                "gpuNodeGroups": [{"name": "h100", "availabilityZone": "us-west-2a", "maxSize": pulumi.Output.from_input(4)}],
            }
        )
    assert [p.path for p in raised.value.problems] == ["gpuNodeGroups[0].maxSize"]


def _stack_keys(**keys):
    return {
        "region": "us-west-2",
        "cluster": {"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
        "network": {"vpcId": NETWORK.vpc_id, "subnets": [{"id": s.id, "availabilityZone": s.availability_zone} for s in NETWORK.subnets]},
        **keys,
    }


def test_stack_tags_take_an_output_of_a_whole_map_whose_keys_only_aws_checks():
    cost_tags = pulumi.Output.from_input({"karpenter.sh/nodepool": "x", "aws:reserved": "y"})
    args = parse_platform_args(_stack_keys(tags=cost_tags, karpenter={"enabled": True}))
    assert args.tags is cost_tags


def test_refuses_stack_tags_that_are_neither_a_map_nor_an_output():
    with pytest.raises(ConfigError) as raised:
        parse_platform_args(_stack_keys(tags="team=ml"))
    assert [str(p) for p in raised.value.problems] == ["tags: must be a dict of tag -> value or a pulumi.Output of one, not str"]
    with pytest.raises(ConfigError) as raised:
        parse_platform_args(_stack_keys(tags={"team": 7}))
    assert [p.path for p in raised.value.problems] == ["tags.team"]


def test_an_output_where_a_key_takes_none_is_refused_saying_why():
    from eks_gpu_training.config.arguments import OUTPUT_REFUSED

    with pytest.raises(ConfigError) as raised:
        parse_platform_args(_stack_keys(gpuNodeGroups=[{"name": "h100", "instanceTypes": [pulumi.Output.from_input("p5.48xlarge")]}]))
    assert [(p.path, p.message) for p in raised.value.problems] == [("gpuNodeGroups[0].instanceTypes[0]", OUTPUT_REFUSED)]
    assert "known only at deployment, but this key is read before anything is created" in OUTPUT_REFUSED


def test_an_output_of_a_whole_configuration_is_refused_saying_why():
    from eks_gpu_training.config.arguments import as_model

    with pytest.raises(ConfigError) as raised:
        as_model(pulumi.Output.from_input({"name": "h100"}), GpuNodeGroupConfig, "GpuNodeGroupArgs.pool")
    assert [str(p) for p in raised.value.problems] == [
        "GpuNodeGroupArgs.pool: is an Output, known only at deployment, but its keys are checked and used before anything "
        "is created; give a GpuNodeGroupConfig (or a dict of its keys)"
    ]
