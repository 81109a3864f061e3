"""`fastImagePull` (nodeadm's FastImagePull feature gate): where it is allowed, and the problems
that refuse it where it would slow pulls, reported with every other problem before any resource."""

from __future__ import annotations

from typing import Any

import pytest

from eks_gpu_training import ConfigError, GpuNodeGroup, GpuNodeGroupArgs
from eks_gpu_training.config import GpuNodeGroupConfig
from eks_gpu_training.config.image_pull import (
    FAST_IMAGE_PULL_MIN_THROUGHPUT_MIBPS,
    GP3_THROUGHPUT_MIBPS,
    check_fast_image_pull,
    has_instance_store_array,
)
from eks_gpu_training.platform import parse_platform_args
from tests.support.harness import run_program, stack_config, stand_in_ref
from tests.support.builders import NETWORK, valid_config

THROUGHPUT_REFUSAL = (
    "would slow image pulls: AWS finds them slower with it below 600 MiB/s of root-volume throughput, the root "
    "volume has 250 MiB/s, and the instance-store RAID0 array is off (storage.instanceStore: none)"
)


def fast_config(**stack: Any) -> dict[str, Any]:
    config = valid_config()
    config["gpuNodeGroups"][0]["fastImagePull"] = True
    config["karpenter"] = {
        "enabled": True,
        "gpuNodePools": [{"name": "burst", "availabilityZone": "us-west-2a", "fastImagePull": True}],
    }
    config.update(stack)
    return config


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(config)
    return [str(p) for p in error.value.problems]


def test_fast_image_pull_is_off_unless_a_pool_asks_for_it():
    args = parse_platform_args(valid_config())
    assert args.gpu_node_groups[0].fast_image_pull is False


def test_fast_image_pull_is_allowed_on_al2023_pools_whose_images_land_on_the_raid0_array():
    args = parse_platform_args(fast_config())
    assert args.storage.instance_store == "raid0"
    assert args.gpu_node_groups[0].fast_image_pull is True
    assert args.karpenter.gpu_node_pools[0].fast_image_pull is True


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_turn_it_on_for_every_gpu_pool_and_pass_the_rules(stack):
    raw = {key.split(":", 1)[1]: value for key, value in stack_config(stack).items() if key.startswith("eks-gpu-training:")}
    raw["region"] = stack_config(stack)["aws:region"]
    args = parse_platform_args(raw)
    pools = list(args.gpu_node_groups) + list(args.karpenter.gpu_node_pools)
    assert pools
    assert all(pool.fast_image_pull for pool in pools)
    assert all(has_instance_store_array(pool.instance_types, args.storage.instance_store == "raid0") for pool in pools)


def test_refused_without_the_instance_store_array_because_the_root_volume_is_under_600_mibps():
    assert GP3_THROUGHPUT_MIBPS < FAST_IMAGE_PULL_MIN_THROUGHPUT_MIBPS
    problems = problems_of(fast_config(storage={"instanceStore": "none"}))
    assert [p for p in problems if "fastImagePull" in p] == [
        f"gpuNodeGroups[0].fastImagePull: {THROUGHPUT_REFUSAL}; allowed with storage.instanceStore: raid0 on instance "
        "types that have instance-store NVMe, else set fastImagePull: false",
        f"karpenter.gpuNodePools[0].fastImagePull: {THROUGHPUT_REFUSAL}; allowed with storage.instanceStore: raid0 on "
        "instance types that have instance-store NVMe, else set fastImagePull: false",
    ]


def test_refused_on_bottlerocket_which_has_no_nodeadm():
    config = fast_config()
    config["gpuNodeGroups"][0]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    config["karpenter"]["enabled"] = False
    del config["karpenter"]["gpuNodePools"]
    assert problems_of(config) == [
        "gpuNodeGroups[0].fastImagePull: needs an Amazon Linux 2023 AMI: it is nodeadm's FastImagePull feature gate, "
        "and 'BOTTLEROCKET_x86_64_NVIDIA' has no nodeadm (Bottlerocket configures its snapshotter through its own "
        "settings); use amiType AL2023_x86_64_NVIDIA, or fastImagePull: false"
    ]


def test_refusals_come_together_with_the_other_problems_of_the_stack():
    config = fast_config(storage={"instanceStore": "none"})
    config["gpuNodeGroups"][0]["minSize"] = 3  # above maxSize 2
    problems = problems_of(config)
    assert "gpuNodeGroups[0].minSize: must not exceed maxSize (2)" in problems
    assert sum("fastImagePull" in p for p in problems) == 2


def test_instance_types_without_instance_store_get_no_array_even_with_raid0():
    found: list[tuple[str, str]] = []
    check_fast_image_pull(True, "AL2023_x86_64_NVIDIA", ["p5.48xlarge", "m7i.large"], True, lambda key, message: found.append((key, message)))
    assert has_instance_store_array(["p5.48xlarge"], True)
    assert not has_instance_store_array(["p5.48xlarge", "m7i.large"], True)
    assert [key for key, _ in found] == ["fastImagePull"]
    assert "m7i.large has no instance-store NVMe" in found[0][1]


def test_off_is_never_a_problem_whatever_the_os_or_storage():
    found: list[tuple[str, str]] = []
    check_fast_image_pull(False, "BOTTLEROCKET_x86_64_NVIDIA", ["p5.48xlarge"], False, lambda key, message: found.append((key, message)))
    assert found == []


def test_the_node_group_component_refuses_it_without_the_array_before_registering_anything():
    pool = GpuNodeGroupConfig.model_validate({"name": "train", "availabilityZone": "us-west-2a", "fastImagePull": True})

    def program():
        GpuNodeGroup("train", GpuNodeGroupArgs(cluster=stand_in_ref(), pool=pool, network=NETWORK, instance_store_raid0=False))

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert f"GpuNodeGroup(train).fastImagePull: {THROUGHPUT_REFUSAL}" in str(graph.error)
    assert graph.resources == []
