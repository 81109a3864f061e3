"""What the JobSet and Kubeflow Trainer controllers' Helm releases share (the components are
``JobSetController`` in ``job_set_controller`` and ``TrainerController`` in ``trainer_controller``).

A ``kind: JobSet`` app is a JobSet, run by the JobSet controller; a ``kind: TrainJob`` app is a
TrainJob, which Trainer turns into a JobSet. So JobSet is installed for either kind
(``jobset_needed``), Trainer for TrainJobs (``trainer_needed``), each from its pinned chart, and
Trainer's chart never installs its own JobSet subchart: one JobSet controller serves both.

Both are placed like Kueue's: on ``role=system`` nodes, two replicas behind a PodDisruptionBudget
of one, since their webhooks refuse when nobody answers (``failurePolicy: Fail``). The charts' pod
security stays (non-root, no capabilities, seccomp), Trainer's root filesystem made read-only too;
both Deployments get requests, so the system nodes' room is counted (``system_footprints``).
Trainer's bundled runtimes are left out: each TrainJob app gets a TrainingRuntime of its own
(``workloads/job_sets.py``). Releases and namespaces are retained when they leave the stack, and a
namespace is applied, not created, so a kind added back takes over its retained namespace. An
admission policy per controller fences their charts' cluster-wide RBAC (``job_api_admission``); a
NetworkPolicy per namespace decides who may connect (``controller_ingress``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterRef
from ..config import GpuTrainingPlatformArgs, JobSetConfig, TrainerConfig
from . import job_api_admission
from .addon_release import AddonNamespace, addon_namespace, addon_release
from .controller_ingress import ControllerIngress, network_policy
from .labeler_admission import node_policy_binding_manifest
from .kueue import CONTROLLER_TOLERATIONS, KUEUE_NAMESPACE_LABELS

JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
"""JobSet's chart (kubernetes-sigs/jobset's OCI repository on registry.k8s.io)."""
JOBSET_IMAGE = "registry.k8s.io/jobset/jobset"
"""The controller image of JobSet's releases; the tag is ``v<chart version>`` (the chart's default is a staging image)."""
JOBSET_NAMESPACE = "jobset-system"
"""JobSet's namespace, as upstream's manifests install it."""

TRAINER_CHART = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
"""Kubeflow Trainer's chart (kubeflow/trainer's OCI repository on ghcr.io)."""
TRAINER_IMAGE_REGISTRY = "ghcr.io"
TRAINER_IMAGE_REPOSITORY = "kubeflow/trainer/trainer-controller-manager"
"""The controller image of Trainer's releases (the chart's default), tagged ``v<chart version>``."""
TRAINER_NAMESPACE = "kubeflow-system"
"""Trainer's namespace, as upstream's installation guide uses."""

JOBSET_SERVICE_ACCOUNT = "jobset-controller"
JOBSET_WEBHOOK_CONFIGURATIONS = ("jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration")
"""JobSet's controller ServiceAccount and webhook configurations, as its chart names them for the
release ``jobset`` (chart templates ``controller/serviceaccount.yaml``, ``webhook/*.yaml``)."""
TRAINER_SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
TRAINER_WEBHOOK_CONFIGURATIONS = ("defaulter.trainer.kubeflow.org", "validator.trainer.kubeflow.org")
"""Trainer's ServiceAccount and webhook configurations, as its chart names them for the release
``kubeflow-trainer`` (chart templates ``manager/``, ``webhook/``)."""
JOBSET_FENCE = "jobset-controller-fence"
TRAINER_FENCE = "kubeflow-trainer-fence"
"""The ValidatingAdmissionPolicies (and their bindings) that fence each controller (``job_api_admission``)."""
FENCE_LABELS = {"app.kubernetes.io/part-of": "eks-gpu-training", "app.kubernetes.io/component": "controller-fence"}

CONTROLLER_REPLICAS = 2
"""Two replicas of each controller, as Kueue's: their webhooks fail closed."""

NAMESPACE_LABELS = KUEUE_NAMESPACE_LABELS
"""Both namespaces enforce the ``restricted`` Pod Security Standard, as Kueue's: the controllers meet
it as the stack sets them up (non-root as user 65532, RuntimeDefault seccomp, every capability
dropped, no privilege escalation), so nothing less is allowed beside them."""

RELEASE_TIMEOUT_SECONDS = 300
"""How long Helm waits for a controller to be Ready; like Kueue's, they wait for system nodes only.
Atomic: the webhooks must answer before the first JobSet or TrainJob is created."""

CONTROLLER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
"""Requests and limits of each controller's pod: JobSet's chart asks 500m and 128Mi by default, sized
for thousands of JobSets, while a training fleet runs tens at once; the limits are JobSet's chart
defaults (2 cores, 4Gi), which Trainer's chart, setting none, gets too."""

CONTROLLER_USER = 65532
"""The user both controllers' images run as: JobSet's Dockerfile (``USER 65532:65532``) and
Trainer's base image (``gcr.io/distroless/static:nonroot``); set explicitly, so the pods run as that
high UID whatever the image says."""

CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": CONTROLLER_USER,
    "runAsGroup": CONTROLLER_USER,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Trainer's container: its chart's own context (no escalation, every capability dropped, the
runtime's seccomp profile, non-root) with a read-only root (it writes nothing: its certificates come
mounted) and the image's user."""


def jobset_needed(args: GpuTrainingPlatformArgs) -> bool:
    """JobSet is installed when asked, or by default when a training app runs as a JobSet or TrainJob."""
    if args.job_set.enabled is not None:
        return args.job_set.enabled
    return any(app.job is not None and app.kind in ("JobSet", "TrainJob") for app in args.scheduling.training_apps)


def trainer_needed(args: GpuTrainingPlatformArgs) -> bool:
    """Trainer is installed when asked, or by default when a training app runs as a TrainJob."""
    if args.trainer.enabled is not None:
        return args.trainer.enabled
    return any(app.job is not None and app.kind == "TrainJob" for app in args.scheduling.training_apps)


def _placement(system_node_selector: Mapping[str, str]) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector}, "tolerations": CONTROLLER_TOLERATIONS}


def jobset_values(config: JobSetConfig, system_node_selector: Mapping[str, str]) -> dict[str, Any]:
    """Helm values of the ``jobset`` chart."""
    return {
        "image": {"repository": JOBSET_IMAGE, "tag": f"v{config.chart_version}", "pullPolicy": "IfNotPresent"},
        "controller": {
            "replicas": CONTROLLER_REPLICAS,
            "resources": CONTROLLER_RESOURCES,
            "podSecurityContext": {"runAsNonRoot": True, "runAsUser": CONTROLLER_USER, "runAsGroup": CONTROLLER_USER,
                                   "seccompProfile": {"type": "RuntimeDefault"}},
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
            **_placement(system_node_selector),
        },
    }


def trainer_values(config: TrainerConfig, system_node_selector: Mapping[str, str]) -> dict[str, Any]:
    """Helm values of the ``kubeflow-trainer`` chart."""
    return {
        "jobset": {"install": False},
        "image": {"registry": TRAINER_IMAGE_REGISTRY, "repository": TRAINER_IMAGE_REPOSITORY, "tag": f"v{config.chart_version}"},
        "manager": {"replicas": CONTROLLER_REPLICAS, "resources": CONTROLLER_RESOURCES, "securityContext": CONTAINER_SECURITY,
                    **_placement(system_node_selector)},
        "runtimes": {"defaultEnabled": False},
    }


def jobset_fence_manifests(training_namespaces: list[str]) -> list[dict[str, Any]]:
    """JobSet's policy and its binding (``job_api_admission``)."""
    return [job_api_admission.jobset_policy_manifest(JOBSET_FENCE, JOBSET_NAMESPACE, JOBSET_SERVICE_ACCOUNT, training_namespaces,
                                                     JOBSET_WEBHOOK_CONFIGURATIONS, FENCE_LABELS),
            node_policy_binding_manifest(JOBSET_FENCE, FENCE_LABELS)]


def trainer_fence_manifests(training_namespaces: list[str]) -> list[dict[str, Any]]:
    """Trainer's policy and its binding (``job_api_admission``)."""
    return [job_api_admission.trainer_policy_manifest(TRAINER_FENCE, TRAINER_NAMESPACE, TRAINER_SERVICE_ACCOUNT,
                                                      training_namespaces, TRAINER_WEBHOOK_CONFIGURATIONS, FENCE_LABELS),
            node_policy_binding_manifest(TRAINER_FENCE, FENCE_LABELS)]


def controller_fence(component: pulumi.ComponentResource, name: str, ref: ClusterRef,
                     manifests: list[dict[str, Any]]) -> k8s.admissionregistration.v1.ValidatingAdmissionPolicyBindingPatch:
    """The controller's admission policy and its binding, before the release: the controller is
    fenced from its first write. Retained with the release, so a retained controller stays fenced;
    server-side applies (``*Patch``), as the namespace is, so a kind added back takes them over."""
    policy_manifest, binding_manifest = manifests
    options = pulumi.ResourceOptions(parent=component, depends_on=list(ref.ready),
                                     retain_on_delete=True)
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicyPatch(
        f"{name}-fence", metadata=policy_manifest["metadata"], spec=policy_manifest["spec"], opts=options)
    return k8s.admissionregistration.v1.ValidatingAdmissionPolicyBindingPatch(
        f"{name}-fence-binding", metadata=binding_manifest["metadata"], spec=binding_manifest["spec"],
        opts=pulumi.ResourceOptions.merge(options, pulumi.ResourceOptions(depends_on=[policy])))


def controller_ingress(component: pulumi.ComponentResource, name: str, namespace_name: str,
                       namespace: pulumi.Resource, ingress: Optional[ControllerIngress]) -> None:
    if ingress is not None:
        network_policy(name, namespace_name, ingress,
                       opts=pulumi.ResourceOptions(parent=component, depends_on=[namespace]))


def controller_release(component: pulumi.ComponentResource, name: str, ref: ClusterRef, *, namespace_name: str,
                       release_name: str, chart: dict[str, Any], values: dict[str, Any],
                       after: tuple[pulumi.Resource, ...] = ()) -> tuple[AddonNamespace, k8s.helm.v3.Release]:
    """The controller's namespace and its atomic release, both waiting for the cluster to be ready,
    and both retained (``addon_release``): the namespace outlives the controller's removal (``helm
    uninstall`` leaves it too), so a kind added back meets it and takes it over. The release is
    retained because the last app of a kind leaving the stack (a kind change, a removal) leaves jobs
    of that kind running, retained as every training job is, and they need their controller;
    uninstalling Trainer would also delete its CRDs (templates of its chart), and with them every
    TrainJob. ``helm uninstall`` it once those jobs are done."""
    namespace = addon_namespace(component, name, namespace=namespace_name, labels=NAMESPACE_LABELS, ready=ref.ready,
                                retained=True)
    release = addon_release(component, name, release_name=release_name, chart=chart, values=values,
                            timeout=RELEASE_TIMEOUT_SECONDS, ready=ref.ready, namespace=namespace, retained=True,
                            after=after)
    return namespace, release
