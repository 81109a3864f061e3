"""The cluster tier: each stack file's platform on a local Kubernetes control plane (upstream etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue, Karpenter's KWOK provider).

Each local cluster is started once per session and stopped when the session ends, whatever the
tests did; a session that cannot build or start one fails and says what is missing (this tier is
never skipped: CI must run it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import PROJECT_ROOT

from eks_gpu_training.local import build as builds
from eks_gpu_training.local.cluster import LocalCluster

from kube import Accounting, Kube, wait_for


def _require_prerequisites() -> None:
    """The control plane's binaries, or the toolchain to build them. The charts come as a user's
    do (``tests/conftest.py``'s ``configured_charts``: the loopback mirror); a chart no source can
    supply fails the cluster's start, one line per chart."""
    missing = []
    unbuilt = [c.name for c in builds.CONTROL_PLANE if not builds.is_built(c)]
    if unbuilt and builds.missing_toolchain():
        missing.append(f"{builds.missing_toolchain()}, and {', '.join(unbuilt)} are not built in {builds.cache_root()}")
    if missing:
        pytest.fail("the cluster tier cannot run: " + "; ".join(missing), pytrace=False)


class RunningCluster:
    """A started local cluster and a client for it."""

    def __init__(self, cluster: LocalCluster, *, bare: bool = False):
        self.cluster = cluster
        self.kube = Kube(cluster.kubeconfig)
        self.bare = bare
        self._known_state: Accounting | None = None

    def known_state(self) -> Accounting:
        """Kueue's books and the GPU nodes' pods as the platform left them, read before the
        cluster's first test (once Kueue has a Workload for every Job queued to it), which every
        test starts from and returns to."""
        if self._known_state is None:
            wait_for(lambda: not self.kube.jobs_without_workload(), timeout=60,
                     what=f"Kueue making a Workload for every queued Job of {self.stack}")
            self._known_state = self.kube.accounting()
        return self._known_state

    @property
    def stack(self) -> str:
        return self.cluster.stack

    @property
    def args(self):
        return self.cluster.args

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig


def start(stack: str, state: Path, *, stack_path: Path | None = None, bare: bool = False):
    _require_prerequisites()
    cluster = LocalCluster(stack, state, project_root=PROJECT_ROOT, stack_path=stack_path,
                           log=lambda line: print(f"[{stack}] {line}"), attached=True)
    try:
        cluster.up(bare=bare)
    except Exception:
        cluster.down()
        raise
    try:
        yield RunningCluster(cluster, bare=bare)
    finally:
        cluster.down()


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
    usage and admitted count and its Workloads back to what they were, and no pod but the
    DaemonSets' on (or pending for) a GPU node. A test that leaves something behind fails at its
    teardown, naming it, instead of the next test timing out on a quota or a node it cannot get;
    a bare cluster (no platform, no Kueue) has no such state."""
    clusters = [request.getfixturevalue(name) for name in request.fixturenames if name.endswith("_cluster")]
    clusters = [c for c in clusters if isinstance(c, RunningCluster) and not c.bare]
    for running in clusters:
        running.kube.wait_accounting(running.known_state(), when=f"on {running.stack} before the test")
    yield
    for running in clusters:
        running.kube.wait_accounting(running.known_state(), when=f"on {running.stack} after the test")
