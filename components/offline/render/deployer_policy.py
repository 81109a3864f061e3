"""``deployer-policy.json``: the IAM policy the principal running `pulumi preview` and `pulumi up`
needs for a stack, from what the stack's program registers and reads (``facts.deployer_actions``).

One statement each for: the preview's live reads; the create, read, update, tag and delete of each
AWS resource type the graph holds (the children of pulumi-eks's cluster included); the ECR push of
each image the stack builds (none when it builds none); ``iam:PassRole`` on the stack's own roles,
by name, for the services they are handed to; and ``iam:CreateServiceLinkedRole`` for the
service-linked roles its services create at their first use in an account. The Kubernetes objects
need no IAM action: the deployer reaches the cluster through its EKS access entry.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ...facts.aws_enums import partition_of
from ...facts.deployer_actions import (
    READ_ACTIONS,
    REMOTE_CHILDREN,
    REMOTE_READS,
    REMOTE_ROLES,
    RESOURCE_ACTIONS,
    ROLE_PASSING_TYPES,
    SERVICE_LINKED_ROLES,
)
from .registrations import Resource, StackRender

POLICY_FILE = "deployer-policy.json"
"""The file a render writes the policy to."""

IMAGE_TYPE = "docker-build:index:Image"
"""An image the stack builds and pushes to its ECR repository."""
ROLE_TYPE = "aws:iam/role:Role"


def resource_types(render: StackRender) -> set[str]:
    """Every resource type the stack registers, with those multi-language components register."""
    types = {resource.type for resource in render.resources}
    for remote in types & REMOTE_CHILDREN.keys():
        types.update(REMOTE_CHILDREN[remote])
    return types


def _role_names(resources: list[Resource]) -> list[str]:
    """The stack's IAM roles as name patterns: a given name, else the resource name Pulumi's
    auto-naming extends with a random suffix."""
    names = set()
    for resource in resources:
        if resource.type == ROLE_TYPE:
            given = resource.inputs.get("name")
            names.add(given if isinstance(given, str) and not given.startswith("<") else f"{resource.name}-*")
        for pattern in REMOTE_ROLES.get(resource.type, ()):
            names.add(pattern.format(name=resource.name) + "-*")
    return sorted(names)


def _actions(tokens: Iterable[str], table: Mapping[str, tuple[str, ...]]) -> list[str]:
    return sorted({action for token in tokens for action in table.get(token, ())})


def deployer_policy(render: StackRender) -> dict[str, Any]:
    """The IAM policy document a deployer of the rendered stack needs."""
    types = resource_types(render)
    reads = set(render.reads)
    for remote in types & REMOTE_READS.keys():
        reads.update(REMOTE_READS[remote])
    statements: list[dict[str, Any]] = [
        {"Sid": "PreviewReads", "Effect": "Allow", "Action": _actions(reads, READ_ACTIONS), "Resource": "*"},
        {
            "Sid": "ManageStackResources",
            "Effect": "Allow",
            "Action": _actions(types - {IMAGE_TYPE}, RESOURCE_ACTIONS),
            "Resource": "*",
        },
    ]
    if IMAGE_TYPE in types:
        statements.append({"Sid": "PushBuiltImages", "Effect": "Allow", "Action": list(RESOURCE_ACTIONS[IMAGE_TYPE]), "Resource": "*"})
    roles = _role_names(render.resources)
    if roles and types & ROLE_PASSING_TYPES.keys():
        partition = partition_of(render.region)
        statements.append({
            "Sid": "PassStackRoles",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": [f"arn:{partition}:iam::*:role/{name}" for name in roles],
        })
    services = sorted({service for token in types for service in SERVICE_LINKED_ROLES.get(token, ())})
    if services:
        statements.append({
            "Sid": "CreateServiceLinkedRoles",
            "Effect": "Allow",
            "Action": "iam:CreateServiceLinkedRole",
            "Resource": "*",
            "Condition": {"StringEquals": {"iam:AWSServiceName": services}},
        })
    return {"Version": "2012-10-17", "Statement": [s for s in statements if s["Action"]]}


def policy_actions(policy: dict[str, Any]) -> set[str]:
    """Every action a policy document allows."""
    actions: set[str] = set()
    for statement in policy["Statement"]:
        named = statement["Action"]
        actions.update([named] if isinstance(named, str) else named)
    return actions


def policy_text(render: StackRender) -> str:
    """``deployer_policy`` as the file holds it."""
    return json.dumps(deployer_policy(render), indent=2) + "\n"
