"""A team's people as the API server judges them: a member (impersonated as EKS presents an access
entry's principal: its ARN as the user, its team's group) submits jobs in the team's namespaces and
is refused everywhere else, and on quotas, priority classes and RBAC; each with its broken variant."""

from __future__ import annotations

from typing import Any, Callable

from kubernetes import client

from eks_gpu_training.config.team_settings import team_group
from eks_gpu_training.verify import FAIL, PASS, verify
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME
from eks_gpu_training.workloads.team_access import TEAM_MEMBER_ROLE, team_role_binding

from tests.support.environment import Environment, expect_refused, wait_for
from tests.support.manifests import unique
from tests.support.policy_probes import RBAC, attempt

def member(cluster, team: str) -> Environment:
    """The team's first IAM member as EKS authenticates it: the ARN as the user, with the entry's group."""
    config = next(t for t in cluster.args.scheduling.teams if t.name == team)
    return cluster.env.as_user(config.members[0], groups=(team_group(team),))


def held_job(namespace: str) -> dict[str, Any]:
    """A Job in the team's held queue: Kueue keeps it suspended, so nothing runs."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": unique("member-job"), "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": HELD_LOCAL_QUEUE}},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}},
    }


def creates_job(admin: Environment, env: Environment, namespace: str) -> bool:
    """``env`` creates a held Job in ``namespace``, which the admin then deletes."""
    job = held_job(namespace)
    env.batch.create_namespaced_job(namespace, job)
    admin.delete_job(namespace, job["metadata"]["name"])
    return True


def refused_job(admin: Environment, env: Environment, namespace: str) -> str:
    job = held_job(namespace)
    return expect_refused(lambda: env.batch.create_namespaced_job(namespace, job),
                          on_admitted=lambda _: admin.delete_job(namespace, job["metadata"]["name"]))


def role_in(namespace: str) -> dict[str, Any]:
    return {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": unique("member-role"), "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}


def creates_role(env: Environment, namespace: str) -> Callable[[], Any]:
    return lambda: client.RbacAuthorizationV1Api(env.api).create_namespaced_role(namespace, role_in(namespace))


def test_a_member_submits_a_job_in_their_teams_namespace_and_reads_its_pods_and_logs(prod_cluster):
    admin, engineer = prod_cluster.env, member(prod_cluster, "pretraining")
    creates_job(admin, engineer, "training")
    assert isinstance(engineer.core.list_namespaced_pod("training").items, list)
    assert engineer.custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "training", "workloads")["items"] is not None


def test_a_member_is_refused_in_the_other_teams_namespace_and_in_kube_system(prod_cluster):
    admin, engineer = prod_cluster.env, member(prod_cluster, "pretraining")
    for namespace in ("research", "kube-system"):
        assert "forbidden" in refused_job(admin, engineer, namespace)
        expect_refused(lambda ns=namespace: engineer.core.list_namespaced_pod(ns))
    expect_refused(lambda: engineer.core.list_namespaced_secret("training"))


def test_a_member_writes_no_quota_priority_class_or_rbac(prod_cluster):
    engineer = member(prod_cluster, "pretraining")
    expect_refused(lambda: engineer.core.patch_namespaced_resource_quota(QUOTA_NAME, "training", {"spec": {"hard": {"pods": "1000"}}},
                                                                        dry_run="All"))
    expect_refused(lambda: engineer.core.delete_namespaced_resource_quota(QUOTA_NAME, "training", dry_run="All"))
    expect_refused(lambda: client.SchedulingV1Api(engineer.api).create_priority_class(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": unique("member-class")}, "value": 10**9}))
    expect_refused(creates_role(engineer, "training"))
    expect_refused(lambda: client.RbacAuthorizationV1Api(engineer.api).patch_namespaced_role_binding(
        TEAM_MEMBER_ROLE, "training", {"subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]}))


def test_a_listed_kubernetes_group_is_bound_in_its_teams_namespace_alone(prod_cluster):
    admin = prod_cluster.env
    oncall = admin.as_user("oncall-engineer", groups=("research-oncall",))
    creates_job(admin, oncall, "research")
    refused_job(admin, oncall, "training")


def test_broken_variant_without_the_rolebinding_the_member_is_refused_in_their_own_namespace(prod_cluster):
    admin, engineer = prod_cluster.env, member(prod_cluster, "pretraining")
    pretraining = next(t for t in prod_cluster.args.scheduling.teams if t.name == "pretraining")
    admin.delete(RBAC, "RoleBinding", TEAM_MEMBER_ROLE, "training")
    try:
        wait_for(lambda: attempt(lambda: refused_job(admin, engineer, "training")), what="the member refused without the binding")
    finally:
        admin.apply(team_role_binding(pretraining, "training"))
    wait_for(lambda: attempt(lambda: creates_job(admin, engineer, "training")), what="the member admitted again once the binding is back")


def test_broken_variant_bound_to_the_admin_cluster_role_the_member_writes_rbac(prod_cluster):
    """Kubernetes' own ``admin`` role in place of the member role: the member can write Roles (and
    read Secrets) in the namespace, which the shipped binding refuses."""
    admin, engineer = prod_cluster.env, member(prod_cluster, "pretraining")
    name = unique("member-admin")
    admin.apply({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": name, "namespace": "training"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team_group("pretraining")}]})
    try:
        made = wait_for(lambda: attempt(creates_role(engineer, "training")), what="the member writing a Role under admin")
        admin.delete(RBAC, "Role", made.metadata.name, "training")
    finally:
        admin.delete(RBAC, "RoleBinding", name, "training")


def test_broken_variant_bound_to_cluster_admin_in_the_namespace_the_member_writes_its_quota(prod_cluster):
    """Even Kubernetes' ``admin`` role writes no ResourceQuota; ``cluster-admin`` bound in the
    namespace does, which the shipped binding refuses (a dry run: the quota is never changed)."""
    admin, engineer = prod_cluster.env, member(prod_cluster, "pretraining")
    name = unique("member-cluster-admin")
    admin.apply({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": name, "namespace": "training"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team_group("pretraining")}]})
    try:
        wait_for(lambda: attempt(lambda: engineer.core.patch_namespaced_resource_quota(
            QUOTA_NAME, "training", {"spec": {"hard": {"pods": "1000"}}}, dry_run="All")), what="the member writing its quota under cluster-admin")
    finally:
        admin.delete(RBAC, "RoleBinding", name, "training")
    wait_for(lambda: attempt(lambda: expect_refused(lambda: engineer.core.patch_namespaced_resource_quota(
        QUOTA_NAME, "training", {"spec": {"hard": {"pods": "1000"}}}, dry_run="All"))), what="the quota refused again")


def test_the_readme_try_out_a_dev_member_of_one_team_is_refused_in_the_others_namespace(dev_cluster):
    """README: ``kubectl auth can-i create jobs -n evaluation --as=me --as-group=eks-gpu-training-team-research``
    says no, and the API server refuses the Job itself; in research's own namespace it is admitted."""
    admin, researcher = dev_cluster.env, member(dev_cluster, "research")

    def can_create_jobs(namespace: str) -> bool:
        review = client.AuthorizationV1Api(researcher.api).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"namespace": namespace, "verb": "create", "group": "batch", "resource": "jobs"}}})
        return bool(review.status.allowed)

    assert (can_create_jobs("training"), can_create_jobs("evaluation")) == (True, False)
    refused_job(admin, researcher, "evaluation")
    creates_job(admin, researcher, "training")
    evaluator = admin.as_user("sso-user", groups=("evaluation-sso",))
    creates_job(admin, evaluator, "evaluation")
    refused_job(admin, evaluator, "training")


def test_verify_finds_each_teams_groups_bound_in_its_namespaces_only_and_a_binding_elsewhere_fails(prod_cluster):
    admin = prod_cluster.env

    def members_rows() -> dict[str, Any]:
        rows = verify(kubeconfig=str(prod_cluster.kubeconfig), stack=prod_cluster.args)
        return {r.item: r for r in rows if r.item.startswith("team-members/")}

    assert {item: row.status for item, row in members_rows().items()} == {"team-members/pretraining": PASS, "team-members/research": PASS}
    # Broken variant: pretraining's group also bound in research's namespace.
    name = unique("member-leak")
    admin.apply({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": name, "namespace": "research"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team_group("pretraining")}]})
    try:
        row = members_rows()["team-members/pretraining"]
        assert row.status == FAIL
        assert f"RoleBinding research/{name} binds eks-gpu-training-team-pretraining to edit" in row.evidence
        assert members_rows()["team-members/research"].status == PASS
    finally:
        admin.delete(RBAC, "RoleBinding", name, "research")
    assert members_rows()["team-members/pretraining"].status == PASS
