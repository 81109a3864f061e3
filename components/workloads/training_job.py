"""``TrainingJob``: a training job deployed as multi-node PyTorch runs on Kubernetes, from the plain
templates in ``templates.py`` (an Indexed Job) and ``job_sets.py`` (a JobSet, or a TrainJob over its
TrainingRuntime)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, TypedDict, cast

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
from .job_sets import train_job, training_jobset, training_runtime
from .training_spec import TrainingJobSpec, validate_training_job
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
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


KIND_RESOURCE = {"Job": "job", "JobSet": "jobset", "TrainJob": "trainjob"}
"""The Pulumi name part of each kind's job object."""


def job_resource_name(name: str, revision: int, kind: str = "Job") -> str:
    """Pulumi name of a revision's job object. A new name per revision, because the engine fills ignored
    properties from the old state whenever there is one (pulumi/pulumi#2657), replacements included:
    a new revision of the same resource would be created with the previous revision's spec. A new
    name per kind too: another kind is another object, and the old one is retained like an old
    revision's (``JOB_OPTIONS``)."""
    part = KIND_RESOURCE[kind]
    return f"{name}-{part}" if revision == 1 else f"{name}-{part}-r{revision}"


def _dependencies(opts: Optional[pulumi.ResourceOptions]) -> list[pulumi.Input[pulumi.Resource]]:
    """The resources ``opts.depends_on`` names, as a list."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, (list, tuple)):
        return list(depends_on)
    return [cast("pulumi.Input[pulumi.Resource]", depends_on)]  # one resource, or an Output of one: Pulumi refuses an Output of a list here


def _custom(name: str, body: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=body["apiVersion"], kind=body["kind"], metadata=body["metadata"], spec=body["spec"], opts=opts,
    )


@documented_args
@dataclass
class TrainingJobArgs:
    """Arguments of ``TrainingJob``."""

    job: TrainingJobSpec
    """The job; its ``image`` is required."""
    kind: Optional[str] = None
    """What runs the job: ``Job``, ``JobSet`` or ``TrainJob``; default: the job's own ``kind`` (``Job``)."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""
    job_after: Sequence[pulumi.Resource] = ()
    """More for the job's objects to wait for, beyond ``opts``' dependencies, which are all a
    TrainJob's TrainingRuntime waits for: give those only the runtime's needs so it exists early,
    since Trainer's webhook refuses a TrainJob whose runtime it has not seen and the provider won't
    retry. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(TrainingJobArgs)
class TrainingJob(pulumi.ComponentResource):
    """A distributed training job as multi-node PyTorch runs on Kubernetes, of the spec's ``kind``:
    an Indexed Job; a JobSet (which restarts every rank when one fails); or a TrainJob and its
    TrainingRuntime (Kubeflow Trainer runs it as such a JobSet). Every kind gets the headless
    Service its ranks rendezvous through and the PodDisruptionBudget that keeps every rank. A JobSet or TrainJob needs its controller in the cluster (``JobSetController``,
    ``TrainerController``).

    Give it the ``cluster`` (or its Kubernetes provider in ``opts``, ``providers={"kubernetes": provider}``), and
    make the component depend on the PriorityClass, namespace and ServiceAccount it uses and the Pod
    Identity association of that ServiceAccount (its children wait for them).

    A queued Job (``queue_name``) is created suspended and Kueue resumes it once it admits the whole
    job; a held one waits in the held LocalQueue until its queue label is changed to the open queue.
    """

    job_name: pulumi.Output[str]
    """Name of the current revision's Job, JobSet or TrainJob (``<name>``, then ``<name>-r<revision>``)."""

    def __init__(self, name: str, args: Optional[TrainingJobArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TrainingJobArgs, "TrainingJob", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainingJob({name})")
        spec = args.job if args.kind is None else replace(args.job, kind=args.kind)
        problems = validate_training_job(spec, path=f"TrainingJob({name})")
        if spec.image is None:
            problems.append(Problem(f"TrainingJob({name}).job.image", "is required to run the job"))
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:TrainingJob", name, None, opts)

        # Children do not inherit the component's dependencies: pass them on, so the pods wait for the
        # namespace, PriorityClass, ServiceAccount and Pod Identity association they name.
        own = _dependencies(opts)
        after = [*own, *args.job_after]
        job_options = pulumi.ResourceOptions(parent=self, depends_on=after, **JOB_OPTIONS)
        resource_name = job_resource_name(name, spec.revision, spec.kind)
        # Every kind gets the app's headless Service. A JobSet (or TrainJob) of revision 1 has the
        # app's name, and the JobSet controller makes a Service of that name only when none exists
        # (jobset pkg/controllers/jobset_controller.go, createHeadlessSvcIfNecessary), so it uses
        # this one; a kind change then keeps the Service the previous, still running job resolves
        # its ranks through, instead of deleting it under that job and beside the new one.
        service = rendezvous_service(spec)
        k8s.core.v1.Service(
            f"{name}-rendezvous",
            metadata=service["metadata"],
            spec=service["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        if spec.kind == "Job":
            job = training_job(spec)
            job["metadata"]["annotations"] = {SKIP_AWAIT_ANNOTATION: "true"}
            k8s.batch.v1.Job(resource_name, metadata=job["metadata"], spec=job["spec"], opts=job_options)
        elif spec.kind == "JobSet":
            _custom(resource_name, training_jobset(spec), job_options)
        else:
            runtime = _custom(f"{resource_name}-runtime", training_runtime(spec),
                              pulumi.ResourceOptions(parent=self, depends_on=own, **JOB_OPTIONS))
            _custom(resource_name, train_job(spec), pulumi.ResourceOptions.merge(job_options, pulumi.ResourceOptions(depends_on=[runtime])))
        pdb = training_pdb(spec)
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=pdb["metadata"], spec=pdb["spec"], opts=pulumi.ResourceOptions(parent=self, depends_on=after)
        )
        self.job_name = pulumi.Output.from_input(spec.job_name)
        self.register_outputs({"jobName": self.job_name})
