"""What a team's namespaces admit (``scheduling.teams``): GPUs only through the team's queue, and
only the priority classes the team may use.

**The queue.** With teams, Kueue manages every Job, JobSet and TrainJob of the training
namespaces, labelled or not (``manageJobsWithoutQueueName``): one without a queue name is
suspended and never admitted. Kueue's pod integration is off, so ``GPU_POD_POLICY`` refuses a pod
there that asks for an ``nvidia.com/`` resource and is not controlled by a Job (a bare pod, a
Deployment's). A Job's pods exist only once Kueue admits it, so every GPU of a team namespace is
counted in its ClusterQueue; a pod claiming a Job that does not exist is garbage-collected.

**Priorities.** Any namespace may use any PriorityClass, the ``system-`` ones included. A
ResourceQuota per team namespace (``PRIORITY_QUOTA_NAME``) allows ``pods: 0`` of the classes
outside the team's list (Kubernetes docs, "Resource Quota Per PriorityClass"), listed as ``NotIn``
so a class made later is refused too. The quota judges pods, made only after admission, when a Job
of a refused class would already hold its quota (and with ``blockAdmission`` every team's next
admission); so ``JOB_CLASS_POLICY`` refuses such a Job or JobSet at creation, reading the allowed
classes from the namespace's own quota (its ``paramRef``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config import GpuTrainingPlatformArgs, Problem, TeamConfig
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from .job_sets import JOBSET_API_VERSION
from .training_spec import PART_OF

GPU_POD_POLICY = "eks-gpu-training-team-gpu-pods"
"""Name of the ValidatingAdmissionPolicy that keeps a team namespace's GPUs to its Jobs, and of its binding."""

JOB_CLASS_POLICY = "eks-gpu-training-team-job-classes"
"""Name of the ValidatingAdmissionPolicy that refuses a team's Job or JobSet of a class its quota refuses, and of its binding."""

PRIORITY_QUOTA_NAME = "team-priority-classes"
"""Name of the ResourceQuota of each team namespace that refuses pods of classes the team may not use."""

GPU_RESOURCE_PREFIX = "nvidia.com/"
"""NVIDIA's extended resources: whole GPUs (``nvidia.com/gpu``), shared ones and MIG slices."""

GPU_POD_MESSAGE = ("a pod requesting an nvidia.com/ resource in a team namespace must belong to a Job: submit a Job, "
                   "JobSet or TrainJob to the team's queue (kueue.x-k8s.io/queue-name)")
LABELS = {"app.kubernetes.io/part-of": PART_OF}
CHECKS_HELD = ("cannot run with scheduling.teams: every training namespace is a team's, where Kueue holds a Job that names "
               "no queue; run the checks before adding teams, or as Jobs submitted to a team's queue")


def allowed_priority_classes(args: GpuTrainingPlatformArgs, team: TeamConfig) -> list[str]:
    """The classes the team's pods may use: its own list, else every class of the stack."""
    if team.priority_classes is not None:
        return list(team.priority_classes)
    return [c.name for c in args.scheduling.priority_classes]


def gpu_pod_policy_manifest() -> dict[str, Any]:
    """The policy: a pod naming an ``nvidia.com/`` resource, in a container or an init container,
    must have a Job as its controller. It matches nothing until its binding names namespaces."""
    containers = "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
    names = ("(has(c.resources.requests) ? c.resources.requests.map(k, k) : []) + "
             "(has(c.resources.limits) ? c.resources.limits.map(k, k) : [])")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": GPU_POD_POLICY, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            },
            "variables": [
                {"name": "containers", "expression": containers},
                {"name": "requestsGpu", "expression": "variables.containers.exists(c, has(c.resources) && "
                 f"({names}).exists(n, n.startsWith('{GPU_RESOURCE_PREFIX}')))"},
                {"name": "ownedByJob", "expression": "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
                 "r.apiVersion == 'batch/v1' && r.kind == 'Job' && has(r.controller) && r.controller)"},
            ],
            "validations": [{"expression": "!variables.requestsGpu || variables.ownedByJob", "message": GPU_POD_MESSAGE}],
        },
    }


