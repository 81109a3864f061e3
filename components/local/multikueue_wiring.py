"""MultiKueue across local clusters: one manager and its workers, each a local cluster on loopback.

On AWS the manager's deployment takes each worker's kubeconfig from the worker's stack; locally the
clusters run side by side, so this module does what the two deployments would: it makes the
manager's identity on each worker (``multikueue_worker.worker_objects``), waits for the token
controller to fill its token, writes the kubeconfig Secret for each worker on the manager with the
worker's loopback address and CA, and applies the manager's MultiKueueClusters, MultiKueueConfig
and AdmissionCheck (``multikueue_manager``). With ``admission_check`` it puts the check on every
ClusterQueue of the platform, under a field manager of its own so the platform's fields stay; without
it, the broken variant, the manager admits and runs its jobs itself.
"""

from __future__ import annotations

import base64
import time

import yaml
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..facts import yaml_io
from ..workloads.kueue_flavors import KUEUE_API_VERSION
from ..workloads.multikueue_manager import (
    ADMISSION_CHECK, admission_checks_strategy, kubeconfig_secret, multikueue_admission_check, multikueue_cluster, multikueue_config,
)
from ..workloads.multikueue_worker import TOKEN_SECRET, worker_kubeconfig, worker_objects
from .errors import LocalError
from .platform import Applier

TOKEN_TIMEOUT_SECONDS = 60.0
"""How long the worker's token controller has to fill the manager's token (it does so at once)."""
FIELD_MANAGER = "eks-gpu-training-multikueue"
"""The field manager of the AdmissionCheck put on the platform's ClusterQueues."""
PART_OF = "app.kubernetes.io/part-of=eks-gpu-training"


@dataclass(frozen=True)
class LocalWorker:
    """A local cluster a local manager dispatches to."""

    name: str
    """Its MultiKueueCluster's name on the manager."""
    kubeconfig: Path
    """Its admin kubeconfig, which makes the manager's identity there."""
    server: str
    """Its API server's URL, which the manager's Kueue reaches (loopback)."""
    ca_pem: bytes
    """Its API server's CA certificate."""


def _token(applier: Applier, namespace: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        secret = applier.core.read_namespaced_secret(TOKEN_SECRET, namespace)
        token = (secret.data or {}).get("token")
        if token:
            return base64.b64decode(token).decode()
        if time.monotonic() > deadline:
            raise LocalError(f"the token controller filled no token into {namespace}/{TOKEN_SECRET} in {timeout:.0f} s",
                             "check kube-controller-manager's log in the worker's state folder")
        time.sleep(0.2)


def worker_kubeconfigs(workers: Sequence[LocalWorker], namespaces: Sequence[str], *,
                       timeout: float = TOKEN_TIMEOUT_SECONDS) -> dict[str, str]:
    """The manager's identity made on each worker, and the kubeconfig it reaches each with, by worker."""
    kubeconfigs = {}
    for worker in workers:
        applier = Applier(worker.kubeconfig)
        objects = worker_objects(namespaces)
        applier.apply_all(objects)
        namespace = objects[1]["metadata"]["namespace"]
        kubeconfigs[worker.name] = worker_kubeconfig(worker.server, base64.b64encode(worker.ca_pem).decode(),
                                                     _token(applier, namespace, timeout))
    return kubeconfigs


def manager_objects(kubeconfigs: dict[str, str]) -> list[dict[str, Any]]:
    """What the manager's deployment applies: the Secrets, MultiKueueClusters, MultiKueueConfig and AdmissionCheck."""
    return [*(kubeconfig_secret(name, kubeconfig) for name, kubeconfig in kubeconfigs.items()),
            *(multikueue_cluster(name) for name in kubeconfigs), multikueue_config(list(kubeconfigs)), multikueue_admission_check()]


def connect(manager_kubeconfig: Path, workers: Sequence[LocalWorker], namespaces: Sequence[str], *, admission_check: bool = True,
            log: Callable[[str], None] = print) -> list[str]:
    """Wire the manager to its workers; the names of the ClusterQueues that now dispatch."""
    kubeconfigs = worker_kubeconfigs(workers, namespaces)
    Applier(manager_kubeconfig).apply_all(manager_objects(kubeconfigs))
    log(f"MultiKueue: manager dispatches to {', '.join(kubeconfigs)}")
    return dispatch(manager_kubeconfig, on=admission_check)


def dispatch(manager_kubeconfig: Path, *, on: bool = True) -> list[str]:
    """Put MultiKueue's AdmissionCheck on every ClusterQueue of the platform (``on``), or take it off
    (the broken variant); the ClusterQueues. Applied under ``FIELD_MANAGER``: taking the check off
    gives up only the field it set."""
    manager = Applier(manager_kubeconfig)
    queues = manager.list(KUEUE_API_VERSION, "ClusterQueue", label_selector=PART_OF)
    spec = {"admissionChecksStrategy": admission_checks_strategy([ADMISSION_CHECK])} if on else {}
    for queue in queues:
        queue_name = queue["metadata"]["name"]
        body: dict[str, Any] = {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": queue_name}, "spec": spec}
        manager.resource(body).server_side_apply(body=body, name=queue_name, field_manager=FIELD_MANAGER, force_conflicts=True)
    return [queue["metadata"]["name"] for queue in queues]


def set_worker_lost_timeout(kueue_config: Path, timeout: str) -> None:
    """Write ``multiKueue.workerLostTimeout`` (a duration, ``30s``) into a local manager's Kueue
    configuration file, as a manager stack's ``multiKueue.workerLostTimeoutMinutes`` renders it;
    Kueue reads it when it restarts (``LocalCluster.restart("kueue")``)."""
    configuration = yaml_io.load(kueue_config.read_text())
    configuration["multiKueue"] = {**(configuration.get("multiKueue") or {}), "workerLostTimeout": timeout}
    kueue_config.write_text(yaml.safe_dump(configuration, sort_keys=False))
