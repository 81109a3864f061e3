"""The cluster tier: each stack file's platform on a local Kubernetes control plane (upstream etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue, Karpenter's KWOK provider).

Each local cluster is started once per session and stopped when the session ends, whatever the
tests did; a session that cannot build or start one fails and says what is missing (this tier is
never skipped: CI must run it).
"""

from __future__ import annotations

import os

import pytest
from xdist.scheduler import LoadGroupScheduling

from tests.support import start_slots
from tests.support.clusters import RunningCluster, start
# The fault modules' fixtures: their two shared clusters, and the job or group each test runs
# (node_faults says why).
from tests.support.node_faults import (  # noqa: F401 - fixtures, found by name
    prod_faults_cluster, prod_unreachable_cluster, running_group, running_job,
)

# Go's collector at twice its default heap target in every process the clusters start (they inherit
# the workers' environment): a quarter of an API server's start was its collector, and the tier is
# bound by the two cores. GOGC=200 took the tier's CPU from 525 to 477 seconds for about 2.5 GB more
# memory at its peak (17.5 of 24 GB); a GOGC set outside the tests is kept. On the tier as it is, 300
# saved nothing measurable (1,584 CPU-seconds against 1,544) and took the peak to 21 of 24 GB.
os.environ.setdefault("GOGC", "200")
# And one processor each: up to thirteen clusters' Go processes (about eighty) share two cores, and
# with two processors each, their schedulers' idle threads spin looking for work and their
# collectors run in parallel, both on cores the others need. GOMAXPROCS=1 took a run's CPU from 483
# to 450 seconds (the API servers' from 198 to 180, etcd's from 31 to 26), and the tier's median of
# three from 300.6 s to 286.3 s. Again only when the environment does not set it.
os.environ.setdefault("GOMAXPROCS", "1")


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory):
    yield from start("dev", tmp_path_factory.mktemp("local-dev"))


@pytest.fixture(scope="session")
def prod_cluster(tmp_path_factory):
    yield from start("prod", tmp_path_factory.mktemp("local-prod"))


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_cluster(request):
    return request.getfixturevalue(f"{request.param}_cluster")


SHARED_VARIANTS = {"prod_faults_cluster": "faults", "prod_unreachable_cluster": "unreachable"}
"""Session-scoped clusters of a stack variant that several modules share (``tests/support/node_faults``),
each with the group its modules' tests form, in place of a cluster and a group per module."""
SESSION_CLUSTERS = {"prod": "prod_cluster", "dev": "dev_cluster", **{group: fixture for fixture, group in SHARED_VARIANTS.items()}}
"""The session cluster each group's tests run on, which its worker stops once it moves on to a group
that runs on another (``pytest_runtest_teardown``)."""


def _group_of(item) -> str | None:
    """The xdist group of a test: its stack's, when it runs on a stack's session cluster; a shared
    variant's (``SHARED_VARIANTS``); its module's, when it starts a cluster of its own (a stack
    variant: a wider pool, a capped namespace, repair off), so those modules spread over the
    workers beside the stacks' groups. Prod's tests are one group on one cluster: split in two
    (a second prod cluster for half its modules), the second half waited seven minutes for a start
    slot, then ran for two."""
    callspec = getattr(item, "callspec", None)
    names = getattr(item, "fixturenames", ())
    stack = next((s for s in ("prod", "dev") if f"{s}_cluster" in names), None)
    if callspec is not None and "any_cluster" in callspec.params:
        stack = callspec.params["any_cluster"]
    if stack is not None:
        return stack
    shared = next((group for fixture, group in SHARED_VARIANTS.items() if _scope_of(item, fixture) == "session"), None)
    if shared is not None:
        return shared
    if any(name.endswith("_cluster") for name in names) or _uses_module_fixture(item):
        return item.module.__name__
    return None


def _scope_of(item, fixture: str) -> str | None:
    """The scope of the definition of ``fixture`` the test uses (a module may override a shared one
    with a variant of its own), or None when it uses none."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.get(fixture, ()) if info is not None else ()
    return definitions[-1].scope if definitions and fixture in item.fixturenames else None


def _uses_module_fixture(item) -> bool:
    """Whether the test uses a module-scoped fixture (a fleet, a registry, a built program): its
    module's tests then go to one worker, or each worker handed one of them sets the fixture up
    again (a second MultiKueue fleet of three clusters, a second TypeScript build)."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        definition.scope == "module" for definitions in info.name2fixturedefs.values() for definition in definitions)


GROUP_ORDER = ("test_multikueue", "faults", "unreachable", "test_karpenter", "prod", "dev", "test_plugin_package",
               "test_engine_in_cluster", "test_node_repair", "test_engine", "test_admission_deadlock", "simulate",
               "test_training_jobs", "test_kubernetes_minor", "test_verify", "test_health_gate_switch_on")