def _binding(policy: str, namespaces: Sequence[str], **spec: Any) -> dict[str, Any]:
    """A binding that denies ``policy``'s violations in the ``namespaces`` (by name)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(LABELS)},
        "spec": {
            "policyName": policy,
            "validationActions": ["Deny"],
            **spec,
            "matchResources": {"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]}},
        },
    }


def gpu_pod_policy_binding_manifest(namespaces: Sequence[str]) -> dict[str, Any]:
    """Puts the policy in force in the team ``namespaces`` (by name): violations are denied."""
    return _binding(GPU_POD_POLICY, namespaces)


def _class_allowed(template: str) -> str:
    """CEL: the pod ``template``'s class is unset or among the quota's ``NotIn`` values (``params``)."""
    return (f"!has({template}.priorityClassName) || {template}.priorityClassName == '' || "
            f"params.spec.scopeSelector.matchExpressions.exists(e, e.operator == 'NotIn' && {template}.priorityClassName in e.values)")


JOB_CLASS_MESSAGE = f"this team may not use that priority class: its namespace's ResourceQuota {PRIORITY_QUOTA_NAME} would refuse the pods"


def job_class_policy_manifest() -> dict[str, Any]:
    """The policy: a Job's or JobSet's pods must be of a class the namespace's ``PRIORITY_QUOTA_NAME``
    quota allows (its params)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": JOB_CLASS_POLICY, "labels": dict(LABELS)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ResourceQuota"},
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]},
                {"apiGroups": [JOBSET_API_VERSION.split("/")[0]], "apiVersions": [JOBSET_API_VERSION.split("/")[1]],
                 "operations": ["CREATE"], "resources": ["jobsets"]},
            ]},
            "validations": [
                {"expression": f"object.kind != 'Job' || {_class_allowed('object.spec.template.spec')}", "message": JOB_CLASS_MESSAGE},
                {"expression": f"object.kind != 'JobSet' || object.spec.replicatedJobs.all(r, {_class_allowed('r.template.spec.template.spec')})",
                 "message": JOB_CLASS_MESSAGE},
            ],
        },
    }


def job_class_policy_binding_manifest(namespaces: Sequence[str]) -> dict[str, Any]:
    """Puts the policy in force in the team ``namespaces``, each judged by its own quota (a namespace
    without it: allowed, as its pods are)."""
    return _binding(JOB_CLASS_POLICY, namespaces, paramRef={"name": PRIORITY_QUOTA_NAME, "parameterNotFoundAction": "Allow"})


def priority_quota(namespace: str, allowed: Sequence[str]) -> dict[str, Any]:
    """The ResourceQuota allowing no pod whose class is set and not in ``allowed`` (every class, with
    none allowed: ``NotIn`` takes no empty list)."""
    expressions: list[dict[str, Any]] = [{"scopeName": "PriorityClass", "operator": "Exists"}]
    if allowed:
        expressions.append({"scopeName": "PriorityClass", "operator": "NotIn", "values": list(allowed)})
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": PRIORITY_QUOTA_NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": expressions}},
    }


# --- rules ----------------------------------------------------------------------------------------


