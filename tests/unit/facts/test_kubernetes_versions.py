"""The Kubernetes versions a stack may run, the shipped default, and what each minor needs."""

from __future__ import annotations

from datetime import date

import pytest

from tests.support.harness import stack_config

from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS, ClusterConfig, ConfigError
from eks_gpu_training.facts.kubernetes_versions import DEFAULT_KUBERNETES_VERSION, EKS_KUBERNETES_VERSIONS
from eks_gpu_training.platform.loading import platform_args_from_settings


def test_every_supported_minor_has_a_row_saying_what_it_needs():
    assert SUPPORTED_KUBERNETES_VERSIONS == tuple(EKS_KUBERNETES_VERSIONS)
    assert all(row.needs for row in EKS_KUBERNETES_VERSIONS.values())


def test_the_default_is_1_35_released_on_eks_and_in_standard_support_past_1_34s_end():
    default = EKS_KUBERNETES_VERSIONS[DEFAULT_KUBERNETES_VERSION]
    assert DEFAULT_KUBERNETES_VERSION == ClusterConfig(name="x").kubernetes_version == "1.35"
    assert default.released == date(2026, 1, 28)
    assert default.end_of_standard_support == date(2027, 3, 27)
    assert EKS_KUBERNETES_VERSIONS["1.34"].end_of_standard_support == date(2026, 12, 2)


def test_a_minor_without_a_recorded_eks_release_is_never_the_default():
    unreleased = [v for v, row in EKS_KUBERNETES_VERSIONS.items() if row.released is None]
    assert DEFAULT_KUBERNETES_VERSION not in unreleased


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_stacks_run_the_default_version(stack):
    assert platform_args_from_settings(stack_config(stack)).cluster.kubernetes_version == DEFAULT_KUBERNETES_VERSION


def test_refuses_a_minor_out_of_eks_support():
    config = stack_config("dev")
    config["eks-gpu-training:cluster"] = {**config["eks-gpu-training:cluster"], "kubernetesVersion": "1.31"}
    with pytest.raises(ConfigError) as error:
        platform_args_from_settings(config)
    assert "cluster.kubernetesVersion: '1.31' is not supported; allowed: 1.32, 1.33, 1.34, 1.35, 1.36" in str(error.value)


def test_the_operations_guide_shows_the_version_table():
    from tests.support.harness import PROJECT_ROOT
    from eks_gpu_training.facts.kubernetes_versions import version_table

    assert version_table() in (PROJECT_ROOT / "docs" / "operations.md").read_text()
