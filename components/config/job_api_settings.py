"""The distributed job APIs training apps may run as: JobSet and Kubeflow Trainer, each a controller
release at a pinned chart version, installed when a training app asks for its kind."""

from __future__ import annotations

from typing import Annotated, Optional

from .base import _Model, supported_version

JOB_KINDS = ("Job", "JobSet", "TrainJob")
"""What a training app runs as: an Indexed Job (``batch/v1``), a JobSet (``jobset.x-k8s.io/v1alpha2``)
or a Kubeflow Trainer TrainJob (``trainer.kubeflow.org/v1alpha1``, which Trainer runs as a JobSet)."""

JOBSET_CHART_VERSIONS = ("0.12.0",)
"""JobSet chart versions this library derives values and objects for (kubernetes-sigs/jobset v0.12.0,
whose module the local control plane builds the controller from)."""

TRAINER_CHART_VERSIONS = ("2.3.0",)
"""Kubeflow Trainer chart versions this library derives values and objects for (kubeflow/trainer
v2.3.0; its chart requires JobSet 0.12.0)."""


class JobSetConfig(_Model):
    """JobSet: a group of Jobs run, restarted and finished as one, with a headless Service of its own."""

    enabled: Optional[bool] = None
    """Install the JobSet controller. Default: when a training app has `kind: JobSet` or `kind: TrainJob` (Trainer runs its jobs as JobSets)."""
    chart_version: Annotated[str, supported_version(JOBSET_CHART_VERSIONS)] = JOBSET_CHART_VERSIONS[0]
    """Version of the `jobset` chart (oci://registry.k8s.io/jobset/charts). Default: 0.12.0."""


class TrainerConfig(_Model):
    """Kubeflow Trainer v2: TrainJobs over TrainingRuntimes, run as JobSets, with torchrun's environment filled in."""

    enabled: Optional[bool] = None
    """Install the Kubeflow Trainer controller. Default: when a training app has `kind: TrainJob`."""
    chart_version: Annotated[str, supported_version(TRAINER_CHART_VERSIONS)] = TRAINER_CHART_VERSIONS[0]
    """Version of the `kubeflow-trainer` chart (oci://ghcr.io/kubeflow/charts). Default: 2.3.0."""
