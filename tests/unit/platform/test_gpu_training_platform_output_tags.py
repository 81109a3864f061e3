"""The stack's ``tags`` given as one Output of a whole map (cost tags read from another stack) reach
every AWS resource the plain map reaches, with the same values; the created cluster keeps its
creator record, which an Output's keys could otherwise overwrite unseen."""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pytest

from eks_gpu_training.aws.cluster_access import CREATOR_TAG
from eks_gpu_training.offline.engine import stack_config
from eks_gpu_training.platform import GpuTrainingPlatform
from eks_gpu_training.platform.loading import platform_args_from_settings
from tests.support.harness import run_program


def tags_by_resource(stack: str, whole_map: bool, extra: Optional[dict[str, str]] = None) -> dict[tuple[str, str], Any]:
    """The ``tags`` input of each resource the platform registers for ``stack``'s file, its tags given
    as the file has them, or (``whole_map``) as one Output of that map with ``extra`` keys."""
    config = stack_config(stack)
    args = platform_args_from_settings(config)
    if whole_map:
        tags = {**args.tags, **(extra or {})}
        # An Output that resolves only during the run, as a StackReference's does.
        args = args.model_copy(update={"tags": pulumi.Output.from_input(stack).apply(lambda _: tags)})
    graph = run_program(lambda: GpuTrainingPlatform("gpu-training", args), {"aws:region": config["aws:region"]})
    assert graph.error is None, repr(graph.error)
    return {(r.type, r.name): r.inputs.get("tags") for r in graph.resources}


def tags_in_file(stack: str) -> dict[str, str]:
    return dict(platform_args_from_settings(stack_config(stack)).tags)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_an_output_of_the_whole_tag_map_tags_every_aws_resource_the_plain_map_does(stack):
    plain = tags_by_resource(stack, whole_map=False)
    assert tags_by_resource(stack, whole_map=True) == plain
    # An image's ``tags`` are its references, a list: AWS tags are a map.
    tagged = {token: tags for (token, _), tags in plain.items() if isinstance(tags, dict) and tags}
    assert all(tags_in_file(stack).items() <= tags.items() for tags in tagged.values())
    network = {"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/natGateway:NatGateway"} if stack == "dev" else set()
    storage = {"aws:fsx/lustreFileSystem:LustreFileSystem"} if stack == "prod" else set()
    assert {"eks:index:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role", "aws:sqs/queue:Queue",
            "aws:eks/accessEntry:AccessEntry", "aws:eks/addon:Addon", "aws:ecr/repository:Repository",
            "aws:eks/podIdentityAssociation:PodIdentityAssociation", *network, *storage} <= set(tagged)


def test_an_outputs_creator_tag_never_overwrites_the_clusters_record():
    output = tags_by_resource("prod", whole_map=True, extra={CREATOR_TAG: "arn:aws:iam::111122223333:role/someone-else"})
    [cluster] = [tags for (token, _), tags in output.items() if token == "eks:index:Cluster"]
    assert CREATOR_TAG not in cluster
    assert set(tags_in_file("prod")) <= set(cluster)
