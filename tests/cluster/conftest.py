"""The cluster tier: each stack file's platform on a local Kubernetes control plane (upstream etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue, Karpenter's KWOK provider).

Each local cluster is started once per session and stopped when the session ends, whatever the
tests did; a session that cannot build or start one fails and says what is missing (this tier is
never skipped: CI must run it).
"""

from __future__ import annotations

import pytest

from clusters import RunningCluster, start


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory):
    yield from start("dev", tmp_path_factory.mktemp("local-dev"))


@pytest.fixture(scope="session")
def prod_cluster(tmp_path_factory):
    yield from start("prod", tmp_path_factory.mktemp("local-prod"))


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_cluster(request):
    return request.getfixturevalue(f"{request.param}_cluster")


def _stack_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "any_cluster" in callspec.params:
        return callspec.params["any_cluster"]
    names = getattr(item, "fixturenames", ())
    for stack in ("prod", "dev"):
        if f"{stack}_cluster" in names:
            return stack
    # Clusters of prod variants (a wider pool, a capped namespace) run on prod's worker, one at a
    # time beside prod's own, so no more than three clusters share the machine.
    if any(name.startswith("prod_") or name.startswith("three_node") for name in names):
        return "prod"
    return None


def pytest_collection_modifyitems(config, items):
    """One xdist group per stack (``-n 2 --dist loadgroup``): each worker starts one stack's local
    cluster and runs that stack's tests, so the two clusters run side by side, never twice."""
    for item in items:
        stack = _stack_of(item)
        if stack:
            item.add_marker(pytest.mark.xdist_group(stack))


@pytest.fixture(autouse=True)
def known_state(request):
    """Each test starts from its clusters' known state and leaves them in it: Kueue's ClusterQueue
    usage and admitted count and its Workloads back to what they were (a Workload for every queued
    Job), and no pod but the DaemonSets' on (or pending for) a GPU node. A test that leaves
    something behind fails at its teardown, naming it, instead of the next test timing out on a
    quota or a node it cannot get; a bare cluster (no platform, no Kueue) has no such state."""
    clusters = [request.getfixturevalue(name) for name in request.fixturenames if name.endswith("_cluster")]
    clusters = [c for c in clusters if isinstance(c, RunningCluster) and not c.bare]
    for running in clusters:
        running.env.expect_known_state(when=f"on {running.stack} before the test")
    yield
    for running in clusters:
        running.env.expect_known_state(when=f"on {running.stack} after the test")
