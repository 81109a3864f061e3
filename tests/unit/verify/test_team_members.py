"""``team-members/<team>`` rows: each team's groups bound to the member role in its namespaces and
nowhere else, judged on snapshots of the bindings the stack renders (the bindings on a running
API server are read in the cluster tier, ``tests/cluster/test_verify.py``)."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training.verify import Snapshot, load_stack_args
from eks_gpu_training.verify.team_members import team_members
from eks_gpu_training.workloads.team_access import TEAM_MEMBER_ROLE, team_role_binding
from tests.support.harness import PROJECT_ROOT


@pytest.fixture(scope="module")
def prod():
    return load_stack_args("prod", PROJECT_ROOT)


def shipped(args) -> list[dict]:
    return [team_role_binding(team, namespace) for team in args.scheduling.teams for namespace in team.namespaces]


def rows(args, role_bindings, cluster_role_bindings=()) -> dict:
    return {r.item: r for r in team_members(Snapshot(role_bindings=list(role_bindings), cluster_role_bindings=list(cluster_role_bindings)), args)}


def binding(kind: str, name: str, group: str, role: str, namespace: str = "") -> dict:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": metadata, "roleRef": {"kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "Group", "name": group}]}


def test_the_shipped_bindings_pass_per_team(prod):
    found = rows(prod, shipped(prod))
    assert {item: row.status for item, row in found.items()} == {"team-members/pretraining": "pass", "team-members/research": "pass"}
    assert found["team-members/research"].evidence == (
        f"eks-gpu-training-team-research, research-oncall bound to {TEAM_MEMBER_ROLE} in research only; "
        "no other RoleBinding and no ClusterRoleBinding names them.")


def test_a_teams_group_bound_in_the_other_teams_namespace_fails(prod):
    extra = binding("RoleBinding", "leak", "research-oncall", "edit", "training")
    row = rows(prod, [*shipped(prod), extra])["team-members/research"]
    assert row.status == "fail"
    assert "RoleBinding training/leak binds research-oncall to edit" in row.evidence


def test_a_teams_group_bound_cluster_wide_fails(prod):
    row = rows(prod, shipped(prod), [binding("ClusterRoleBinding", "wide", "eks-gpu-training-team-pretraining", "view")])["team-members/pretraining"]
    assert row.status == "fail"
    assert "ClusterRoleBinding wide binds eks-gpu-training-team-pretraining to view in every namespace" in row.evidence


def test_a_missing_binding_or_one_to_another_role_fails(prod):
    bindings = shipped(prod)
    without = [b for b in bindings if b["metadata"]["namespace"] != "training"]
    assert "no RoleBinding eks-gpu-training-team-member in training" in rows(prod, without)["team-members/pretraining"].evidence
    admin = copy.deepcopy(bindings)
    next(b for b in admin if b["metadata"]["namespace"] == "training")["roleRef"]["name"] = "admin"
    row = rows(prod, admin)["team-members/pretraining"]
    assert row.status == "fail"
    assert "training/eks-gpu-training-team-member binds ClusterRole admin, not the ClusterRole eks-gpu-training-team-member" in row.evidence


def test_a_listed_group_left_out_of_its_binding_fails(prod):
    bindings = copy.deepcopy(shipped(prod))
    research = next(b for b in bindings if b["metadata"]["namespace"] == "research")
    research["subjects"] = research["subjects"][:1]
    assert "research/eks-gpu-training-team-member leaves out research-oncall" in rows(prod, bindings)["team-members/research"].evidence
