"""The MultiKueue fleet the cluster tier's fleet modules start: a manager and two workers, three local
control planes on loopback, started and wired by ``eks-gpu-training-local fleet up``'s own code
(``local.local_fleet``). The workers come from the same stack with different pools: east has 8
dev-gpu nodes, west 16, and the manager their sum, whose quotas admit what the fleet could run but
whose nodes run nothing once its ClusterQueues dispatch. On every member research holds an eighth
of dev-gpu and evaluation the rest, neither borrowing: research has one GPU on east, two on west
and three on the manager.

The fixtures are module-scoped (the tier's conftest offers them): test_multikueue and
test_multikueue_200_jobs each start a fleet of their own, so the 200 jobs run beside the other
fleet tests, on another worker."""

from __future__ import annotations

from typing import Any

import pytest

from eks_gpu_training.local.local_fleet import LocalFleet

from tests.support import start_slots
from tests.support.clusters import RunningCluster, stack_variant
from tests.support.harness import PROJECT_ROOT

POOL = "dev-gpu"
WORKER_LOST_TIMEOUT_SECONDS = 30
"""The manager's ``multiKueue.workerLostTimeout`` here: half a minute instead of a quarter of an hour."""
STACK_NODES = 8
"""dev-gpu nodes (one GPU each) of the stack every member is sized from: research holds one, evaluation seven."""
WORKERS = {"east": 8, "west": 16}
"""Each worker's dev-gpu nodes; the manager gets their sum, and the teams' quotas follow each pool."""


def fleet_stack(config: dict[str, Any]) -> None:
    (pool,) = config["eks-gpu-training:gpuNodeGroups"]
    pool.update(minSize=STACK_NODES, desiredSize=STACK_NODES, maxSize=STACK_NODES)
    scheduling = config["eks-gpu-training:scheduling"]
    teams = {team["name"]: team for team in scheduling["teams"]}
    next(q for q in teams["research"]["quotas"] if q["pool"] == POOL).update(gpus=1, borrowingLimit=0)
    teams["evaluation"]["quotas"].append({"pool": POOL, "gpus": STACK_NODES - 1, "borrowingLimit": 0})
    # rl-training on the fixed pool, as finetune is: each cluster's nodes are there from the start.
    next(app for app in scheduling["trainingApps"] if app["name"] == "rl-training")["pool"] = POOL
    # The gate's rounds on each of the fleet's 48 nodes are judged in its own modules; here they would
    # only slow each start.
    config["eks-gpu-training:healthGate"]["enabled"] = False


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The three clusters, as ``fleet up`` starts them (each in a start slot), the manager wired to both workers."""
    folder = tmp_path_factory.mktemp("fleet")
    local = LocalFleet("dev", folder / "state", workers=dict(WORKERS), project_root=PROJECT_ROOT,
                       stack_path=stack_variant(folder, "dev", fleet_stack), attached=True,
                       worker_lost_timeout_s=WORKER_LOST_TIMEOUT_SECONDS)
    try:
        local.up(starting=start_slots.start_slot)
        yield {name: RunningCluster(cluster) for name, cluster in local.clusters.items()}
    finally:
        local.down()


@pytest.fixture(scope="module")
def manager_cluster(fleet):
    return fleet["manager"]


@pytest.fixture(scope="module")
def east_cluster(fleet):
    return fleet["east"]


@pytest.fixture(scope="module")
def west_cluster(fleet):
    return fleet["west"]
