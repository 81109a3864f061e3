"""__main__.py reads the stack configuration and refuses a bad one before registering anything."""

from __future__ import annotations

import pytest

from eks_gpu_training import ConfigError
from tests.support.harness import run_main, stack_config

PROJECT = "eks-gpu-training"


def test_invalid_stack_config_registers_nothing_and_names_each_key():
    config = stack_config("prod")
    config[f"{PROJECT}:gpuNodeGroups"] = [
        {**config[f"{PROJECT}:gpuNodeGroups"][0], "instanceTypes": ["p5.48xlarge", "p5.48xl"], "capacityType": "SPOT"}
    ]
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    message = str(graph.error)
    assert "gpuNodeGroups[0].instanceTypes[1]: 'p5.48xl' is not an EC2 instance type" in message
    assert "gpuNodeGroups[0].capacityType: SPOT is refused for training pools" in message


def test_cross_key_problem_registers_nothing():
    config = stack_config("prod")
    config[f"{PROJECT}:gpuNodeGroups"][0] = {**config[f"{PROJECT}:gpuNodeGroups"][0], "availabilityZone": "us-west-2d"}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert "gpuNodeGroups[0].availabilityZone: 'us-west-2d' has no subnet" in str(graph.error)
    assert graph.resources == []


def test_region_comes_from_aws_region_and_is_required():
    config = stack_config("dev")
    del config["aws:region"]
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert "aws:region: is required" in str(graph.error)
    assert graph.resources == []


def test_region_in_the_project_namespace_is_refused():
    config = {**stack_config("dev"), f"{PROJECT}:region": "us-east-1"}
    graph = run_main(config)
    assert "eks-gpu-training:region: set the region with aws:region" in str(graph.error)


def test_unknown_project_key_is_reported_with_the_allowed_keys():
    config = {**stack_config("dev"), f"{PROJECT}:gpuPool": {"name": "x"}}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert "gpuPool: unknown key; allowed:" in str(graph.error)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_preview_runs_too(stack):
    assert run_main(stack_config(stack), preview=True).error is None
