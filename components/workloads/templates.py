"""Training workloads: the pod template of a distributed training job, the Indexed Job and headless
Service that run it with torchrun, and its PodDisruptionBudget.

Everything here is a plain function of a ``TrainingJobSpec`` (``training_spec.py``) returning plain
Kubernetes data (camelCase dicts, the shape ``kubectl apply`` takes), so other programs can import
the templates without the Pulumi engine. ``TrainingJob`` (``training_job.py``) only wires them to
resources. Where the pods run, and why, is ``placement.py``'s.

With Kueue (``queue_name`` set) the Job carries the queue label and is created suspended: Kueue
admits it whole, when the quota (and, with a topology request, Ready nodes in one network block)
has room for every pod, and then resumes it; with a topology request Kueue also picks every pod's
node (see ``placement.py``).
"""

from __future__ import annotations

from typing import Any

import pulumi

from ..facts.gpu_nodes import EFA_HUGEPAGES, EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_RESOURCE, gpu_toleration
from .placement import training_affinity, training_topology_spread
from .training_spec import CHECKPOINT_ENV, COMPONENT_LABEL, PART_OF, REPLICATED_JOB, TRAINING_COMPONENT, SecretKeyRef, TrainingJobSpec

JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
TRAINER_CONTAINER = "trainer"
"""The training container of a Job's or JobSet's pods."""
TRAIN_JOB_CONTAINER = REPLICATED_JOB
"""The training container of a TrainJob's pods: Kubeflow Trainer's torch plugin fills in torchrun's
environment in the container named ``node`` (kubeflow/trainer pkg/constants, ``Node``)."""
SHM_VOLUME = "dshm"
SHARED_VOLUME = "shared-fs"
"""The pod volume of the shared file system's claim."""
CHECKPOINT_VOLUME = "checkpoints"
"""The pod volume of the checkpoint directory when there is no shared file system (an emptyDir)."""
EPHEMERAL_STORAGE_RESOURCE = "ephemeral-storage"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that hands a Job to Kueue: the LocalQueue it is submitted to (Kueue docs-jobs.md)."""
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
"""Tells pulumi-kubernetes not to wait for a Job to complete: a training run takes hours, and a
suspended Job never starts."""


def torchrun_env(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """Environment torchrun reads its arguments from (``PET_<ARG>``), so the command is just
    ``torchrun train.py``. A TrainJob's comes from Kubeflow Trainer, which sets the same variables
    from the TrainJob and its runtime; only EFA's is the template's there."""
    env: list[dict[str, Any]] = [] if spec.kind == "TrainJob" else [
        {"name": "PET_NNODES", "value": str(spec.nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(spec.node_gpus)},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']"}},
        },
        {"name": "PET_MASTER_ADDR", "value": spec.master_address},
        {"name": "PET_MASTER_PORT", "value": str(spec.rendezvous_port)},
    ]
    if spec.efa:
        # With the aws-ofi-nccl plugin in the image, keep libfabric on EFA: its TCP provider would
        # otherwise be a silent, much slower fallback.
        env.append({"name": "FI_PROVIDER", "value": "efa"})
    return env



def checkpoint_env(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """``CHECKPOINT_DIR``: where the training code saves its checkpoints and, when it starts, looks
    for the last one (PyTorch distributed checkpointing: ``torch.distributed.checkpoint.save`` and
    ``load`` with ``checkpoint_id=os.environ["CHECKPOINT_DIR"]``, docs/health.md)."""
    return [{"name": CHECKPOINT_ENV, "value": spec.checkpoint_mount_path}]


def checkpoint_mount(spec: TrainingJobSpec) -> dict[str, Any]:
    """The checkpoint directory's mount: the shared file system's ``checkpoints/<namespace>/<app>``
    (the kubelet makes the folder when it is missing), the same for every run, restart and requeue
    of the app on any node; without a shared file system, an emptyDir on the node's instance store,
    which lasts only as long as the pod (a requeued or restarted job starts over)."""
    if spec.shared_volume_claim:
        return {"name": SHARED_VOLUME, "mountPath": spec.checkpoint_mount_path, "subPath": spec.checkpoint_subpath}
    return {"name": CHECKPOINT_VOLUME, "mountPath": spec.checkpoint_mount_path}


def extra_env(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """The job's own variables: a value as it is, a ``SecretKeyRef`` as ``valueFrom.secretKeyRef``
    (Kubernetes docs, "Distribute Credentials Securely Using Secrets": the kubelet reads the key when
    the container starts, and a missing Secret or key keeps the pod from starting)."""
    return [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": value.name, "key": value.key}}}
        if isinstance(value, SecretKeyRef)
        else {"name": name, "value": value}
        for name, value in spec.env.items()
    ]


def training_labels(spec: TrainingJobSpec) -> dict[str, str]:
    """Labels of every object of the app: the seed's ``app`` plus the standard ``app.kubernetes.io/*``."""
    return {
        "app": spec.app_label,
        "app.kubernetes.io/name": spec.name,
        "app.kubernetes.io/instance": spec.name,
        COMPONENT_LABEL: TRAINING_COMPONENT,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }


