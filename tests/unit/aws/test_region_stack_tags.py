"""Every AWS resource that takes tags carries the stack's tags."""

from __future__ import annotations

import functools
import importlib
import inspect

from tests.support.harness import stack_config


@functools.cache
def accepts_tags(type_token: str) -> bool:
    """Whether the resource type's input schema has ``tags``, read from its Python SDK class
    (``aws:ec2/securityGroup:SecurityGroup`` is ``pulumi_aws.ec2.SecurityGroup``)."""
    package, module, name = type_token.split(":")
    sdk = importlib.import_module(f"pulumi_{package.replace('-', '_')}")
    namespace = getattr(sdk, module.split("/")[0]) if module != "index" else sdk
    resource = getattr(namespace, name)
    return "tags" in inspect.signature(resource._internal_init).parameters


def test_the_schema_lookup_knows_taggable_from_untaggable_resources():
    assert accepts_tags("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert accepts_tags("eks:index:ManagedNodeGroup")
    assert not accepts_tags("aws:iam/rolePolicyAttachment:RolePolicyAttachment")


def test_every_taggable_aws_resource_carries_the_stack_tags(stack_graph):
    stack, graph = stack_graph
    tags = stack_config(stack)["eks-gpu-training:tags"]
    assert tags, f"stack {stack} sets no tags to check"
    created = [r for r in graph.resources if r.custom and not r.read and r.type.split(":")[0] in ("aws", "eks")]
    created += [r for r in graph.resources if r.remote and r.type.startswith("eks:")]
    taggable = [r for r in created if accepts_tags(r.type)]
    assert len(taggable) > 10
    untagged = [f"{r.type} {r.name}" for r in taggable if not tags.items() <= (r.inputs.get("tags") or {}).items()]
    assert untagged == []