"""The order the groups are handed to the workers in (``--no-loadscope-reorder``), and their
clusters' order in the start slots (``start_slots``); groups not named follow, in collection
order. The README runs thirteen workers: the first thirteen groups go one to a worker at the
start, the longest first: MultiKueue's three clusters, its 200 jobs and its lost worker (the
longest chain of the tier), then the groups whose waits are the controllers' own clocks (the
fault modules' shared cluster: a failed check, a deleted node's 40 s for a Job and for a JobSet or
TrainJob; an unreachable node's grace period and Kueue's minute, then the gate's rounds on checks no
node can pass, on a second shared cluster; Karpenter's launches and consolidations), the stacks'
session clusters, the plugin package's programs in three languages (a TypeScript build among them),
the engine's in-cluster module, node auto repair's wait, the engine's other module, the two gangs'
deadlock, the simulator and the capped namespace. The next groups go to the first workers done (a
worker runs a test only once it holds the next, or is told to stop): the Kubernetes minors (skipped
unless built), verify's three-node pool and the gate switched on. A group left after those would go
to the first worker down to its last test (``LastTestScheduling``), which may still run for two
minutes: a long one there ended the session late (docs/benchmarks.md, "CI's time")."""


class LastTestScheduling(LoadGroupScheduling):
    """``--dist loadgroup``, a worker given its next group only when its current one is down to
    its last test (which a worker runs once it knows the next, so it never waits idle for it).
    xdist's own hands out the next group at two tests left: a fault module then took a short group
    on while its last two tests still had two minutes of waits to run, and the short group ended
    the session behind them."""

    def _reschedule(self, node) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadgroup":
        return LastTestScheduling(config, log)
    return None


def _rank(item) -> int:
    marker = item.get_closest_marker("xdist_group")
    group = marker.args[0] if marker else None
    return GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """One xdist group per stack (``--dist loadgroup``): a worker starts one stack's session cluster
    and runs that stack's tests, so each stack's cluster starts once; a variant's module is a group
    of its own. The groups come in ``GROUP_ORDER``, the rest in collection order.
    First among the hook's implementations: xdist's own, on each worker, reads the groups into the
    test IDs it schedules by."""
    for item in items:
        group = _group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_rank)


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


@pytest.fixture(scope="session", autouse=True)
def cluster_start_slots(tmp_path_factory):
    """The start slots every worker of the session shares (the folder above each worker's own
    temporary folder)."""
    start_slots.folder = tmp_path_factory.getbasetemp().parent / "cluster-start-slots"
    start_slots.folder.mkdir(exist_ok=True)
    yield
    start_slots.folder = None


CRITICAL_GROUP = "test_multikueue"
"""The tier's longest chain, and one that waits rather than computes: its 200 jobs go through
Kueue's manager at the 5 requests a second its clients to each worker are held to, and its other
tests on the controllers' own clocks. Its three clusters still need the CPU to keep up with those
waits: on the loaded cores its 200 jobs took 393 to 429 s against 314 s alone. With its members
starting one after another the session ended with it; started side by side, it ends about a minute
and a half before the session, whose end the two cores' work then sets."""
YIELDING_NICENESS = 5
"""The niceness of every other group's worker (and of what it starts: its clusters, the engine's
programs) from its first test on: they give way to the critical group's three clusters, each
getting about a third of their share while those want a core, and take up whatever they leave."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The test's group ranks its cluster starts in the start slots; on an xdist worker, a group
    other than ``CRITICAL_GROUP`` runs at ``YIELDING_NICENESS`` (before its fixtures start anything)."""
    start_slots.rank = _rank(item)
    if os.environ.get("PYTEST_XDIST_WORKER") and _group_of(item) != CRITICAL_GROUP and os.nice(0) < YIELDING_NICENESS:
        os.nice(YIELDING_NICENESS - os.nice(0))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A session cluster (``SESSION_CLUSTERS``) stops on this worker once the worker moves on to a
    group that does not run on it: on the two cores its idle control plane, controllers and
    simulated nodes took about a seventh of one, for the rest of the session. A later group that
    needs it again starts it again (the fixture set up anew), as with fewer workers than groups."""
    result = yield
    fixture = SESSION_CLUSTERS.get(_group_of(item) or "")
    if nextitem is None or fixture is None or SESSION_CLUSTERS.get(_group_of(nextitem) or "") == fixture:
        return result
    # pytest's own per-fixture teardown (what the session's end would run): dependants first.
    for definition in item._fixtureinfo.name2fixturedefs.get(fixture, ()):
        if definition.cached_result is not None:
            definition.finish(item._request)
            print(f"[{fixture}] stopped: this worker moves on to group {_group_of(nextitem)}")
    return result


@pytest.fixture(autouse=True)
def known_state(request):
    """Each test starts from its clusters' known state and leaves them in it: Kueue's ClusterQueue
    usage and admitted count and its Workloads back to what they were (a Workload for every queued
    Job), and no pod but the DaemonSets' on (or pending for) a GPU node. A test that leaves
    something behind fails at its teardown, naming it, instead of the next test timing out on a
    quota or a node it cannot get; a bare cluster (no platform, no Kueue) has no such state."""
    clusters = [request.getfixturevalue(name) for name in request.fixturenames if name.endswith("_cluster")]
    # Once each: a module may name a shared cluster under a fixture of its own too.
    clusters = list({id(c): c for c in clusters if isinstance(c, RunningCluster) and not c.bare}.values())
    for running in clusters:
        running.env.expect_known_state(when=f"on {running.stack} before the test")
    yield
    for running in clusters:
        running.env.expect_known_state(when=f"on {running.stack} after the test")
