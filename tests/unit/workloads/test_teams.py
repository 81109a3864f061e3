"""Teams sharing the fleet: each a ClusterQueue in one cohort with its quotas and limits, the
namespaces' ResourceQuotas sized from them, and the rules refusing teams that could not all be
served. What Kueue does with them (borrowing, reclaim, the cap) is judged in the cluster tier
(``tests/cluster/test_teams.py``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from eks_gpu_training import ConfigError, parse_platform_args
from eks_gpu_training.addons.kueue import FAIR_SHARING_STRATEGIES
from eks_gpu_training.workloads.kueue_queues import team_cluster_queue, team_queues, pool_flavors
from eks_gpu_training.workloads.teams import namespace_quota, team_pools
from tests.support.builders import stack_without_teams
from tests.support.harness import run_main, stack_config

NAMESPACE = "eks-gpu-training:"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"


def raw(stack: str = "prod") -> dict[str, Any]:
    config = copy.deepcopy(stack_config(stack))
    values = {k[len(NAMESPACE):]: v for k, v in config.items() if k.startswith(NAMESPACE)}
    return {**values, "region": config["aws:region"]}


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return [str(p) for p in error.value.problems]


def teams(values: dict[str, Any]) -> list[dict[str, Any]]:
    return values["scheduling"]["teams"]


def test_each_team_is_a_cluster_queue_in_one_cohort_reclaiming_its_quota_and_preempting_by_priority_within():
    args = parse_platform_args(raw())
    queues = {q.name: team_cluster_queue(q) for q in team_queues(args, pool_flavors(args))}
    pretraining = queues["pretraining"]["spec"]
    assert pretraining["cohortName"] == queues["research"]["spec"]["cohortName"] == "gpu-teams"
    assert pretraining["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert pretraining["fairSharing"] == {"weight": "2"}
    assert queues["research"]["spec"]["fairSharing"] == {"weight": "1"}
    assert pretraining["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training"]}]}
    (group,) = pretraining["resourceGroups"]
    flavors = {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}
    # Half of each pool: 8 of p5-training's 16 H100s, with their share of the nodes' vCPUs and memory.
    assert flavors["p5-training-tas"] == {
        "cpu": {"name": "cpu", "nominalQuota": "192"},
        "memory": {"name": "memory", "nominalQuota": "2Ti"},
        "nvidia.com/gpu": {"name": "nvidia.com/gpu", "nominalQuota": "8"},
    }
    assert set(flavors) == {"p5-training-tas", "karpenter-gpu-training"}


def test_borrowing_and_lending_limits_go_on_every_resource_of_the_pools_flavor():
    values = raw()
    teams(values)[0]["quotas"][0].update(borrowingLimit=8, lendingLimit=0)
    values["scheduling"]["trainingApps"] = []  # research's two-node app could no longer run (a refusal of its own)
    args = parse_platform_args(values)
    (pretraining, _) = team_queues(args, pool_flavors(args))
    assert pretraining.quotas["p5-training-tas"] == {
        "cpu": {"nominalQuota": "192", "borrowingLimit": "192", "lendingLimit": "0"},
        "memory": {"nominalQuota": "2Ti", "borrowingLimit": "2Ti", "lendingLimit": "0Mi"},
        "nvidia.com/gpu": {"nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "0"},
    }
    # Pretraining lends none of its p5 GPUs: research reaches its own 8 there, no more.
    research = args.scheduling.teams[1]
    reach = {p.capacity.pool.name: p.reachable for p in team_pools(args, research)}
    assert reach == {"p5-training": 8, "gpu-training": 16}


def test_a_team_namespaces_resource_quota_is_its_quota_plus_what_it_may_borrow():
    values = raw()
    teams(values)[1]["quotas"][0]["borrowingLimit"] = 4
    values["scheduling"]["trainingApps"] = []
    args = parse_platform_args(values)
    research = next(ns for ns in args.scheduling.namespaces if ns.name == "research")
    quota = namespace_quota(research, args)
    # p5-training: 8 + 4 borrowed; gpu-training: 8 + the 8 pretraining lends. 28 × 24 vCPUs and 256 GiB per GPU.
    assert (quota.gpus, quota.cpu, quota.memory) == (28, "672", "7Ti")


def test_the_stack_makes_a_cluster_queue_per_team_and_moves_local_queues_by_replacing_them():
    graph = run_main(stack_config("prod"))
    assert graph.error is None, graph.error
    assert sorted(r.inputs["metadata"]["name"] for r in graph.of_type(CLUSTER_QUEUE)) == ["pretraining", "research"]
    local = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r for r in graph.of_type(LOCAL_QUEUE)}
    assert {k: r.inputs["spec"]["clusterQueue"] for k, r in local.items()} == {
        ("training", "gpu-queue"): "pretraining", ("training", "gpu-queue-held"): "pretraining",
        ("research", "gpu-queue"): "research", ("research", "gpu-queue-held"): "research",
    }
    # A LocalQueue's clusterQueue is immutable: a namespace changing team gets new LocalQueues of
    # the same names, so the old ones go first.
    for registration in local.values():
        assert registration.replace_on_changes == ["spec.clusterQueue"]
        assert registration.delete_before_replace is True


def test_fair_sharing_is_on_with_teams_and_off_without():
    releases = {}
    for with_teams in (True, False):
        config = stack_config("prod") if with_teams else stack_without_teams("prod")
        graph = run_main(config)
        assert graph.error is None, graph.error
        (kueue,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
        releases[with_teams] = yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert releases[True]["fairSharing"] == {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}
    assert "fairSharing" not in releases[False]


# --- refusals -------------------------------------------------------------------------------------


def test_refuses_nominal_quotas_that_sum_beyond_the_pool():
    values = raw()
    teams(values)[1]["quotas"][0]["gpus"] = 16
    assert problems(values) == [
        "scheduling.teams[1].quotas[0].gpus: the teams' quotas on p5-training sum to 24 (pretraining 8 + research 16), "
        "beyond the 16 GPUs it provides (gpuNodeGroups[0].maxSize 2 × 8 GPUs (p5.48xlarge) = 16); every team must be "
        "able to have its own at once"
    ]


def test_refuses_a_lending_limit_beyond_the_teams_quota():
    values = raw()
    teams(values)[0]["quotas"][0]["lendingLimit"] = 9
    assert problems(values) == [
        "scheduling.teams[0].quotas[0].lendingLimit: 9 exceeds the team's own 8 GPUs on the pool (gpus): a team lends only its quota"
    ]


def test_refuses_a_borrowing_limit_beyond_what_the_other_teams_hold():
    values = raw()
    teams(values)[0]["quotas"][0]["borrowingLimit"] = 9
    assert problems(values) == [
        "scheduling.teams[0].quotas[0].borrowingLimit: 9 exceeds the 8 GPUs the other teams hold on p5-training: "
        "a team borrows only their quota"
    ]


def test_refuses_a_team_with_no_namespace():
    values = raw()
    teams(values)[1]["namespaces"] = []
    found = problems(values)
    assert found[0] == ("scheduling.teams[1].namespaces: is empty: team research's jobs run in its namespaces; list at "
                        "least one of scheduling.namespaces (training, research)")
    # And research's namespace is then in no team.
    assert found[1].startswith("scheduling.namespaces[1].name: 'research' is in no team")


def test_refuses_a_namespace_of_two_teams_and_one_that_is_not_a_training_namespace():
    values = raw()
    teams(values)[1]["namespaces"] = ["research", "training", "inference"]
    assert problems(values) == [
        "scheduling.teams[1].namespaces[1]: 'training' belongs to team pretraining already; a namespace has one team",
        "scheduling.teams[1].namespaces[2]: 'inference' is not in scheduling.namespaces; allowed: training, research",
    ]


def test_refuses_a_quota_on_an_unknown_pool_and_a_pool_listed_twice():
    values = raw()
    teams(values)[0]["quotas"] = [{"pool": "p4d-training", "gpus": 8}, {"pool": "p5-training", "gpus": 8},
                                 {"pool": "p5-training", "gpus": 0}]
    assert problems(values) == [
        "scheduling.teams[0].quotas[0].pool: 'p4d-training' is not the name of a GPU pool; allowed: p5-training, gpu-training",
        "scheduling.teams[0].quotas[2].pool: 'p5-training' is listed in scheduling.teams[0].quotas[1] too",
    ]


def test_refuses_a_team_namespaces_own_gpu_quota():
    values = raw()
    values["scheduling"]["namespaces"][1]["quota"] = {"gpus": 8}
    assert problems(values) == [
        "scheduling.namespaces[1].quota.gpus: is sized from team research's quotas plus its borrowing limits; remove it "
        "(or set the team's quotas)"
    ]


def test_refuses_teams_without_kueue():
    values = raw()
    values["kueue"]["enabled"] = False
    values["scheduling"]["trainingApps"] = []
    assert "scheduling.teams: needs kueue.enabled: true: Kueue's cohort is what lends one team's idle GPUs to another" in problems(values)


def test_refuses_duplicate_team_names():
    values = raw()
    teams(values)[1]["name"] = "pretraining"
    assert problems(values)[0] == "scheduling.teams[1].name: 'pretraining' is used by scheduling.teams[0] too"


def test_refuses_an_app_beyond_what_its_team_can_reach_on_its_pool():
    values = raw()
    teams(values)[0]["quotas"][0]["borrowingLimit"] = 4
    assert problems(values) == [
        "scheduling.trainingApps[0].nodes: the app's 2 × 8 GPUs needs 16 GPUs on p5-training at once, but team "
        "pretraining reaches 12 there (its quota 8, a borrowing limit of 4): it could never be admitted"
    ]
