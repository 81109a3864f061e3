"""A team's people: the member role grants jobs and reads only, bound in the team's namespaces alone,
and members that would not be one team's alone are refused with their key path. What the API
server makes of the bindings is judged in the cluster tier (``tests/cluster/test_team_access.py``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from eks_gpu_training import ConfigError, parse_platform_args
from eks_gpu_training.config.team_settings import team_group
from eks_gpu_training.workloads.team_access import TEAM_MEMBER_ROLE, entry_less_members, member_groups, team_member_rules, team_role_binding
from tests.support.harness import run_main, stack_config

NAMESPACE = "eks-gpu-training:"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
PRETRAINING = "arn:aws:iam::444455556666:role/pretraining-engineers"


def raw(stack: str = "prod") -> dict[str, Any]:
    config = copy.deepcopy(stack_config(stack))
    values = {k[len(NAMESPACE):]: v for k, v in config.items() if k.startswith(NAMESPACE)}
    return {**values, "region": config["aws:region"]}


def refusals(values: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return {p.path: p.message for p in error.value.problems}


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_a_member_submits_watches_and_deletes_jobs_and_reads_pods_and_logs():
    rules = granted(team_member_rules())
    for group, resource in (("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs")):
        assert {(group, resource, verb) for verb in ("create", "get", "list", "watch", "patch", "delete")} <= rules
    assert {("", "pods", "get"), ("", "pods/log", "get"), ("kueue.x-k8s.io", "workloads", "list")} <= rules


def test_a_member_writes_no_rbac_quota_priority_class_or_kueue_object_and_reads_no_secret():
    rules = granted(team_member_rules())
    assert not {r for r in rules if r[0] in ("rbac.authorization.k8s.io", "scheduling.k8s.io")}
    assert not {r for r in rules if r[1] in ("resourcequotas", "secrets", "pods/exec", "serviceaccounts", "configmaps")}
    assert not {r for r in rules if r[0] == "kueue.x-k8s.io" and r[2] not in ("get", "list", "watch")}
    assert "*" not in {part for rule in rules for part in rule}


def test_each_team_namespace_binds_the_role_to_the_teams_group_and_its_listed_groups():
    args = parse_platform_args(raw("prod"))
    research = next(t for t in args.scheduling.teams if t.name == "research")
    binding = team_role_binding(research, "research")
    assert binding["metadata"]["namespace"] == "research"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TEAM_MEMBER_ROLE}
    assert [s["name"] for s in binding["subjects"]] == [team_group("research"), "research-oncall"]
    assert member_groups(research) == ["eks-gpu-training-team-research", "research-oncall"]


def test_the_stack_binds_the_member_role_in_team_namespaces_only_and_never_cluster_wide():
    graph = run_main(stack_config("prod"))
    bindings = [r for r in graph.of_type(ROLE_BINDING) if r.inputs["roleRef"]["name"] == TEAM_MEMBER_ROLE]
    assert sorted((b.inputs["metadata"]["namespace"], tuple(s["name"] for s in b.inputs["subjects"])) for b in bindings) == [
        ("research", ("eks-gpu-training-team-research", "research-oncall")),
        ("training", ("eks-gpu-training-team-pretraining",)),
    ]
    assert not [b for b in graph.of_type(CLUSTER_ROLE_BINDING) if b.inputs["roleRef"]["name"] == TEAM_MEMBER_ROLE]
    [role] = [r for r in graph.of_type(CLUSTER_ROLE) if r.inputs["metadata"]["name"] == TEAM_MEMBER_ROLE]
    assert "aggregationRule" not in role.inputs
    assert not any(k.startswith("rbac.authorization.k8s.io/aggregate") for k in role.inputs["metadata"]["labels"])


def test_a_stack_without_teams_makes_no_member_role():
    values = raw("prod")
    del values["scheduling"]["teams"]
    values["scheduling"]["namespaces"] = [{"name": "training"}, {"name": "research"}]
    values["scheduling"]["trainingApps"] = []
    config = {f"{NAMESPACE}{k}": v for k, v in values.items() if k != "region"} | {"aws:region": values["region"]}
    graph = run_main(config)
    assert graph.error is None, graph.error
    assert not [r for r in graph.of_type(CLUSTER_ROLE) if r.inputs["metadata"]["name"] == TEAM_MEMBER_ROLE]


@pytest.mark.parametrize(("member", "why"), [
    ("arn:aws:iam::4444:role/short-account", "is not an IAM role or user ARN"),
    ("arn:aws:sts::444455556666:assumed-role/research/alice", "is not an IAM role or user ARN"),
    ("system:masters", "neither an IAM role/user ARN nor a Kubernetes group of your own"),
    ("system:authenticated", "neither an IAM role/user ARN nor a Kubernetes group of your own"),
    ("eks-gpu-training-team-pretraining", "those are the stack's"),
    ("two words", "neither an IAM role/user ARN nor a Kubernetes group of your own"),
])
def test_a_malformed_member_is_refused_with_its_key_path(member, why):
    values = raw("prod")
    values["scheduling"]["teams"][1]["members"] = ["research-oncall", member]
    problems = refusals(values)
    assert why in problems["scheduling.teams[1].members[1]"]


def test_a_member_of_two_teams_is_refused_whatever_the_arns_path_or_case():
    values = raw("prod")
    values["scheduling"]["teams"][1]["members"].append("arn:aws:iam::444455556666:role/people/Pretraining-Engineers")
    problems = refusals(values)
    assert problems == {"scheduling.teams[1].members[2]": "'arn:aws:iam::444455556666:role/people/Pretraining-Engineers' is "
                        "listed in scheduling.teams[0].members[0] too: a member belongs to one team"}


def test_a_group_of_two_teams_and_a_member_listed_twice_are_refused():
    values = raw("prod")
    values["scheduling"]["teams"][0]["members"] += ["research-oncall", PRETRAINING]
    problems = refusals(values)
    assert set(problems) == {"scheduling.teams[0].members[2]", "scheduling.teams[1].members[1]"}
    assert "listed in scheduling.teams[0].members[0] too" in problems["scheduling.teams[0].members[2]"]
    assert "listed in scheduling.teams[0].members[1] too" in problems["scheduling.teams[1].members[1]"]


def test_an_admin_listed_as_a_member_is_refused():
    values = raw("prod")
    values["scheduling"]["teams"][0]["members"].append("arn:aws:iam::444455556666:role/platform-admin")
    problems = refusals(values)
    assert "is cluster.adminPrincipalArns[0], an admin of every namespace" in problems["scheduling.teams[0].members[1]"]


def test_the_verify_group_as_a_member_is_refused_while_it_is_bound_cluster_wide():
    values = raw("prod")
    values["verify"] = {"clusterRole": True}
    values["scheduling"]["teams"][0]["members"].append("eks-gpu-training-verifiers")
    assert "is verify.group" in refusals(values)["scheduling.teams[0].members[1]"]


def test_the_in_cluster_half_names_the_iam_members_it_makes_no_entry_for():
    args = parse_platform_args(raw("prod"))
    assert entry_less_members(args) == []
    half_alone = args.model_copy(update={"in_cluster": args.in_cluster.model_copy(update={"enabled": True})})
    assert entry_less_members(half_alone) == [
        "arn:aws:iam::444455556666:role/pretraining-engineers (group eks-gpu-training-team-pretraining)",
        "arn:aws:iam::444455556666:role/research-engineers (group eks-gpu-training-team-research)",
    ]
