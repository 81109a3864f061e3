"""The "Who can reach what" page, docs/reach.md: generated from both shipped stacks'
renders, so a test compares it with the current render and fails when the code opened a path,
granted an action or bound a verb the page does not show."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.offline.render import chart_rbac, reach


@pytest.fixture(scope="module")
def renders():
    return [render_stack(stack) for stack in reach.STACKS]


def test_the_reach_page_shows_who_can_reach_what_in_the_current_renders(renders):
    assert reach.stale(renders) == [], "run `python -m eks_gpu_training.offline.render.reach --write`"


def test_a_path_the_page_does_not_show_makes_it_stale(renders):
    changed = copy.deepcopy(renders)
    prod = next(r for r in changed if r.stack == "prod")
    rule = next(r for r in prod.resources if r.type == reach.INGRESS and "api-ingress" in r.name)
    rule.inputs["cidrIpv4"] = "0.0.0.0/0"
    assert len(reach.stale(changed)) == 1


def test_prods_private_endpoint_cidr_reaches_the_api_alone_not_the_nodes(renders):
    prod = next(r for r in renders if r.stack == "prod")
    from_vpn = [row for row in reach.network_rows(prod) if row[0] == "`10.20.0.0/16`"]
    assert from_vpn == [("`10.20.0.0/16`", "tcp 443", "the private API endpoint (security group `gpu-training-cluster-api-endpoint`)")]


def test_the_creators_admin_grant_is_a_row_and_no_role_holds_fsx_full_access(renders):
    for render in renders:
        rows = reach.iam_rows(render)
        assert any("eks-gpu-training/creator-principal" in row[0] and "AmazonEKSClusterAdminPolicy" in row[2] for row in rows)
        assert not any("AmazonFSxFullAccess" in row[2] for row in rows)


# --- the charts' cluster-scoped RBAC -----------------------------------------------------------------

def test_the_reach_page_shows_the_pinned_charts_cluster_rbac(renders, chart_sources):
    assert reach.charts_stale(renders, chart_sources) == [], "run `python -m eks_gpu_training.offline.render.reach --write`"


def test_a_chart_binding_the_page_does_not_show_makes_it_stale(renders, chart_sources, monkeypatch):
    original = chart_rbac.chart_objects

    def widened(render, sources):
        objects, problems = original(render, sources)
        objects["jobset"] = [*objects.get("jobset", []), {
            "apiVersion": chart_rbac.RBAC_API, "kind": "ClusterRoleBinding", "metadata": {"name": "jobset-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "jobset-controller", "namespace": "jobset-system"}]}]
        return objects, problems

    monkeypatch.setattr(reach, "chart_objects", widened)
    assert reach.charts_stale(renders, chart_sources) == [
        "docs/reach.md: the chart-rbac section is not the pinned charts' current render"]


def test_the_job_controllers_rows_name_the_fence_that_judges_them(renders, chart_sources):
    prod = next(r for r in renders if r.stack == "prod")
    objects, problems = chart_rbac.chart_objects(prod, chart_sources)
    assert problems == []
    rows = chart_rbac.chart_rbac_rows(objects, chart_rbac.fenced_users(prod))
    trainer = [row for row in rows if row[1].startswith("ServiceAccount `kubeflow-system/kubeflow-trainer-controller-manager`")]
    assert trainer, rows
    assert all(row[1].endswith("fenced by policy `kubeflow-trainer-fence`") for row in trainer)
    assert any("on configmaps, secrets" in row[2] for row in trainer), "the RBAC the fence narrows is shown as the chart grants it"
    kueue = next(row for row in rows if row[2].startswith("ClusterRole `kueue-manager-role`"))
    assert "fenced" not in kueue[1]
    assert "(only `kueue-mutating-webhook-configuration`)" in kueue[2], "Kueue holds its own webhook configurations only"


def test_a_charts_bound_and_aggregated_cluster_roles_are_rows_and_unbound_ones_are_not():
    objects = {"demo": [
        {"kind": "ClusterRole", "metadata": {"name": "demo-manager"}, "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"], "resourceNames": ["demo-cert"]},
            {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "demo-manager"},
         "roleRef": {"kind": "ClusterRole", "name": "demo-manager"},
         "subjects": [{"kind": "ServiceAccount", "name": "demo", "namespace": "demo-system"}]},
        {"kind": "ClusterRole", "metadata": {"name": "demo-viewer", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-view": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
         "rules": [{"resources": ["demos"], "verbs": ["get"]}]},
        {"kind": "ClusterRole", "metadata": {"name": "demo-unbound"}, "rules": [{"resources": ["*"], "verbs": ["*"]}]},
    ]}
    rows = chart_rbac.chart_rbac_rows(objects, {"system:serviceaccount:demo-system:demo": "demo-fence"})
    assert rows == [
        ("demo", "ServiceAccount `demo-system/demo`, fenced by policy `demo-fence`",
         "ClusterRole `demo-manager`: get, update on secrets (only `demo-cert`); get on /metrics"),
        ("demo", "holders of `edit`, `view` (aggregated)", "ClusterRole `demo-viewer`: get on demos"),
    ]
