"""Local clusters for the cluster tier: started for a stack file (a shipped one, or a variant the
test writes), with the environment the tests drive them through."""

from __future__ import annotations

import copy
import random
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
import yaml

from tests.support.harness import PROJECT_ROOT

from eks_gpu_training.facts.gpu_nodes import GPU_RESOURCE
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.cluster import LocalCluster
from eks_gpu_training.platform.stack_files import StackFile, locate_stack, stack_file_name
from eks_gpu_training.workloads.job_sets import training_jobset
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME, training_job_spec

from tests.support import start_slots
from tests.support.environment import Environment
from tests.support.kueue import KUEUE_API
from tests.support.manifests import submitted_group_run, submitted_run, unique
from eks_gpu_training.workloads.kueue_queues import LOCAL_QUEUE


def _require_prerequisites() -> None:
    """The control plane's binaries, or the toolchain to build them. The charts come as a user's
    do (``tests/conftest.py``'s ``configured_charts``: the loopback mirror); a chart no source can
    supply fails the cluster's start, one line per chart."""
    unbuilt = [c.name for c in builds.CONTROL_PLANE if not builds.is_built(c)]
    if unbuilt and builds.missing_toolchain():
        pytest.fail(f"the cluster tier cannot run: {builds.missing_toolchain()}, and {', '.join(unbuilt)} "
                    f"are not built in {builds.cache_root()}", pytrace=False)


class RunningCluster:
    """A started local cluster, its stack and its environment."""

    def __init__(self, cluster: LocalCluster, *, bare: bool = False):
        self.cluster = cluster
        self.env = Environment(cluster.kubeconfig)
        self.bare = bare
        """Started without the platform (no Kueue, no known state to keep)."""

    @property
    def stack(self) -> str:
        return self.cluster.stack

    @property
    def args(self):
        return self.cluster.args

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def stack_file(self) -> StackFile:
        """The stack file the cluster was started from."""
        return locate_stack(self.cluster.stack_path or self.stack, PROJECT_ROOT)

    def platform_object(self, kind: str, name: str) -> dict[str, Any]:
        """A copy of an object the platform applied, as the stack renders it."""
        for obj in self.cluster.platform.objects:
            if obj["kind"] == kind and obj["metadata"]["name"] == name:
                return copy.deepcopy(obj)
        raise AssertionError(f"the platform of stack {self.stack} applied no {kind} {name}")

    def training_app(self):
        """The stack's first training app."""
        apps = list(self.args.scheduling.training_apps)
        assert apps, f"stack {self.stack} declares no training app"
        return apps[0]

    def submit_run(self, app: str, *, parallelism: Optional[int] = None) -> tuple[str, str]:
        """A new run of the stack's job ``app`` (a name of its own), submitted to the queue: its
        namespace and name."""
        run = submitted_run(self.platform_object("Job", app), unique(app), parallelism=parallelism)
        self.env.apply(run)
        return run["metadata"]["namespace"], run["metadata"]["name"]

    def submit_group_run(self, kind: str, app: str, *, nodes: Optional[int] = None) -> tuple[str, str]:
        """A new run of the stack's JobSet or TrainJob ``app`` (a name of its own), submitted to the
        queue: its namespace and name. ``nodes`` changes how many nodes it runs on."""
        run = submitted_group_run(self.platform_object(kind, app), unique(app), nodes=nodes)
        self.env.apply(run)
        return run["metadata"]["namespace"], run["metadata"]["name"]

    def cluster_queue_of(self, namespace: str) -> str:
        """The ClusterQueue the namespace's jobs are admitted by (its team's, or its own)."""
        local = self.env.get(KUEUE_API, "LocalQueue", LOCAL_QUEUE, namespace)
        assert local is not None, f"namespace {namespace} has no LocalQueue {LOCAL_QUEUE}"
        return local["spec"]["clusterQueue"]

    def gpu_quota(self, namespace: str) -> int:
        """The GPUs the namespace's ResourceQuota allows."""
        quota = self.env.core.read_namespaced_resource_quota(QUOTA_NAME, namespace)
        return int(quota.spec.hard[f"requests.{GPU_RESOURCE}"])


def submit_jobset_run(running: RunningCluster, app_name: str, **changes: Any) -> tuple[str, str]:
    """The JobSet the stack makes for ``app_name`` as ``kind: JobSet`` (its own generator, at a
    revision of its own so the name is new), submitted to the open queue: its namespace and name."""
    app = next(a for a in running.args.scheduling.training_apps if a.name == app_name)
    spec = replace(training_job_spec(app, running.args), kind="JobSet", queue_name=LOCAL_QUEUE, suspend=False,
                   revision=random.randint(2, 9999), **changes)  # noqa: S311 - a name, not a secret
    jobset = training_jobset(spec)
    running.env.apply(jobset)
    return jobset["metadata"]["namespace"], jobset["metadata"]["name"]


def stack_variant(folder: Path, stack: str, change: Callable[[dict[str, Any]], None], *,
                  name: Optional[str] = None) -> Path:
    """A stack file in ``folder``: stack ``stack``'s settings as ``change`` leaves them, under the
    file name of ``name`` (the stack's own by default)."""
    config = locate_stack(stack, PROJECT_ROOT).settings()
    change(config)
    path = folder / stack_file_name(name or stack)
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def start(stack: str, state: Path, *, stack_path: Optional[Path] = None, bare: bool = False,
          scale: Optional[int] = None) -> Iterator[RunningCluster]:
    """A local cluster of ``stack`` (from ``stack_path`` when given; its GPU pools grown to ``scale``
    nodes, as ``up --scale``) for as long as the caller iterates, stopped afterwards whatever happened.
    It starts in one of the session's start slots (``start_slots``)."""
    _require_prerequisites()
    cluster = LocalCluster(stack, state, project_root=PROJECT_ROOT, stack_path=stack_path, scale=scale,
                           log=lambda line: print(f"[{stack}] {line}"), attached=True)
    try:
        with start_slots.start_slot():
            cluster.up(bare=bare)
    except Exception:
        cluster.down()
        raise
    try:
        yield RunningCluster(cluster, bare=bare)
    finally:
        cluster.down()