def admission_problems(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """A team's class that the stack does not make or that it lists twice; a training app of a team
    namespace whose class (its own, else the stack's highest, as ``default_priority_class`` picks)
    the team may not use; the smoke test and the pre-flight checks in a team namespace, whose Jobs
    name no queue and would be held by Kueue."""
    scheduling = args.scheduling
    if not scheduling.teams:
        return []
    problems = []
    classes = [c.name for c in scheduling.priority_classes]
    default_class = max(scheduling.priority_classes, key=lambda c: c.value).name if scheduling.priority_classes else None
    for i, team in enumerate(scheduling.teams):
        seen: dict[str, int] = {}
        for j, name in enumerate(team.priority_classes or []):
            path = f"scheduling.teams[{i}].priorityClasses[{j}]"
            if name not in classes:
                problems.append(Problem(path, f"'{name}' is not in scheduling.priorityClasses; allowed: {', '.join(classes) or 'none'}"))
            elif name in seen:
                problems.append(Problem(path, f"'{name}' is listed in scheduling.teams[{i}].priorityClasses[{seen[name]}] too"))
            seen.setdefault(name, j)
    for k, app in enumerate(scheduling.training_apps):
        namespace = app.namespace if app.namespace is not None else scheduling.namespaces[0].name if scheduling.namespaces else None
        owner = next((t for t in scheduling.teams if namespace in t.namespaces), None)
        chosen = app.priority_class if app.priority_class is not None else default_class
        if owner is None or chosen is None:
            continue
        allowed = allowed_priority_classes(args, owner)
        if chosen not in allowed:
            default = "" if app.priority_class is not None else " (unset: the stack's highest class)"
            problems.append(Problem(f"scheduling.trainingApps[{k}].priorityClass",
                                    f"'{chosen}'{default} is not among team {owner.name}'s classes, which its namespace "
                                    f"'{namespace}' refuses; allowed: {', '.join(allowed) or 'none'}"))
    if args.smoke_test.enabled:
        problems.append(Problem("smokeTest.enabled", CHECKS_HELD))
    if args.preflight.enabled:
        problems.append(Problem("preflight.enabled", CHECKS_HELD))
    return problems


# --- component ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TeamNamespaceAdmission:
    """A team namespace and the classes its pods may use."""

    namespace: str
    """Namespace name."""
    priority_classes: Sequence[str]
    """PriorityClasses its pods may use."""


def team_admission_namespaces(args: GpuTrainingPlatformArgs) -> list[TeamNamespaceAdmission]:
    """Every team namespace with its team's classes."""
    return [TeamNamespaceAdmission(namespace, allowed_priority_classes(args, team))
            for team in args.scheduling.teams for namespace in team.namespaces]


@documented_args
@dataclass
class TeamAdmissionArgs:
    """Arguments of ``TeamAdmission``."""

    namespaces: Sequence[TeamNamespaceAdmission]
    """The team namespaces, each with its classes (at least one)."""
    namespace_resources: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    """The Namespace resources by name, which the quotas in them wait for. Default: none (the namespaces exist)."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(TeamAdmissionArgs)
class TeamAdmission(pulumi.ComponentResource):
    """The GPU pod and job class policies bound to the team namespaces, and each one's priority-class quota. Give it
    the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    def __init__(self, name: str, args: Optional[TeamAdmissionArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TeamAdmissionArgs, "TeamAdmission", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TeamAdmission({name})")
        super().__init__("eks-gpu-training:index:TeamAdmission", name, None, opts)
        names = [n.namespace for n in args.namespaces]
        for role, policy_body, binding_body in (
            ("gpu-pod", gpu_pod_policy_manifest(), gpu_pod_policy_binding_manifest(names)),
            ("job-class", job_class_policy_manifest(), job_class_policy_binding_manifest(names)),
        ):
            policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{role}-policy", metadata=policy_body["metadata"], spec=policy_body["spec"],
                opts=pulumi.ResourceOptions(parent=self))
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{role}-policy-binding", metadata=binding_body["metadata"], spec=binding_body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))
        for team_namespace in args.namespaces:
            quota = priority_quota(team_namespace.namespace, team_namespace.priority_classes)
            waits = [args.namespace_resources[team_namespace.namespace]] if team_namespace.namespace in args.namespace_resources else []
            k8s.core.v1.ResourceQuota(
                f"{name}-{team_namespace.namespace}-priority-quota", metadata=quota["metadata"], spec=quota["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=waits))
        self.register_outputs({})
