"""``team/<team>`` rows: each team's ClusterQueue as the stack makes it, and what the team uses,
borrows and lends, judged on snapshots (Kueue's own figures are judged in the cluster tier,
``tests/cluster/test_verify.py``)."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training.verify import Snapshot, load_stack_args
from eks_gpu_training.verify import stack as checks
from eks_gpu_training.workloads.kueue_queues import pool_flavors, team_cluster_queue, team_queues
from tests.support.harness import PROJECT_ROOT


@pytest.fixture(scope="module")
def prod():
    return load_stack_args("prod", PROJECT_ROOT)


def _queues(args, usage: dict[str, dict[str, tuple[int, int]]]) -> list[dict]:
    """The stack's team ClusterQueues, with ``usage``: team -> flavor -> (GPUs in use, borrowed)."""
    queues = []
    for team in team_queues(args, pool_flavors(args)):
        queue = copy.deepcopy(team_cluster_queue(team))
        queue["status"] = {"flavorsUsage": [
            {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "total": str(total), "borrowed": str(borrowed)}]}
            for flavor, (total, borrowed) in usage.get(team.name, {}).items()
        ]}
        queues.append(queue)
    return queues


def _rows(args, queues) -> dict:
    return {r.item: r for r in checks.teams(Snapshot(cluster_queues=queues), args)}


def test_a_team_borrowing_the_others_idle_gpus_shows_what_it_borrows_and_the_owner_what_it_lends(prod):
    rows = _rows(prod, _queues(prod, {"research": {"p5-training-tas": (16, 8)}}))
    assert rows["team/research"].status == "pass"
    assert rows["team/research"].evidence == (
        "team research (weight 1, namespaces research): p5-training: quota 8, using 16 (8 borrowed), lending 0; "
        "gpu-training: quota 8, using 0 (0 borrowed), lending 0."
    )
    assert rows["team/pretraining"].evidence == (
        "team pretraining (weight 2, namespaces training): p5-training: quota 8, using 0 (0 borrowed), lending 8; "
        "gpu-training: quota 8, using 0 (0 borrowed), lending 0."
    )


def test_a_team_using_part_of_its_quota_lends_only_what_it_leaves_idle(prod):
    rows = _rows(prod, _queues(prod, {"pretraining": {"p5-training-tas": (4, 0)}, "research": {"p5-training-tas": (12, 4)}}))
    assert "p5-training: quota 8, using 4 (0 borrowed), lending 4" in rows["team/pretraining"].evidence


def test_a_teams_cluster_queue_with_another_quota_or_out_of_the_cohort_fails(prod):
    queues = _queues(prod, {})
    research = next(q for q in queues if q["metadata"]["name"] == "research")
    research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "4"
    pretraining = next(q for q in queues if q["metadata"]["name"] == "pretraining")
    pretraining["spec"].pop("cohortName")
    rows = _rows(prod, queues)
    assert (rows["team/research"].status, rows["team/research"].evidence) == ("fail", "p5-training: quota 4, the stack declares 8.")
    assert rows["team/pretraining"].evidence == "team pretraining's ClusterQueue pretraining is in cohort none, not in gpu-teams."
    assert rows["team/pretraining"].status == "fail"


def test_a_missing_team_queue_fails_and_a_stack_without_teams_skips(prod):
    queues = [q for q in _queues(prod, {}) if q["metadata"]["name"] != "research"]
    assert _rows(prod, queues)["team/research"].evidence == "team research's ClusterQueue research does not exist, not in gpu-teams."
    without = prod.model_copy(update={"scheduling": prod.scheduling.model_copy(update={"teams": []})})
    (row,) = checks.teams(Snapshot(cluster_queues=[]), without)
    assert (row.item, row.status) == ("teams", "skip")
