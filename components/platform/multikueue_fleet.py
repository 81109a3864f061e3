"""A stack's part in a MultiKueue fleet (``multiKueue``), as the in-cluster composition builds it.

- **worker**: ``MultiKueueWorker`` on the stack's cluster; its kubeconfig (the cluster's endpoint and
  CA, read from the cluster's kubeconfig, and the manager's token) is the stack's secret output
  ``multiKueueKubeconfig``.
- **manager**: ``MultiKueueManager`` with one target per worker: a worker named by ``stack`` is read
  by stack reference (its ``multiKueueKubeconfig``); one named by ``clusterName`` and ``region`` gets
  its ``MultiKueueWorker`` from this deployment, through a provider whose deployer reaches it. The
  ClusterQueues then run its AdmissionCheck.
- **before anything**: a worker whose stack file is in this project must mirror the manager's queues
  (``multikueue_queues``); a worker of another project is checked by nobody here, say so in its docs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import pulumi

from ..aws.eks_cluster import ClusterRef
from ..config import ConfigError, GpuTrainingPlatformArgs, Problem
from ..facts import yaml_io
from ..workloads.multikueue_manager import MultiKueueManager, MultiKueueManagerArgs, MultiKueueWorkerTarget
from ..workloads.multikueue_queues import fleet_queues, queue_mismatch_problems
from ..workloads.multikueue_worker import MultiKueueWorker, MultiKueueWorkerArgs
from .stack_files import locate_stack

KUBECONFIG_OUTPUT = "multiKueueKubeconfig"
"""The worker stack's output a manager reads by stack reference."""


def endpoint_and_authority(kubeconfig: Any, endpoint: Optional[str] = None) -> tuple[str, Optional[str]]:
    """The server URL and base64 CA a manager reaches the worker with: its kubeconfig's (a document,
    JSON or YAML), the server else ``endpoint``. Without CA data the kubeconfig Kueue gets verifies the
    server by the system's roots."""
    document = kubeconfig if isinstance(kubeconfig, dict) else yaml_io.load(kubeconfig) if isinstance(kubeconfig, str) else None
    clusters = document.get("clusters") if isinstance(document, dict) else None
    cluster = (clusters[0].get("cluster") or {}) if clusters else {}
    server = cluster.get("server") or endpoint
    if not server:
        raise ConfigError([Problem("multiKueue.worker", "the cluster's kubeconfig names no server and the cluster no endpoint: "
                                   "a manager could not reach this worker")])
    return server, cluster.get("certificate-authority-data")


def worker(parent: pulumi.Resource, name: str, args: GpuTrainingPlatformArgs, cluster: ClusterRef,
           after: Sequence[pulumi.Resource]) -> MultiKueueWorker:
    """This stack's identity for its manager; its kubeconfig is the stack's ``multiKueueKubeconfig``."""
    reach = pulumi.Output.all(cluster.kubeconfig, cluster.endpoint).apply(lambda values: endpoint_and_authority(*values))
    return MultiKueueWorker(f"{name}-multikueue-worker", MultiKueueWorkerArgs(
        namespaces=[ns.name for ns in args.scheduling.namespaces], endpoint=reach[0], certificate_authority=reach[1],
        cluster=cluster), opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)))


def _target(parent: pulumi.Resource, name: str, args: GpuTrainingPlatformArgs, index: int) -> MultiKueueWorkerTarget:
    entry = args.multi_kueue.workers[index]
    if entry.stack is not None:
        reference = pulumi.StackReference(f"{name}-worker-{entry.name}", stack_name=entry.stack,
                                          opts=pulumi.ResourceOptions(parent=parent))
        return MultiKueueWorkerTarget(entry.name, reference.require_output(KUBECONFIG_OUTPUT).apply(str))
    # validate_multikueue refuses a worker with neither a stack nor both of these.
    ref = ClusterRef.from_existing(str(entry.cluster_name), str(entry.region), resource_name=f"{name}-worker-{entry.name}",
                                   opts=pulumi.ResourceOptions(parent=parent))
    remote = worker(parent, f"{name}-{entry.name}", args, ref, ())
    return MultiKueueWorkerTarget(entry.name, remote.kubeconfig)


def manager(parent: pulumi.Resource, name: str, args: GpuTrainingPlatformArgs, cluster: ClusterRef,
            after: Sequence[pulumi.Resource]) -> MultiKueueManager:
    """The manager's MultiKueue objects, one target per worker in the order the stack lists them."""
    targets = [_target(parent, name, args, i) for i in range(len(args.multi_kueue.workers))]
    return MultiKueueManager(f"{name}-multikueue-manager", MultiKueueManagerArgs(workers=targets, cluster=cluster),
                             opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)))


def project_worker_args(args: GpuTrainingPlatformArgs, project_dir: Optional[Path]) -> dict[int, GpuTrainingPlatformArgs]:
    """The arguments of each worker whose stack file this project holds (a plain stack name), by
    its index in ``multiKueue.workers``."""
    found = {}
    for i, entry in enumerate(args.multi_kueue.workers):
        if entry.stack is None or "/" in entry.stack or project_dir is None:
            continue
        located = locate_stack(entry.stack, project_dir)
        if located.path.is_file():
            found[i] = located.platform_args()
    return found


def fleet_problems(args: GpuTrainingPlatformArgs, workers: dict[int, GpuTrainingPlatformArgs]) -> list[Problem]:
    """Each worker given (by index) is a worker and mirrors the manager's queues."""
    problems = []
    manager_queues = fleet_queues(args)
    for i, worker_args in sorted(workers.items()):
        entry = args.multi_kueue.workers[i]
        path = f"multiKueue.workers[{i}]"
        if not worker_args.multi_kueue.worker:
            problems.append(Problem(f"{path}.stack", f"stack {entry.stack} is no worker: set multiKueue.worker: true there, "
                                    "or it exports no kubeconfig for this manager"))
        problems.extend(queue_mismatch_problems(path, entry.name, manager_queues, fleet_queues(worker_args)))
    return problems
