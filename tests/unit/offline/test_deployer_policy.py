"""The deployer's IAM policy a render writes: every action an operation of botocore's service
models (or one IAM checks inside another call), every resource type the stacks register covered,
ECR push only for a stack that builds an image, PassRole only on the stack's own roles."""

from __future__ import annotations

import copy
import functools
import json

import botocore.session
import pytest
import yaml

from tests.support.harness import PROJECT_ROOT, stack_config, stack_file

from eks_gpu_training.facts.deployer_actions import (
    PERMISSION_ONLY_ACTIONS,
    READ_ACTIONS,
    RESOURCE_ACTIONS,
)
from eks_gpu_training.offline.render.__main__ import main as render_main
from eks_gpu_training.offline.render.deployer_policy import POLICY_FILE, deployer_policy, policy_actions
from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.platform.stack_files import stack_file_name

PUSH = set(RESOURCE_ACTIONS["docker-build:index:Image"]) | {"ecr:GetAuthorizationToken"}
MANAGED_POLICY_LIMIT = 6144
"""Characters of a customer managed policy, whitespace not counted (IAM User Guide, "IAM and AWS STS quotas")."""


@functools.cache
def operations_by_prefix() -> dict[str, set[str]]:
    """The operations of botocore's service models, by the IAM prefix of their service (its signing name)."""
    session = botocore.session.get_session()
    operations: dict[str, set[str]] = {}
    for service in session.get_available_services():
        model = session.get_service_model(service)
        prefix = model.metadata.get("signingName") or model.metadata["endpointPrefix"]
        operations.setdefault(prefix, set()).update(model.operation_names)
    return operations


def not_operations(actions) -> list[str]:
    def exists(action: str) -> bool:
        prefix, operation = action.split(":")
        return operation in operations_by_prefix().get(prefix, set())

    return sorted(a for a in actions if a not in PERMISSION_ONLY_ACTIONS and not exists(a))


@functools.cache
def rendered(stack: str):
    return render_stack(stack)


def render_changed(tmp_path, stack: str, **sections):
    """A render of ``stack`` with the given top-level sections of its configuration replaced."""
    config = yaml.safe_load(stack_file(stack, PROJECT_ROOT).read_text())
    config["config"].update({f"eks-gpu-training:{key}": value for key, value in sections.items()})
    path = tmp_path / stack_file_name(f"{stack}-changed")
    path.write_text(yaml.safe_dump(config))
    return render_stack(path.name, stack_path=path, project_root=PROJECT_ROOT)


def test_every_action_of_the_tables_is_an_operation_of_botocores_service_models():
    actions = {a for table in (RESOURCE_ACTIONS, READ_ACTIONS) for listed in table.values() for a in listed}
    assert not_operations(actions) == []
    assert not_operations({"iam:CreateServiceLinkedRole", "ecr:PutImage", "eks:CreateNodeGroup"}) == ["eks:CreateNodeGroup"]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_every_action_of_a_stacks_policy_exists_and_the_policy_fits_a_managed_policy(stack):
    policy = deployer_policy(rendered(stack))
    assert policy["Version"] == "2012-10-17"
    assert not_operations(policy_actions(policy)) == []
    assert len("".join(json.dumps(policy).split())) <= MANAGED_POLICY_LIMIT


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_every_aws_resource_type_a_stack_registers_has_its_actions(stack):
    types = {r.type for r in rendered(stack).resources}
    uncovered = {t for t in types if t.startswith(("aws:", "docker-build:")) and not t.startswith("aws:index/provider")}
    assert uncovered - RESOURCE_ACTIONS.keys() == set()


def test_prod_needs_its_preview_reads_its_pushes_its_roles_and_its_service_linked_roles():
    policy = deployer_policy(rendered("prod"))
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    reads = set(by_sid["PreviewReads"]["Action"])
    # The first preview from an assumed role reads that role; later ones read the running cluster.
    assert {"iam:GetRole", "eks:ListClusters", "eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup",
            "ec2:DescribeLaunchTemplateVersions"} <= reads
    # healthGate.efaLoopbackImage is in the deployer's ECR: read before anything registers.
    assert {"ecr:DescribeRepositories", "ecr:ListImages"} <= reads
    assert PUSH <= policy_actions(policy)  # the labeler and the gate are built
    assert "arn:aws:iam::*:role/gpu-training-p5-training-node-role-*" in by_sid["PassStackRoles"]["Resource"]
    assert "arn:aws:iam::*:role/gpu-training-cluster-eks-eksRole-role-*" in by_sid["PassStackRoles"]["Resource"]
    assert by_sid["CreateServiceLinkedRoles"]["Condition"] == {"StringEquals": {"iam:AWSServiceName": [
        "eks-nodegroup.amazonaws.com", "eks.amazonaws.com", "fsx.amazonaws.com", "s3.data-source.lustre.fsx.amazonaws.com"]}}


def test_a_stack_without_the_gate_or_the_labeler_needs_no_ecr_push(tmp_path):
    assert PUSH <= policy_actions(deployer_policy(rendered("dev")))  # dev builds both
    policy = deployer_policy(render_changed(tmp_path, "dev", healthGate={"enabled": False}, topologyLabeler={"enabled": False}))
    assert policy_actions(policy) & PUSH == set()
    assert "PushBuiltImages" not in {s["Sid"] for s in policy["Statement"]}


def test_prebuilt_images_need_no_ecr_push(tmp_path):
    digest = "sha256:" + "ab" * 32
    gate = {**stack_config("dev")["eks-gpu-training:healthGate"], "image": f"public.ecr.aws/example/health-gate@{digest}"}
    labeler = {"image": f"public.ecr.aws/example/topology-labeler@{digest}"}
    policy = deployer_policy(render_changed(tmp_path, "dev", healthGate=copy.deepcopy(gate), topologyLabeler=labeler))
    assert policy_actions(policy) & PUSH == set()


def test_the_render_command_writes_the_policy(tmp_path):
    assert render_main(["dev", str(tmp_path), "--no-picture", "--no-charts"]) == 0
    written = json.loads((tmp_path / POLICY_FILE).read_text())
    assert written == deployer_policy(rendered("dev"))