def training_resources(spec: TrainingJobSpec) -> dict[str, dict[str, str]]:
    """Requests and limits of the trainer container.

    Extended resources (GPUs, EFA devices) and hugepages cannot be overcommitted: Kubernetes requires
    their limits to equal their requests, and a container with hugepages must also request CPU or
    memory. CPU and memory get requests (the namespace quota counts them) but no limits, so data
    loaders are never CPU-throttled and the pod may use the node's spare memory.
    """
    exclusive = {GPU_RESOURCE: str(spec.node_gpus)}
    if spec.efa:
        exclusive[EFA_RESOURCE] = str(spec.efa_devices)
        exclusive[HUGEPAGES_RESOURCE] = EFA_HUGEPAGES
    # Ephemeral storage gets a request only: the scheduler places the pod on a node with that much
    # instance store free, and a pod writing past it is not evicted for a limit.
    scratch = {EPHEMERAL_STORAGE_RESOURCE: spec.ephemeral_storage} if spec.ephemeral_storage is not None else {}
    return {
        "requests": {"cpu": spec.pod_cpu, "memory": spec.pod_memory, **scratch, **exclusive},
        "limits": dict(exclusive),
    }


TRAINING_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID")
"""The only capabilities a training container keeps: training images run as root and at start own
files, switch users and signal their workers. None needs a raw socket (NCCL uses TCP, EFA its queue
pairs), a privileged port, device nodes or chroot; with hostNetwork those would act on the node."""


