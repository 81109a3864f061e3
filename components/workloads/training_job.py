"""``TrainingJob``: a training job deployed as multi-node PyTorch runs on Kubernetes, from the plain
templates in ``workloads.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from ..config import ConfigError, Problem
from .templates import (
    SKIP_AWAIT_ANNOTATION,
    TrainingJobSpec,
    rendezvous_service,
    training_job,
    training_pdb,
    validate_training_job,
)
from ..config.documented import documented_args, documented_component


@documented_args
@dataclass
class TrainingJobArgs:
    """Arguments of ``TrainingJob``."""

    job: TrainingJobSpec
    """The job; its ``image`` is required."""


@documented_component(TrainingJobArgs)
class TrainingJob(pulumi.ComponentResource):
    """A distributed training job as multi-node PyTorch runs on Kubernetes: an Indexed Job, the
    headless Service its ranks rendezvous through, and the PodDisruptionBudget that keeps every rank.

    Pass the cluster's Kubernetes provider in ``opts`` (``providers={"kubernetes": provider}``), and
    make the component depend on the PriorityClass and namespace it uses.
    """

    job_name: pulumi.Output[str]
    """Name of the Job (and of its Service and PDB)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        spec = args.job
        problems = validate_training_job(spec, path=f"TrainingJob({name})")
        if spec.image is None:
            problems.append(Problem(f"TrainingJob({name}).job.image", "is required to run the job"))
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:TrainingJob", name, None, opts)

        service = rendezvous_service(spec)
        k8s.core.v1.Service(
            f"{name}-rendezvous", metadata=service["metadata"], spec=service["spec"], opts=pulumi.ResourceOptions(parent=self)
        )
        job = training_job(spec)
        metadata = {**job["metadata"], "annotations": {SKIP_AWAIT_ANNOTATION: "true"}}
        k8s.batch.v1.Job(
            f"{name}-job",
            metadata=metadata,
            spec=job["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                # The pod template is immutable, so a change replaces the Job, and its fixed name must be free first.
                delete_before_replace=True,
                # Someone who resumed a suspended Job with kubectl keeps it running across `pulumi up`.
                ignore_changes=["spec.suspend"],
            ),
        )
        pdb = training_pdb(spec)
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=pulumi.ResourceOptions(parent=self)
        )
        self.job_name = pulumi.Output.from_input(spec.name)
        self.register_outputs({"jobName": self.job_name})
