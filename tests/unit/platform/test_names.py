"""The AWS names the platform generates: the validation's list is what the program registers, and
names over AWS's limits are refused before anything is registered."""

from __future__ import annotations

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.facts.aws_names import AUTONAME_SUFFIX_LENGTH, NAME_LIMITS, PhysicalName
from eks_gpu_training.platform import PLATFORM_NAME, generated_names, parse_platform_args
from eks_gpu_training.platform.loading import platform_args_from_settings
from tests.support.harness import run_program, stack_config
from tests.support.builders import valid_config


def registered_names(graph) -> set[tuple[str, str, bool, bool]]:
    """(type, name, auto-named, name prefix) of every registered resource whose AWS name has a limit."""
    names = set()
    for resource in graph.resources:
        if resource.type not in NAME_LIMITS or resource.read:
            continue
        prefix = resource.inputs.get("nodeGroupNamePrefix")
        explicit = resource.inputs.get("nodeGroupName") or resource.inputs.get("name")
        if prefix is not None:
            names.add((resource.type, prefix, False, True))
        else:
            names.add((resource.type, explicit or resource.name, explicit is None, False))
    return names


def predicted_names(stack: str) -> set[tuple[str, str, bool, bool]]:
    args = platform_args_from_settings(stack_config(stack))
    return {(n.resource_type, n.name, n.autonamed, n.prefix) for _, n in generated_names(args, PLATFORM_NAME)}


def test_validation_names_exactly_what_the_prod_stack_registers(prod_graph):
    assert predicted_names("prod") == registered_names(prod_graph)


def test_validation_names_exactly_what_the_dev_stack_registers(dev_graph):
    assert predicted_names("dev") == registered_names(dev_graph)


def test_autonamed_length_counts_pulumis_suffix():
    assert AUTONAME_SUFFIX_LENGTH == len("-") + 7
    role = PhysicalName("aws:iam/role:Role", "x" * 56, autonamed=True)
    assert role.length == 64
    assert role.problem() is None
    longer = PhysicalName("aws:iam/role:Role", "x" * 57, autonamed=True)
    assert "65 characters, 8 of them Pulumi's random suffix, over AWS's limit of 64" in longer.problem()


def test_a_38_character_pool_name_is_refused_for_its_node_role():
    config = valid_config()
    config["gpuNodeGroups"][0]["name"] = "a" * 38
    with pytest.raises(ConfigError) as error:
        parse_platform_args(config)
    message = str(error.value)
    assert f"gpuNodeGroups[0].name: makes the IAM role name (botocore iam roleNameType) 'gpu-training-{'a' * 38}-node-role-xxxxxxx': 69 characters" in message
    assert "shorten it by 5 characters" in message


def test_a_pool_name_beyond_the_node_group_prefix_limit_is_refused():
    # EKS node group names are the pool's prefix plus a 26-character unique suffix: 63 at most.
    name = PhysicalName("aws:eks/nodeGroup:NodeGroup", "p" * 37 + "-", autonamed=False, prefix=True)
    assert name.length == 64
    assert "plus a 26-character unique suffix: 64 characters, over AWS's limit of 63" in name.problem()


def test_the_longest_pool_name_the_node_role_allows_is_accepted():
    config = valid_config()
    config["gpuNodeGroups"][0]["name"] = "a" * (64 - AUTONAME_SUFFIX_LENGTH - len("gpu-training--node-role"))
    parse_platform_args(config)


def test_a_platform_name_of_a_usual_length_leaves_room_for_every_karpenter_name():
    from eks_gpu_training import GpuTrainingPlatform

    args = parse_platform_args({**valid_config(), "karpenter": {"enabled": True}})
    graph = run_program(lambda: GpuTrainingPlatform("research-gpu-platform", args))
    assert graph.error is None, repr(graph.error)


def test_a_long_platform_name_in_another_program_is_refused_before_registering():
    from eks_gpu_training import GpuTrainingPlatform

    args = parse_platform_args({**valid_config(), "karpenter": {"enabled": True}})
    graph = run_program(lambda: GpuTrainingPlatform("research-gpu-training-platform-eu", args))
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert "GpuTrainingPlatform(research-gpu-training-platform-eu): makes the IAM role name" in str(graph.error)
