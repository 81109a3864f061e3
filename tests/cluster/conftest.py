"""The cluster tier: each stack file's platform on a local Kubernetes control plane (upstream etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue, Karpenter's KWOK provider).

Each local cluster is started once per session and stopped when the session ends, whatever the
tests did; a session that cannot build or start one fails and says what is missing (this tier is
never skipped: CI must run it).
"""

from __future__ import annotations

import pytest

from clusters import RunningCluster, start
# The fault modules' fixtures: module-scoped, so each of test_node_faults, test_node_loss and
# test_node_unreachable gets a grown pool of its own (node_faults says why).
from node_faults import prod_faults_cluster, running_group, running_job  # noqa: F401 - fixtures, found by name


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory):
    yield from start("dev", tmp_path_factory.mktemp("local-dev"))


@pytest.fixture(scope="session")
def prod_cluster(tmp_path_factory):
    yield from start("prod", tmp_path_factory.mktemp("local-prod"))


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_cluster(request):
    return request.getfixturevalue(f"{request.param}_cluster")


def _group_of(item) -> str | None:
    """The xdist group of a test: its stack's, when it runs on a stack's session cluster; its
    module's, when it starts a cluster of its own (a stack variant: a wider pool, a capped
    namespace, repair off), so those modules spread over the workers beside the stacks' groups."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "any_cluster" in callspec.params:
        return callspec.params["any_cluster"]
    names = getattr(item, "fixturenames", ())
    for stack in ("prod", "dev"):
        if f"{stack}_cluster" in names:
            return stack
    if any(name.endswith("_cluster") for name in names):
        return item.module.__name__
    return None


LONGEST_FIRST = ("dev", "prod", "test_node_loss", "test_node_unreachable", "test_node_faults", "test_node_repair",
                 "simulate")
"""The groups that take longest, longest first, in the order the workers take them up
(``--no-loadscope-reorder``): each stack's session cluster with its Karpenter launches and
consolidations, and the modules with a cluster of their own whose waits are the controllers' own
clocks (a node's grace period, a toleration, Kueue's minute, node auto repair's wait). Started
first, they run beside each other and the short groups fill in around them. xdist's own order
(most tests first) put the one-test unreachable-node module last, where its 4 minutes ended the
run (docs/operations.md, "CI's time")."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """One xdist group per stack (``--dist loadgroup``): a worker starts one stack's session cluster
    and runs that stack's tests, so each stack's cluster starts once; a variant's module is a group
    of its own. The longest groups come first (``LONGEST_FIRST``), the rest in collection order.
    First among the hook's implementations: xdist's own, on each worker, reads the groups into the
    test IDs it schedules by."""
    for item in items:
        group = _group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    rank = {group: index for index, group in enumerate(LONGEST_FIRST)}

    def order(item) -> int:
        marker = item.get_closest_marker("xdist_group")
        return rank.get(marker.args[0] if marker else None, len(rank))

    items.sort(key=order)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """On an xdist worker under ``--dist loadgroup``: every grouped test's ID carries its group, or
    the scheduler spreads a group over the workers and each starts every stack's cluster (as with
    pytest 9.2 and pytest-xdist 3.8, pytest-dev/pytest-xdist#1386). Fail then, rather than run slow."""
    if not session.config.getoption("loadgroup", default=False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup lost the group of {len(lost)} test(s), e.g. {lost[0]}: "
                                "pytest-xdist no longer sees xdist_group here (pin pytest as pyproject.toml says)")


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
