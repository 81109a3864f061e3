"""MultiKueue's own rules: a manager names its workers, each once, each by stack or by cluster and
region; both roles need Kueue. Plain validation, no engine."""

from __future__ import annotations

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.config.multikueue import MultiKueueFleetConfig, validate_multikueue


def problems(kueue_enabled: bool = True, **fleet) -> dict[str, str]:
    found = validate_multikueue(MultiKueueFleetConfig.model_validate(fleet), kueue_enabled=kueue_enabled)
    return {p.path: p.message for p in found}


def test_a_manager_with_workers_by_stack_and_by_cluster_passes():
    assert problems(manager=True, workers=[{"name": "east", "stack": "acme/eks-gpu-training/east"},
                                           {"name": "west", "clusterName": "gpu-training-west", "region": "us-west-2"}]) == {}


def test_a_stack_that_is_both_manager_and_worker_passes():
    assert problems(manager=True, worker=True, workers=[{"name": "east", "stack": "east"}]) == {}


def test_refuses_a_manager_with_no_worker():
    assert "at least one worker" in problems(manager=True)["multiKueue.workers"]


def test_refuses_workers_on_a_stack_that_is_no_manager():
    assert "set multiKueue.manager: true" in problems(workers=[{"name": "east", "stack": "east"}])["multiKueue.workers"]


def test_refuses_a_worker_named_twice_by_name_and_by_cluster():
    found = problems(manager=True, workers=[
        {"name": "east", "stack": "acme/p/east"},
        {"name": "east", "clusterName": "c", "region": "us-east-1"},
        {"name": "east-2", "clusterName": "c", "region": "us-east-1"},
        {"name": "east-3", "stack": "acme/p/east"},
    ])
    assert "is workers[0]'s name too" in found["multiKueue.workers[1].name"]
    assert found["multiKueue.workers[2]"].startswith("cluster c in us-east-1 is workers[1] too")
    assert found["multiKueue.workers[3]"].startswith("stack acme/p/east is workers[0] too")


def test_the_same_cluster_name_in_two_regions_is_two_workers():
    assert problems(manager=True, workers=[{"name": "a", "clusterName": "c", "region": "us-east-1"},
                                           {"name": "b", "clusterName": "c", "region": "us-west-2"}]) == {}


@pytest.mark.parametrize(("worker", "path", "text"), [
    ({"name": "w"}, "multiKueue.workers[0]", "names no cluster"),
    ({"name": "w", "stack": "s", "clusterName": "c", "region": "us-east-1"}, "multiKueue.workers[0]", "not both"),
    ({"name": "w", "clusterName": "c"}, "multiKueue.workers[0].region", "is required with clusterName"),
    ({"name": "w", "region": "us-east-1"}, "multiKueue.workers[0].clusterName", "is required with region"),
    ({"name": "w", "stack": "a/b/c/d"}, "multiKueue.workers[0].stack", "is not a stack name"),
    ({"name": "w", "clusterName": "c", "region": "us-east-9"}, "multiKueue.workers[0].region", "is not an AWS region"),
])
def test_refuses_a_worker_not_named_by_stack_or_by_cluster_and_region(worker, path, text):
    assert text in problems(manager=True, workers=[worker])[path]


def test_refuses_more_workers_than_one_multikueue_config_lists():
    workers = [{"name": f"w{i}", "stack": f"s{i}"} for i in range(21)]
    assert "at most 20" in problems(manager=True, workers=workers)["multiKueue.workers"]


@pytest.mark.parametrize("role", ["manager", "worker"])
def test_refuses_either_role_without_kueue(role):
    fleet = {role: True, **({"workers": [{"name": "w", "stack": "s"}]} if role == "manager" else {})}
    assert "kueue.enabled: true" in problems(kueue_enabled=False, **fleet)[f"multiKueue.{role}"]


def test_reports_every_problem_at_once():
    found = problems(kueue_enabled=False, manager=True, workers=[{"name": "w"}, {"name": "w", "stack": "s"}])
    assert set(found) == {"multiKueue.manager", "multiKueue.workers[0]", "multiKueue.workers[1].name"}


def test_a_worker_name_must_be_a_dns_label():
    with pytest.raises(ConfigError) as refused:
        MultiKueueFleetConfig(manager=True, workers=[{"name": "East_1", "stack": "s"}])
    assert any(p.path.endswith("workers[0].name") for p in refused.value.problems)
