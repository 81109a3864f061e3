"""The identity a MultiKueue manager uses on a worker cluster, and the kubeconfig it reaches it with.

The verbs are those Kueue's MultiKueue needs on a worker (Kueue v0.19.2, ``test/util/multikueue.go``
``MultiKueueRulesForManager``, as the "Setup a MultiKueue environment" task grants them): Workloads
and each job kind it dispatches created, updated, patched, deleted and watched; their status read;
ClusterQueues and LocalQueues read. MultiKueue watches Workloads and jobs in every namespace (by its
origin label), so reading is cluster-wide (``READER_ROLE``); writing is bound in the training
namespaces alone (``WRITER_ROLE``): the manager can make and remove jobs there and nowhere else.

The credential is a ServiceAccount token Secret (``kubernetes.io/service-account-token``): it does not
expire, and works until the Secret is deleted. An EKS token (an IAM principal with an access entry)
lasts 15 minutes and needs the ``aws`` exec plugin, which Kueue refuses in a kubeconfig ("exec plugins
are not allowed", ``multikueuecluster.go``); a job renewing it on the manager would, when it fails for
a quarter of an hour, make the worker look lost and its jobs run twice. Rotating the token is
replacing the Secret: the worker's deployment, then the manager's (docs/fleet.md).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
import yaml

from ..addons.kueue import KUEUE_NAMESPACE
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from .job_sets import JOBSET_API_VERSION, TRAINER_GROUP
from .training_job import _dependencies
from .team_access import RBAC_API_GROUP

MANAGER_SERVICE_ACCOUNT = "multikueue-manager"
"""The ServiceAccount a manager acts as on this worker, in Kueue's namespace."""
TOKEN_SECRET = "multikueue-manager-token"  # noqa: S105 - the Secret's name; its token is the cluster's to write
"""Its token Secret, which the token controller fills and which lasts until it is deleted."""
READER_ROLE = "eks-gpu-training-multikueue-reader"
"""The ClusterRole (and ClusterRoleBinding) that lets the manager watch the worker's jobs and queues."""
WRITER_ROLE = "eks-gpu-training-multikueue-writer"
"""The ClusterRole a RoleBinding in each training namespace grants: the manager's writes, there alone."""
KUEUE_GROUP = "kueue.x-k8s.io"
LABELS = {"app.kubernetes.io/name": "multikueue-worker", "app.kubernetes.io/part-of": "eks-gpu-training"}
DISPATCHED = (("batch", "jobs"), (JOBSET_API_VERSION.split("/")[0], "jobsets"), (TRAINER_GROUP, "trainjobs"),
              (KUEUE_GROUP, "workloads"))
"""What MultiKueue creates on a worker: the job's copy (Jobs, JobSets and TrainJobs, the kinds the
platform runs) and its Workload."""
WRITE_VERBS = ("create", "update", "patch", "delete")
READ_VERBS = ("get", "list", "watch")


def reader_rules() -> list[dict[str, Any]]:
    """Cluster-wide reads: the dispatched objects and their status, the queues."""
    return [
        *({"apiGroups": [group], "resources": [resource], "verbs": list(READ_VERBS)} for group, resource in DISPATCHED),
        *({"apiGroups": [group], "resources": [f"{resource}/status"], "verbs": ["get"]} for group, resource in DISPATCHED),
        {"apiGroups": [KUEUE_GROUP], "resources": ["clusterqueues", "localqueues"], "verbs": list(READ_VERBS)},
    ]


def writer_rules() -> list[dict[str, Any]]:
    """Writes, granted per training namespace: the dispatched objects, and the Workload's status
    (MultiKueue copies the manager's admission onto the worker's Workload)."""
    return [
        *({"apiGroups": [group], "resources": [resource], "verbs": list(WRITE_VERBS)} for group, resource in DISPATCHED),
        {"apiGroups": [KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["update", "patch"]},
    ]


def _subject(namespace: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "name": MANAGER_SERVICE_ACCOUNT, "namespace": namespace}


def worker_objects(namespaces: Sequence[str], kueue_namespace: str = KUEUE_NAMESPACE) -> list[dict[str, Any]]:
    """The ServiceAccount, its token Secret, both ClusterRoles, the reader's ClusterRoleBinding and
    a RoleBinding of the writer in each training namespace."""
    role_ref = {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole"}
    rbac = f"{RBAC_API_GROUP}/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": MANAGER_SERVICE_ACCOUNT, "namespace": kueue_namespace, "labels": dict(LABELS)}},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": TOKEN_SECRET, "namespace": kueue_namespace, "labels": dict(LABELS),
                      "annotations": {"kubernetes.io/service-account.name": MANAGER_SERVICE_ACCOUNT}}},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": READER_ROLE, "labels": dict(LABELS)}, "rules": reader_rules()},
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": WRITER_ROLE, "labels": dict(LABELS)}, "rules": writer_rules()},
        {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": READER_ROLE, "labels": dict(LABELS)},
         "roleRef": {**role_ref, "name": READER_ROLE}, "subjects": [_subject(kueue_namespace)]},
        *(_writer_binding(ns, kueue_namespace) for ns in namespaces),
    ]