def training_pod_security(spec: TrainingJobSpec) -> dict[str, Any]:
    """The pod's security context: RuntimeDefault seccomp, and with ``run_as`` (a team's ID) a
    non-root user and group, also the supplementary group of every volume (``fsGroup``), so the
    team's directory (mode 2770, group the team's) and the folders the kubelet makes in it for a
    ``subPath`` (with the volume root's mode: kubernetes/kubernetes pkg/kubelet/kubelet_pods.go,
    ``makeMounts``) are the containers' to write, and nobody else's."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.run_as is not None:
        context.update(runAsNonRoot=True, runAsUser=spec.run_as, runAsGroup=spec.run_as, fsGroup=spec.run_as)
    return context


def _pull_policy_of(image: str) -> str:
    return "IfNotPresent" if "@sha256:" in image else "Always"


def image_pull_policy(image: pulumi.Input[str]) -> pulumi.Input[str]:
    """``IfNotPresent`` for an image named by digest (the bytes cannot change); ``Always`` for a tag,
    so a tag moved to a rebuilt image is never served stale from a node's cache (the kubelet then
    resolves the tag at the registry and still reuses cached layers of the same digest). An Output
    image (built in the same program) gives an Output policy."""
    if isinstance(image, str):
        return _pull_policy_of(image)
    return pulumi.Output.concat(image).apply(_pull_policy_of)


def training_pod_template(spec: TrainingJobSpec) -> dict[str, Any]:
    """The pod template (``PodTemplateSpec``) of a training job."""
    container: dict[str, Any] = {"name": TRAIN_JOB_CONTAINER if spec.kind == "TrainJob" else TRAINER_CONTAINER}
    if spec.image is not None:
        container["image"] = spec.image
        container["imagePullPolicy"] = image_pull_policy(spec.image)
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    container.update(
        env=torchrun_env(spec) + checkpoint_env(spec) + extra_env(spec),
        resources=training_resources(spec),
        volumeMounts=[{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]  # noqa: S108 - the container's shared memory, a memory-backed volume
        + ([{"name": SHARED_VOLUME, "mountPath": spec.shared_volume_mount_path}] if spec.shared_volume_claim else [])
        + [checkpoint_mount(spec)],
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]} if spec.run_as is not None else {"drop": ["ALL"], "add": list(TRAINING_CAPABILITIES)},
        },
    )
    shm: dict[str, Any] = {"medium": "Memory"}
    if spec.shm_size_limit is not None:
        shm["sizeLimit"] = spec.shm_size_limit
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": spec.priority_class,
        "tolerations": [gpu_toleration(), *unreachable_tolerations(spec)],
        "affinity": training_affinity(spec),
        "topologySpreadConstraints": training_topology_spread(spec),
        "securityContext": training_pod_security(spec),
        # Training talks to its peers, never to the API server: no API token in the pod. EKS Pod
        # Identity credentials come through a token volume of their own, so they do not need it.
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": [{"name": SHM_VOLUME, "emptyDir": shm}]
        + ([{"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": spec.shared_volume_claim}}] if spec.shared_volume_claim
           else [{"name": CHECKPOINT_VOLUME, "emptyDir": {}}]),
    }
    if spec.kind == "Job":
        # A JobSet sets its pods' subdomain to its own Service.
        pod["subdomain"] = spec.name
    if spec.service_account is not None:
        pod["serviceAccountName"] = spec.service_account
    if spec.host_network:
        # Without ClusterFirstWithHostNet a host-network pod resolves through the node's resolver and
        # cannot find the rendezvous Service.
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    metadata: dict[str, Any] = {"labels": training_labels(spec)}
    if spec.queue_name is not None:
        metadata["labels"][QUEUE_NAME_LABEL] = spec.queue_name
    annotations: dict[str, str] = {}
    if spec.topology_request is not None:
        key, level = spec.topology_request
        annotations[key] = level
    if spec.queue_name is not None and spec.unreachable_node_seconds is not None:
        annotations[SAFE_TO_FORCEFULLY_DELETE_ANNOTATION] = "true"
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": pod}


SAFE_TO_FORCEFULLY_DELETE_ANNOTATION = "kueue.x-k8s.io/safe-to-forcefully-delete"
"""A pod's opt-in to Kueue's failure recovery (``FailureRecoveryPolicy``, kubernetes-sigs/kueue
KEP-6757): evicted from an unreachable node, it is set Failed a minute later instead of staying
Terminating until the node is deleted, so its Job makes the rank again."""

UNREACHABLE_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
"""The node lifecycle controller's NoExecute taints of a node that stopped answering or reports
itself not ready (kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration, "Taint based
Evictions"); without a toleration of its own, a pod gets 300 s of each from the API server."""


def unreachable_tolerations(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """Tolerations that bound how long a rank stays on a node that stopped answering."""
    if spec.unreachable_node_seconds is None:
        return []
    return [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": spec.unreachable_node_seconds}
            for key in UNREACHABLE_TAINTS]


def _metadata(spec: TrainingJobSpec) -> dict[str, Any]:
    return {"name": spec.name, "namespace": spec.namespace, "labels": training_labels(spec)}


def job_metadata(spec: TrainingJobSpec) -> dict[str, Any]:
    """The Job's metadata: the app's, plus Kueue's queue label when the Job is queued."""
    metadata = _metadata(spec)
    if spec.queue_name is not None:
        metadata["labels"][QUEUE_NAME_LABEL] = spec.queue_name
    return metadata


DISRUPTION_POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
"""A Job's pod failure policy: a pod ended because its node went (quarantine, unreachable, deleted,
drained) carries ``DisruptionTarget`` (kubernetes.io/docs/concepts/workloads/pods/disruptions), and
``Ignore`` neither counts it against ``backoffLimit`` nor fails the Job. A non-zero exit fails
it."""


def training_job(spec: TrainingJobSpec) -> dict[str, Any]:
    """The Indexed Job: one pod per node, all started together, rank = completion index."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**job_metadata(spec), "name": spec.job_name},
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.nodes,
            "parallelism": spec.nodes,
            "backoffLimit": spec.backoff_limit,
            "podFailurePolicy": DISRUPTION_POLICY,
            # A queued Job starts suspended and Kueue resumes it on admission; created running, its
            # pods could start before Kueue's webhook suspends it.
            "suspend": spec.suspend or spec.queue_name is not None,
            "template": training_pod_template(spec),
        },
    }


def rendezvous_service(spec: TrainingJobSpec) -> dict[str, Any]:
    """Headless Service that gives each pod the DNS name ``<job>-<index>.<name>``; rank 0's is the rendezvous address."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec),
        "spec": {
            "clusterIP": "None",
            # Ranks look each other up while they start, before any of them is ready.
            "publishNotReadyAddresses": True,
            # Every revision's pods, so a previous revision still running keeps its DNS names.
            "selector": {"app.kubernetes.io/instance": spec.name, COMPONENT_LABEL: TRAINING_COMPONENT},
            "ports": [{"name": "rendezvous", "port": spec.rendezvous_port, "targetPort": spec.rendezvous_port, "protocol": "TCP"}],
        },
    }


def training_pdb(spec: TrainingJobSpec) -> dict[str, Any]:
    """PodDisruptionBudget that lets no voluntary disruption (drain, node upgrade, consolidation) take a pod.

    ``minAvailable`` = nodes, for single-node apps too: losing one rank stops the whole job, and a
    Job is not a scalable controller, for whose pods Kubernetes supports only an integer
    ``minAvailable``, not the seed's ``maxUnavailable: 0`` (kubernetes.io/docs/tasks/run-application/
    configure-pdb, "Arbitrary workloads and arbitrary selectors"). ``AlwaysAllow`` lets a pod that is
    already failing be evicted, so a crashed job cannot block a node drain forever.
    """
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(spec),
        "spec": {
            "minAvailable": spec.nodes,
            "selector": {"matchLabels": {"app": spec.app_label}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
