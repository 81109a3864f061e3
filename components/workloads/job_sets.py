"""A training job run as a group: a JobSet, or a Kubeflow Trainer TrainJob over a TrainingRuntime of
its own. Plain functions of a ``TrainingJobSpec`` returning plain Kubernetes data, like
``templates.py``, whose pod template both kinds carry unchanged, so every placement rule holds
whatever runs the pods.

What a group adds to an Indexed Job (JobSet docs, "Failure Policy" and "Network"):

- when one rank fails, the JobSet recreates its Job with every pod (``restartStrategy:
  Recreate``), up to ``maxRestarts`` times; an Indexed Job would keep the other ranks waiting
  until NCCL's timeout;
- the JobSet makes the headless Service its pods' DNS names live under, named after the JobSet;
- Kueue admits a JobSet, and a TrainJob, as one workload with one pod set per replicated Job, with
  the same topology request.

A TrainJob names its runtime; Trainer builds the JobSet from the runtime's template, fills in
torchrun's environment (``PET_NNODES``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ...) in the
``node`` container, and names the JobSet after the TrainJob. Each revision gets a runtime of its
own, named as its TrainJob, so a running job's runtime never changes under it.
"""

from __future__ import annotations

from typing import Any

from .templates import job_metadata, training_labels, training_pod_template
from .training_spec import REPLICATED_JOB, TrainingJobSpec

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
TRAINER_GROUP = "trainer.kubeflow.org"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""Marks the runtime's replicated Job that runs the trainer (kubeflow/trainer pkg/constants,
``LabelTrainJobAncestor``): Trainer applies the TrainJob's ``trainer`` settings to it."""
TRAINER_STEP = "trainer"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
"""The framework a runtime is for (``torch``), as Trainer's own runtimes label themselves."""


def _indexed_job(spec: TrainingJobSpec) -> dict[str, Any]:
    """The spec of the group's one Job: a pod per node, all started together, rank = completion index."""
    return {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimit": spec.backoff_limit,
        "template": training_pod_template(spec),
    }


def _group_spec(spec: TrainingJobSpec, job_labels: dict[str, str]) -> dict[str, Any]:
    """What a JobSet and a TrainingRuntime's JobSet template share: one replicated Job, the whole
    group restarted when a rank fails, and the Service's DNS names published before the pods are
    Ready (ranks look each other up while they start)."""
    return {
        "failurePolicy": {"maxRestarts": spec.max_restarts, "restartStrategy": "Recreate"},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [
            {"name": REPLICATED_JOB, "replicas": 1, "template": {"metadata": {"labels": job_labels}, "spec": _indexed_job(spec)}}
        ],
    }


def _queued(spec: TrainingJobSpec) -> bool:
    """Created suspended: held by ``suspend``, or queued for Kueue to resume on admission."""
    return spec.suspend or spec.queue_name is not None


def training_jobset(spec: TrainingJobSpec) -> dict[str, Any]:
    """The JobSet of one replicated Job of ``nodes`` pods."""
    body = _group_spec(spec, training_labels(spec))
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {**job_metadata(spec), "name": spec.job_name},
        "spec": {**body, "suspend": _queued(spec)},
    }


def training_runtime(spec: TrainingJobSpec) -> dict[str, Any]:
    """The TrainingRuntime of one revision of the app: torch on ``nodes`` nodes, and the JobSet
    template whose ``node`` Job carries the pod template."""
    labels = {**training_labels(spec), FRAMEWORK_LABEL: "torch"}
    metadata = {"name": spec.job_name, "namespace": spec.namespace, "labels": labels}
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": spec.nodes, "torch": {}},
            "template": {"spec": _group_spec(spec, {**training_labels(spec), ANCESTOR_LABEL: TRAINER_STEP})},
        },
    }


def train_job(spec: TrainingJobSpec) -> dict[str, Any]:
    """The TrainJob that runs ``training_runtime(spec)`` with ``node_gpus`` processes per node; Kueue's
    queue label goes on it."""
    metadata = job_metadata(spec)
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {**metadata, "name": spec.job_name},
        "spec": {
            "runtimeRef": {"name": spec.job_name, "apiGroup": TRAINER_GROUP, "kind": "TrainingRuntime"},
            # One torchrun process per GPU; Trainer would derive the same from the pod's GPU request.
            "trainer": {"numNodes": spec.nodes, "numProcPerNode": spec.node_gpus},
            "suspend": _queued(spec),
        },
    }

