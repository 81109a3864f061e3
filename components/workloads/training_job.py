"""``TrainingJob``: a training job deployed as multi-node PyTorch runs on Kubernetes, from the plain
templates in ``workloads.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from ..config import ConfigError, Problem
from .templates import (
    QUEUE_NAME_LABEL,
    SKIP_AWAIT_ANNOTATION,
    rendezvous_service,
    training_job,
    training_pdb,
)
from .training_spec import TrainingJobSpec, validate_training_job
from ..aws.cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider


class JobOptions(TypedDict):
    """The resource options ``JOB_OPTIONS`` sets, to pass as ``**`` to ``ResourceOptions``."""

    ignore_changes: list[str]
    retain_on_delete: bool


JOB_OPTIONS = JobOptions(
    # A Job's pod template is immutable (only a suspended Job's scheduling directives may change:
    # kubernetes.io/docs/concepts/workloads/controllers/job), so any change to the spec would replace
    # the Job and kill the run. While a revision exists, its spec is left alone, suspension included
    # (a Job resumed with kubectl keeps running across `pulumi up`).
    # The queue label too: moving a held Job to the open queue (kubectl label) submits it to Kueue,
    # whose webhook refuses a queue change once the Job is no longer suspended (kubernetes-sigs/kueue
    # pkg/controller/jobframework/validation.go, validateUpdateForQueueName).
    ignore_changes=["spec", f'metadata.labels["{QUEUE_NAME_LABEL}"]'],
    # A new revision is a new resource (``job_resource_name``): the old one leaves the program, and
    # its Job is left to finish instead of being deleted; so is the Job of an app removed from the stack.
    retain_on_delete=True,
)
"""Resource options of every training Job."""


def job_resource_name(name: str, revision: int) -> str:
    """Pulumi name of a revision's Job. A new name per revision, because the engine fills ignored
    properties from the old state whenever there is one (pulumi/pulumi#2657), replacements included:
    a new revision of the same resource would be created with the previous revision's spec."""
    return f"{name}-job" if revision == 1 else f"{name}-job-r{revision}"


def _dependencies(opts: Optional[pulumi.ResourceOptions]) -> list[pulumi.Resource]:
    """The resources ``opts.depends_on`` names, as a list."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    return list(depends_on) if isinstance(depends_on, (list, tuple)) else [depends_on]


@documented_args
@dataclass
class TrainingJobArgs:
    """Arguments of ``TrainingJob``."""

    job: TrainingJobSpec
    """The job; its ``image`` is required."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(TrainingJobArgs)
class TrainingJob(pulumi.ComponentResource):
    """A distributed training job as multi-node PyTorch runs on Kubernetes: an Indexed Job, the
    headless Service its ranks rendezvous through, and the PodDisruptionBudget that keeps every rank.

    Give it the ``cluster`` (or its Kubernetes provider in ``opts``, ``providers={"kubernetes": provider}``), and
    make the component depend on the PriorityClass, namespace and ServiceAccount it uses and the Pod
    Identity association of that ServiceAccount (its children wait for them).

    A queued Job (``queue_name``) is created suspended and Kueue resumes it once it admits the whole
    job; a held one waits in the held LocalQueue until its queue label is changed to the open queue.
    """

    job_name: pulumi.Output[str]
    """Name of the current revision's Job (``<name>``, then ``<name>-r<revision>``)."""

    def __init__(self, name: str, args: Optional[TrainingJobArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TrainingJobArgs, "TrainingJob", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainingJob({name})")
        spec = args.job
        problems = validate_training_job(spec, path=f"TrainingJob({name})")
        if spec.image is None:
            problems.append(Problem(f"TrainingJob({name}).job.image", "is required to run the job"))
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:TrainingJob", name, None, opts)

        # Children do not inherit the component's dependencies: pass them on, so the pods wait for the
        # namespace, PriorityClass, ServiceAccount and Pod Identity association they name.
        after = _dependencies(opts)
        service = rendezvous_service(spec)
        k8s.core.v1.Service(
            f"{name}-rendezvous",
            metadata=service["metadata"],
            spec=service["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        job = training_job(spec)
        metadata = {**job["metadata"], "annotations": {SKIP_AWAIT_ANNOTATION: "true"}}
        k8s.batch.v1.Job(
            job_resource_name(name, spec.revision),
            metadata=metadata,
            spec=job["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=after, **JOB_OPTIONS),
        )
        pdb = training_pdb(spec)
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=pulumi.ResourceOptions(parent=self, depends_on=after)
        )
        self.job_name = pulumi.Output.from_input(spec.job_name)
        self.register_outputs({"jobName": self.job_name})
