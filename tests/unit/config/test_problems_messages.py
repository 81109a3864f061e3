"""Under `pulumi up`, a refusal reaches the user as its message, not as a Python traceback: the
program raises a ``pulumi.RunError``, which Pulumi's Python language host shows as ``str(error)``
(the real host, CLI and provider show one in ``tests/cluster/test_engine_in_cluster.py``)."""

from __future__ import annotations

import pulumi
import pytest

from eks_gpu_training import ConfigError, GpuNodeGroup, GpuNodeGroupArgs, Problem
from eks_gpu_training.config import GpuNodeGroupConfig, NetworkConfig
from tests.support.harness import research_cluster, run_main, run_program, stack_config
from tests.support.harness import refusal_text

NETWORK = NetworkConfig(
    vpc_id="vpc-0123456789abcdef0",
    subnets=[
        {"id": "subnet-0000000000000000a", "availability_zone": "us-west-2a"},
        {"id": "subnet-0000000000000000b", "availability_zone": "us-west-2b"},
    ],
)


def test_config_error_is_a_run_error_and_still_a_value_error():
    assert issubclass(ConfigError, pulumi.RunError)
    assert issubclass(ConfigError, ValueError)


def test_config_error_is_an_input_properties_error_with_every_problems_path_and_reason():
    error = ConfigError([
        Problem("gpuNodeGroups[1].instanceTypes[0]", "'p9.48xlarge' is not a GPU instance type"),
        Problem("tags.team", "'a,b' has characters IAM refuses"),
    ])
    assert isinstance(error, pulumi.InputPropertiesError)
    assert error.errors == [
        {"property_path": "gpuNodeGroups[1].instanceTypes[0]", "reason": "'p9.48xlarge' is not a GPU instance type"},
        {"property_path": "tags.team", "reason": "'a,b' has characters IAM refuses"},
    ]
    assert error.message == str(error) == (
        "invalid configuration (2 problems), rejected before registering any resource:\n"
        "  - gpuNodeGroups[1].instanceTypes[0]: 'p9.48xlarge' is not a GPU instance type\n"
        "  - tags.team: 'a,b' has characters IAM refuses"
    )


def test_a_refused_stack_files_errors_are_its_problems_as_property_paths_and_reasons():
    config = stack_config("dev")
    config["eks-gpu-training:tags"] = {"team": "ml,platform", "owner": "ml;platform"}
    error = run_main(config).error
    assert isinstance(error, ConfigError)
    assert len(error.problems) == 2
    assert error.errors == [{"property_path": p.path, "reason": p.message} for p in error.problems]
    assert {e["property_path"] for e in error.errors} == {"tags.team", "tags.owner"}


def test_a_component_refusals_errors_name_the_components_key_paths():
    with pytest.raises(pulumi.InputPropertiesError) as raised:
        GpuNodeGroup("h100", cluster=None, pools=[])
    assert raised.value.errors == [
        {"property_path": "GpuNodeGroup(h100).pools",
         "reason": "unknown argument; allowed: cluster, pool, network, tags, protect, instance_store_raid0, health_gate"},
        {"property_path": "GpuNodeGroup(h100).pool", "reason": "is required"},
    ]


def test_a_refused_stack_file_shows_only_its_problems():
    config = stack_config("dev")
    config["eks-gpu-training:tags"] = {"team": "ml,platform"}
    graph = run_main(config)
    shown = refusal_text(graph.error)
    assert graph.resources == []
    assert shown.startswith("invalid configuration (1 problem), rejected before registering any resource:\n  - tags.team: ")
    assert "Traceback" not in shown
    assert "File \"" not in shown


def test_a_component_refusal_in_another_program_shows_only_its_problems():
    def program():
        cluster = research_cluster(NETWORK)
        pool = GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], labels={"node-role.kubernetes.io/gpu": ""})
        GpuNodeGroup("h100", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK))

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert not [r for r in graph.resources if r.name.startswith("h100")]
    shown = refusal_text(graph.error)
    assert "  - GpuNodeGroup(h100).labels.node-role.kubernetes.io/gpu: is in the kubernetes.io/k8s.io namespaces" in shown
    assert "Traceback" not in shown


def test_a_training_job_with_an_upper_case_image_is_refused_from_another_program():
    from eks_gpu_training import TrainingJob, TrainingJobArgs
    from eks_gpu_training.workloads.templates import TrainingJobSpec

    spec = TrainingJobSpec(
        name="rl", nodes=1, instance_types=("g6e.xlarge",), priority_class="high", namespace="training",
        image="ghcr.io/Acme/train:1.0",
    )
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=spec)))
    assert graph.resources == []
    shown = refusal_text(graph.error)
    assert "  - TrainingJob(rl).job.image: 'ghcr.io/Acme/train:1.0' is not an image reference" in shown
    assert "Traceback" not in shown


def test_a_smoke_test_with_a_truncated_digest_is_refused_from_another_program():
    from eks_gpu_training.workloads.gpu_smoke_test import GpuSmokeTest, GpuSmokeTestArgs, SmokeTestPool

    args = GpuSmokeTestArgs(pools=[SmokeTestPool("p5", 1, 8)], namespace="training", image="nvcr.io/nvidia/cuda@sha256:12ab", timeout_minutes=5)
    graph = run_program(lambda: GpuSmokeTest("smoke", args))
    assert graph.resources == []
    assert "  - GpuSmokeTest(smoke).image: 'nvcr.io/nvidia/cuda@sha256:12ab' is not an image reference" in refusal_text(graph.error)


def test_a_gpu_node_group_with_a_comma_in_a_tag_is_refused_from_another_program():
    def program():
        cluster = research_cluster(NETWORK)
        pool = GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a")
        GpuNodeGroup("h100", GpuNodeGroupArgs(cluster=cluster.ref, pool=pool, network=NETWORK, tags={"team": "a,b"}))

    graph = run_program(program)
    assert not [r for r in graph.resources if r.name.startswith("h100")]
    assert "  - GpuNodeGroup(h100).tags.team: 'a,b' has characters IAM refuses" in refusal_text(graph.error)