def _writer_binding(namespace: str, kueue_namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_API_GROUP}/v1", "kind": "RoleBinding",
            "metadata": {"name": WRITER_ROLE, "namespace": namespace, "labels": dict(LABELS)},
            "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole", "name": WRITER_ROLE}, "subjects": [_subject(kueue_namespace)]}


def worker_kubeconfig(server: str, certificate_authority_data: Optional[str], token: str) -> str:
    """A kubeconfig Kueue accepts for a MultiKueueCluster: the CA inline (none: the system's roots),
    a bearer token, no exec plugin and no file paths (``validateKubeconfig``, Kueue v0.19.2)."""
    cluster = {"server": server, **({"certificate-authority-data": certificate_authority_data} if certificate_authority_data else {})}
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "worker",
        "clusters": [{"name": "worker", "cluster": cluster}],
        "users": [{"name": MANAGER_SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": MANAGER_SERVICE_ACCOUNT}}],
    }, sort_keys=False)


@documented_args
@dataclass
class MultiKueueWorkerArgs:
    """Arguments of ``MultiKueueWorker``."""

    namespaces: Sequence[str]
    """The training namespaces the manager may create and delete jobs in (``scheduling.namespaces``)."""
    endpoint: pulumi.Input[str]
    """The worker's API server URL, as the manager reaches it."""
    certificate_authority: pulumi.Input[Optional[str]]
    """The worker API server's CA bundle, base64-encoded PEM (an EKS cluster's ``certificateAuthority.data``); None: the system's roots verify it."""
    kueue_namespace: str = KUEUE_NAMESPACE
    """Kueue's namespace, where the ServiceAccount and its token live. Default: kueue-system."""
    namespace_resources: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    """The Namespace resources by name, which the RoleBindings and ServiceAccount wait for. Default: none (they exist)."""
    cluster: Optional[ClusterInput] = None
    """The worker cluster (a ``ClusterRef``, ``EksCluster`` or ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(MultiKueueWorkerArgs)
class MultiKueueWorker(pulumi.ComponentResource):
    """A worker's side of MultiKueue: the manager's ServiceAccount with a token that does not expire,
    reads cluster-wide and writes in the training namespaces, and the kubeconfig a manager's
    ``MultiKueueManager`` takes. Make it depend on the Kueue release (its namespace)."""

    kubeconfig: pulumi.Output[str]
    """The kubeconfig of the manager's identity here (a secret): endpoint, CA and token."""

    def __init__(self, name: str, args: Optional[MultiKueueWorkerArgs] = None, opts: Optional[pulumi.ResourceOptions] = None,
                 **fields: Any):
        args = component_args(MultiKueueWorkerArgs, "MultiKueueWorker", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"MultiKueueWorker({name})")
        super().__init__("eks-gpu-training:index:MultiKueueWorker", name, None, opts)
        # Children do not inherit the component's dependencies: the ServiceAccount waits for Kueue's namespace itself.
        after = _dependencies(opts)
        bodies = worker_objects(args.namespaces, args.kueue_namespace)
        account_body, secret_body, reader_body, writer_body, reader_binding = bodies[:5]
        child = pulumi.ResourceOptions(parent=self, depends_on=after)
        account = k8s.core.v1.ServiceAccount(f"{name}-service-account", metadata=account_body["metadata"], opts=child)
        # The token controller fills the Secret's token once its ServiceAccount exists;
        # pulumi-kubernetes waits for it (pulumi/pulumi-kubernetes#2048).
        secret = k8s.core.v1.Secret(f"{name}-token", metadata=secret_body["metadata"], type=secret_body["type"],
                                    opts=pulumi.ResourceOptions(parent=self, depends_on=[account], additional_secret_outputs=["data"]))
        reader = k8s.rbac.v1.ClusterRole(f"{name}-reader", metadata=reader_body["metadata"], rules=reader_body["rules"],
                                         opts=pulumi.ResourceOptions(parent=self))
        writer = k8s.rbac.v1.ClusterRole(f"{name}-writer", metadata=writer_body["metadata"], rules=writer_body["rules"],
                                         opts=pulumi.ResourceOptions(parent=self))
        k8s.rbac.v1.ClusterRoleBinding(f"{name}-reader", metadata=reader_binding["metadata"], role_ref=reader_binding["roleRef"],
                                       subjects=reader_binding["subjects"], opts=pulumi.ResourceOptions(parent=self, depends_on=[reader, account]))
        for binding in bodies[5:]:
            namespace = binding["metadata"]["namespace"]
            waits = [writer, account, *([args.namespace_resources[namespace]] if namespace in args.namespace_resources else [])]
            k8s.rbac.v1.RoleBinding(f"{name}-{namespace}", metadata=binding["metadata"], role_ref=binding["roleRef"],
                                    subjects=binding["subjects"], opts=pulumi.ResourceOptions(parent=self, depends_on=waits))
        token = secret.data.apply(lambda data: base64.b64decode((data or {}).get("token", "")).decode())
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(args.endpoint, args.certificate_authority, token).apply(
            lambda values: worker_kubeconfig(values[0], values[1], values[2])))
        self.register_outputs({"kubeconfig": self.kubeconfig})
