"""A worker mirrors its manager's queues: the same training namespaces, each in the ClusterQueue of
the same name (its team), with the same LocalQueues. Pools and quotas are each worker's own."""

from __future__ import annotations

from eks_gpu_training.platform.stack_files import locate_stack
from eks_gpu_training.workloads.multikueue_queues import FleetQueues, fleet_queues, queue_mismatch_problems
from tests.support.harness import PROJECT_ROOT


def stack_queues(stack: str) -> FleetQueues:
    return fleet_queues(locate_stack(stack, PROJECT_ROOT).platform_args())


def test_a_stack_with_teams_queues_each_namespace_in_its_teams_cluster_queue():
    assert stack_queues("dev").cluster_queue_of == {"training": "research", "evaluation": "evaluation"}
    assert stack_queues("dev").local_queues == ("gpu-queue", "gpu-queue-held")


def test_a_worker_from_the_same_stack_mirrors_its_manager():
    assert queue_mismatch_problems("multiKueue.workers[0]", "east", stack_queues("dev"), stack_queues("dev")) == []


def test_a_worker_with_more_namespaces_than_the_manager_still_mirrors_it():
    manager = FleetQueues({"training": "research"})
    assert queue_mismatch_problems("w", "east", manager, FleetQueues({"training": "research", "other": "other"})) == []


def test_refuses_a_worker_without_one_of_the_managers_namespaces():
    [problem] = queue_mismatch_problems("multiKueue.workers[1]", "east", stack_queues("dev"), FleetQueues({"training": "research"}))
    assert problem.path == "multiKueue.workers[1]"
    assert problem.message.startswith("worker east has no training namespace evaluation")


def test_refuses_a_worker_that_queues_a_namespace_under_another_team():
    [problem] = queue_mismatch_problems("w", "east", FleetQueues({"training": "research"}), FleetQueues({"training": "training"}))
    assert "queues namespace training in ClusterQueue 'training', the manager in 'research'" in problem.message


def test_refuses_a_worker_without_the_managers_local_queues():
    [problem] = queue_mismatch_problems("w", "east", FleetQueues({"training": "t"}), FleetQueues({"training": "t"}, ("gpu-queue",)))
    assert "no LocalQueue gpu-queue-held" in problem.message
