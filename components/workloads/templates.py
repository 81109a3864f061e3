"""Training workloads: the pod template that places distributed training correctly, the Indexed Job
and headless Service that run it with torchrun, and its PodDisruptionBudget.

Everything above the components is a plain function of a ``TrainingJobSpec`` returning plain
Kubernetes data (camelCase dicts, the shape ``kubectl apply`` takes), so other programs can import
the templates without the Pulumi engine. ``TrainingJob`` (``training_job.py``) only wires them to
resources.

How a training pod is placed, and why:

- it tolerates the GPU taint and requires a GPU node (``role=gpu-training``) of one of the allowed
  instance types;
- it requires that no other pod of the same app runs on its node (anti-affinity on
  ``kubernetes.io/hostname``) and spreads over nodes with ``DoNotSchedule``: one pod per node,
  each owning every GPU of its node;
- it prefers nodes under the same network switch as the app's other pods: a preferred pod affinity
  on ``topology.k8s.aws/network-node-layer-3`` (the switch closest to the instance, weight 100)
  and on ``-layer-2`` (weight 50). These are preferences, not requirements, because a job must still
  start when no single switch has room for all of it;
- it carries a ``ScheduleAnyway`` spread on ``network-node-layer-2`` whose selector counts the pods
  of *other* training apps. A spread constraint balances the pods it counts across domains, so
  counting the app's own pods would push them onto different switches, the opposite of what the
  seed wants; counting other apps' pods steers a new job towards the least busy layer-2 switch,
  and the affinity above then keeps its pods together there. Nodes without the label score lowest
  for a ``ScheduleAnyway`` constraint, so labelled nodes are preferred as well.

With Kueue (``queue_name`` set) the Job carries the queue label and is created suspended: Kueue
admits it whole, when the quota (and, with a topology request, Ready nodes in one network block)
has room for every pod, and then resumes it. A job with a topology request
(``kueue.x-k8s.io/podset-{preferred,required}-topology`` on the pod template) is placed by Kueue:
it picks a node for every pod and adds a ``kubernetes.io/hostname`` node selector to each, so the
two soft rules above (the preferred switch affinity and the layer-2 spread) would only be scored
among one node and are left out. The required rules stay and agree with Kueue's choice: Kueue picks
among the flavor's nodes (one pool, by its label) honouring the pods' node selector and tolerations,
the GPU node affinity names all of that pool's types (the configuration refuses a topology request
from an app that narrows them), and whole-node pods go one per node anyway. ``pool_selector`` pins the pods
to their pool's nodes, so that Kueue gives them that pool's ResourceFlavor and no other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi

from ..facts.catalog import GPU_INSTANCE_TYPES, efa_interface_count
from ..config import TORCHRUN_PORT, TRAINING_APP_NAME_MAX, Problem, image_reference_problem
from ..facts.gpu_nodes import (
    EFA_HUGEPAGES,
    EFA_RESOURCE,
    EKS_NODEGROUP_KEY,
    GPU_RESOURCE,
    HOSTNAME_KEY,
    HUGEPAGES_RESOURCE,
    INSTANCE_TYPE_KEY,
    gpu_node_selector,
    gpu_toleration,
    network_layer_key,
)
from ..facts.quantity import MIB, cpu_quantity, memory_quantity, parse_quantity

JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPONENT_LABEL = "app.kubernetes.io/component"
TRAINING_COMPONENT = "training"
PART_OF = "eks-gpu-training"
TRAINER_CONTAINER = "trainer"
SHM_VOLUME = "dshm"
SHARED_VOLUME = "shared-fs"
"""The pod volume of the shared file system's claim."""
EPHEMERAL_STORAGE_RESOURCE = "ephemeral-storage"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that hands a Job to Kueue: the LocalQueue it is submitted to (Kueue docs-jobs.md)."""
TOPOLOGY_ANNOTATIONS = {
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "required": "kueue.x-k8s.io/podset-required-topology",
}
"""Pod-template annotations of a Kueue topology request, by mode (Kueue docs-topology_aware_scheduling.md,
"User-facing APIs")."""
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"
"""Tells pulumi-kubernetes not to wait for a Job to complete: a training run takes hours, and a
suspended Job never starts."""

CPU_RESERVE_FRACTION, CPU_RESERVE_MIN = 10, 1
MEMORY_RESERVE_FRACTION, MEMORY_RESERVE_MIN_MIB = 10, 4096
"""A training pod's default CPU and memory requests leave 1/10 of the smallest allowed node (at
least one vCPU and 4 GiB) for what runs beside it: the kubelet's reservation and the GPU, EFA,
CNI and topology DaemonSets."""


@dataclass(frozen=True)
class TrainingJobSpec:
    """One distributed training job: what the pod template, the Job, its Service and PDB are built from."""

    name: str
    """App name; Job, Service and PDB are named after it."""
    nodes: int
    """Nodes (= pods, one per node)."""
    instance_types: tuple[str, ...]
    """Instance types the pods may land on."""
    priority_class: str
    """PriorityClass of the pods."""
    namespace: str
    """Namespace."""
    gpus_per_node: Optional[int] = None
    """GPUs per pod. Default: every GPU of the node."""
    efa: bool = False
    """Request the node's EFA devices plus EFA's hugepages. Default: false."""
    efa_devices_per_node: Optional[int] = None
    """EFA devices per pod with ``efa``. Default: every EFA device of the allowed types (the fewest any
    of them has); a node group whose launch template lays out fewer interfaces must say so."""
    host_network: bool = False
    """Use the node's network namespace (bypasses network policies). Default: false."""
    cpu: Optional[str] = None
    """CPU request per pod. Default: the smallest allowed node's vCPUs less 10% (at least one)."""
    memory: Optional[str] = None
    """Memory request per pod. Default: the smallest allowed node's memory less 10% (at least 4 GiB)."""
    shm_size_limit: Optional[str] = None
    """Size limit of /dev/shm. Default: none."""
    image: Optional[pulumi.Input[str]] = None
    """Container image; required to run the job (an Output of an image built in the same program will do). Default: none."""
    command: tuple[str, ...] = ()
    """Container command. Default: the image's entrypoint."""
    args: tuple[str, ...] = ()
    """Container arguments. Default: none."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables. Default: none."""
    suspend: bool = False
    """Create the Job suspended. Default: false."""
    backoff_limit: int = 0
    """Pod failures tolerated before the Job fails. Default: 0."""
    rendezvous_port: int = TORCHRUN_PORT
    """torchrun rendezvous port on rank 0. Default: 29500."""
    shared_volume_claim: Optional[str] = None
    """PersistentVolumeClaim of the shared file system (FSx for Lustre) the trainer mounts. Default: none."""
    shared_volume_mount_path: str = "/fsx"
    """Where the trainer mounts the shared file system. Default: /fsx."""
    ephemeral_storage: Optional[str] = None
    """Ephemeral-storage request per pod (scratch space, caches on the node's instance-store RAID0). Default: none."""
    queue_name: Optional[str] = None
    """Kueue LocalQueue the Job is submitted to (the Job is then created suspended, for Kueue to resume). Default: none (no Kueue)."""
    topology_mode: Optional[str] = None
    """Kueue topology request, ``preferred`` or ``required`` (needs ``queue_name`` and ``topology_level``). Default: none."""
    topology_level: Optional[str] = None
    """Node label of the topology level requested, e.g. ``topology.k8s.aws/network-node-layer-3``. Default: none."""
    pool_selector: Optional[tuple[str, str]] = None
    """Node label (key, value) the pods must have: their pool's. Default: none (any GPU node of the types)."""
    revision: int = 1
    """Run of the job; each revision is a Job of its own (``job_name``). Default: 1."""
    service_account: Optional[str] = None
    """ServiceAccount the pods run as (its EKS Pod Identity role gives them AWS credentials). Default:
    none (the namespace's default account)."""

    @property
    def topology_request(self) -> Optional[tuple[str, str]]:
        """The pod-template annotation of the Kueue topology request (key, level), if any."""
        if self.queue_name is None or self.topology_mode is None or self.topology_level is None:
            return None
        return TOPOLOGY_ANNOTATIONS[self.topology_mode], self.topology_level

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def app_label(self) -> str:
        """The seed's ``app`` label: ``<name>-multi`` for multi-node apps, ``<name>`` for single-node ones."""
        return f"{self.name}-multi" if self.multi_node else self.name

    @property
    def node_gpus(self) -> int:
        """GPUs per pod: ``gpus_per_node``, else every GPU of the (smallest) allowed node."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        return min(GPU_INSTANCE_TYPES[t].gpus for t in self.instance_types)

    @property
    def efa_devices(self) -> int:
        """EFA devices per pod (0 without EFA)."""
        if not self.efa:
            return 0
        if self.efa_devices_per_node is not None:
            return self.efa_devices_per_node
        return efa_interface_count(list(self.instance_types))

    @property
    def pod_cpu(self) -> str:
        if self.cpu is not None:
            return self.cpu
        vcpus = min(GPU_INSTANCE_TYPES[t].vcpus for t in self.instance_types)
        return cpu_quantity(1000 * (vcpus - max(CPU_RESERVE_MIN, vcpus // CPU_RESERVE_FRACTION)))

    @property
    def pod_memory(self) -> str:
        if self.memory is not None:
            return self.memory
        mebibytes = min(GPU_INSTANCE_TYPES[t].memory_mib for t in self.instance_types)
        return memory_quantity(mebibytes - max(MEMORY_RESERVE_MIN_MIB, mebibytes // MEMORY_RESERVE_FRACTION))

    @property
    def job_name(self) -> str:
        """Name of the revision's Job: ``<name>`` for revision 1, ``<name>-r<revision>`` after it."""
        return self.name if self.revision == 1 else f"{self.name}-r{self.revision}"

    @property
    def master_address(self) -> str:
        """DNS name of rank 0: Indexed Job pods are named ``<job>-<index>``, the Service is the subdomain."""
        return f"{self.job_name}-0.{self.name}"


def torchrun_env(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """Environment torchrun reads its arguments from (``PET_<ARG>``), so the command is just ``torchrun train.py``."""
    env: list[dict[str, Any]] = [
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


GENERATED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "FI_PROVIDER")


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


def app_selector(spec: TrainingJobSpec) -> dict[str, Any]:
    """Label selector matching the app's pods (the seed's ``app In [<name>-multi]``)."""
    return {"matchExpressions": [label_in("app", [spec.app_label])]}


def label_in(key: str, values: Sequence[str]) -> dict[str, Any]:
    """A node selector requirement: label ``key`` has one of ``values``."""
    return {"key": key, "operator": "In", "values": list(values)}


def gpu_node_affinity(*requirements: dict[str, Any]) -> dict[str, Any]:
    """Required node affinity: a GPU node (``role=gpu-training``) that meets every requirement."""
    expressions = [label_in(key, [value]) for key, value in gpu_node_selector().items()]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [*expressions, *requirements]}]}}


def one_pod_per_node(selector: dict[str, Any]) -> dict[str, Any]:
    """Required pod anti-affinity: no two pods matching ``selector`` on one node."""
    return {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": selector, "topologyKey": HOSTNAME_KEY}]}


def whole_node_pod(container: dict[str, Any], node_label: tuple[str, str], selector: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a check that takes a whole GPU node (the smoke test, DCGM diagnostics): it
    tolerates the GPU taint, runs only on nodes labelled ``node_label`` (a pool), and never beside
    another pod matching ``selector``, so a Job of N such pods covers N nodes."""
    key, value = node_label
    return {
        "restartPolicy": "Never",
        "tolerations": [gpu_toleration()],
        "affinity": {
            "nodeAffinity": gpu_node_affinity(label_in(key, [value])),
            "podAntiAffinity": one_pod_per_node(selector),
        },
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }


def training_affinity(spec: TrainingJobSpec) -> dict[str, Any]:
    """GPU nodes of the allowed types (and pool), one pod per node, close together on the network
    unless Kueue places the pods (see the module docstring)."""
    selector = app_selector(spec)
    requirements = [label_in(INSTANCE_TYPE_KEY, spec.instance_types)]
    if spec.pool_selector is not None:
        requirements.append(label_in(spec.pool_selector[0], [spec.pool_selector[1]]))
    affinity: dict[str, Any] = {
        "nodeAffinity": gpu_node_affinity(*requirements),
        "podAntiAffinity": one_pod_per_node(selector),
    }
    if spec.topology_request is not None:
        return affinity
    return {
        **affinity,
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": network_layer_key(3)}},
                {"weight": 50, "podAffinityTerm": {"labelSelector": selector, "topologyKey": network_layer_key(2)}},
            ]
        },
    }


def training_topology_spread(spec: TrainingJobSpec) -> list[dict[str, Any]]:
    """One pod per node (hostname, DoNotSchedule); away from other training apps' switches (layer 2,
    ScheduleAnyway) unless Kueue places the pods."""
    per_node = {
        "maxSkew": 1,
        "topologyKey": HOSTNAME_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": spec.app_label}},
    }
    if spec.topology_request is not None:
        return [per_node]
    return [
        per_node,
        {
            "maxSkew": 1,
            "topologyKey": network_layer_key(2),
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {
                "matchExpressions": [
                    {"key": COMPONENT_LABEL, "operator": "In", "values": [TRAINING_COMPONENT]},
                    {"key": "app", "operator": "NotIn", "values": [spec.app_label]},
                ]
            },
        },
    ]


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
"""The only capabilities a training container keeps (all others dropped). Training images (AWS Deep
Learning Containers, NGC PyTorch) run as root and, at start, own files (chown, chmod, writes into
directories of other users), switch users and signal their worker processes. Nothing in training
needs a raw socket (NET_RAW: NCCL uses TCP sockets and EFA its own queue pairs through
/dev/infiniband), a privileged port (NET_BIND_SERVICE), device nodes (MKNOD), chroot or file
capabilities; with hostNetwork those would act on the node's own network, so they are dropped for
every training pod."""


def image_pull_policy(image: str) -> str:
    """``IfNotPresent`` for an image named by digest (the bytes cannot change); ``Always`` for a tag,
    so a tag moved to a rebuilt image is never served stale from a node's cache (the kubelet then
    resolves the tag at the registry and still reuses cached layers of the same digest)."""
    return "IfNotPresent" if "@sha256:" in image else "Always"


def training_pod_template(spec: TrainingJobSpec) -> dict[str, Any]:
    """The pod template (``PodTemplateSpec``) of a training job."""
    container: dict[str, Any] = {"name": TRAINER_CONTAINER}
    if spec.image is not None:
        container["image"] = spec.image
        container["imagePullPolicy"] = image_pull_policy(spec.image)
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    container.update(
        env=torchrun_env(spec) + [{"name": k, "value": v} for k, v in spec.env.items()],
        resources=training_resources(spec),
        volumeMounts=[{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
        + ([{"name": SHARED_VOLUME, "mountPath": spec.shared_volume_mount_path}] if spec.shared_volume_claim else []),
        securityContext={
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": list(TRAINING_CAPABILITIES)},
        },
    )
    shm: dict[str, Any] = {"medium": "Memory"}
    if spec.shm_size_limit is not None:
        shm["sizeLimit"] = spec.shm_size_limit
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": spec.name,
        "priorityClassName": spec.priority_class,
        "tolerations": [gpu_toleration()],
        "affinity": training_affinity(spec),
        "topologySpreadConstraints": training_topology_spread(spec),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        # Training talks to its peers, never to the API server: no API token in the pod. EKS Pod
        # Identity credentials come through a token volume of their own, so they do not need it.
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": [{"name": SHM_VOLUME, "emptyDir": shm}]
        + ([{"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": spec.shared_volume_claim}}] if spec.shared_volume_claim else []),
    }
    if spec.service_account is not None:
        pod["serviceAccountName"] = spec.service_account
    if spec.host_network:
        # Without ClusterFirstWithHostNet a host-network pod resolves through the node's resolver and
        # cannot find the rendezvous Service.
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    metadata: dict[str, Any] = {"labels": training_labels(spec)}
    if spec.queue_name is not None:
        metadata["labels"][QUEUE_NAME_LABEL] = spec.queue_name
    if spec.topology_request is not None:
        key, level = spec.topology_request
        metadata["annotations"] = {key: level}
    return {"metadata": metadata, "spec": pod}


def _metadata(spec: TrainingJobSpec) -> dict[str, Any]:
    return {"name": spec.name, "namespace": spec.namespace, "labels": training_labels(spec)}


def job_metadata(spec: TrainingJobSpec) -> dict[str, Any]:
    """The Job's metadata: the app's, plus Kueue's queue label when the Job is queued."""
    metadata = _metadata(spec)
    if spec.queue_name is not None:
        metadata["labels"][QUEUE_NAME_LABEL] = spec.queue_name
    return metadata


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


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def validate_training_job(spec: TrainingJobSpec, path: str) -> list[Problem]:
    """Rules of one job; keys are named as in a stack's ``scheduling.trainingApps[]`` entry."""
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(f"{path}.{key}" if key else path, message))

    if not _DNS_LABEL.fullmatch(spec.name) or len(spec.name) > TRAINING_APP_NAME_MAX:
        problem("name", f"must be a DNS label (lowercase letters, digits, '-') of at most {TRAINING_APP_NAME_MAX} characters")
    if spec.nodes < 1:
        problem("nodes", "must be at least 1")
    image_problem = image_reference_problem(spec.image) if spec.image is not None else None
    if image_problem is not None:
        problem("job.image", image_problem)
    if not spec.instance_types:
        problem("instanceTypes", "must list at least one GPU instance type")
    unknown = [t for t in spec.instance_types if t not in GPU_INSTANCE_TYPES]
    for instance_type in unknown:
        problem("instanceTypes", f"'{instance_type}' is not a GPU instance type of the catalog")
    if unknown or not spec.instance_types:
        return problems

    types = {t: GPU_INSTANCE_TYPES[t] for t in spec.instance_types}
    gpu_counts = {t: f.gpus for t, f in types.items()}
    if spec.gpus_per_node is None and len(set(gpu_counts.values())) > 1:
        listed = ", ".join(f"{t} {n}" for t, n in gpu_counts.items())
        problem("gpusPerNode", f"is required: the instance types have different GPU counts ({listed}), so no whole-node count fits all")
    elif spec.gpus_per_node is not None and spec.gpus_per_node > min(gpu_counts.values()):
        problem("gpusPerNode", f"{spec.gpus_per_node} exceeds the GPUs of {min(gpu_counts, key=gpu_counts.get)} ({min(gpu_counts.values())})")
    if spec.efa and any(f.efa_interfaces == 0 for f in types.values()):
        problem("efa", f"is on but {', '.join(t for t, f in types.items() if f.efa_interfaces == 0)} has no EFA")
    elif spec.efa and spec.efa_devices_per_node is not None and not 1 <= spec.efa_devices_per_node <= efa_interface_count(list(types)):
        problem("efaDevicesPerNode", f"must lie between 1 and the {efa_interface_count(list(types))} EFA devices every allowed type has")

    smallest_cpu = min(types.values(), key=lambda f: f.vcpus)
    if spec.cpu is not None and parse_quantity(spec.cpu) > smallest_cpu.vcpus:
        problem("cpu", f"{spec.cpu} exceeds the {smallest_cpu.vcpus} vCPUs of the smallest allowed node")
    smallest_memory = min(f.memory_mib for f in types.values())
    if spec.memory is not None and parse_quantity(spec.memory) > smallest_memory * MIB:
        problem("memory", f"{spec.memory} exceeds the {memory_quantity(smallest_memory)} of the smallest allowed node")

    if spec.topology_mode is not None and spec.topology_mode not in TOPOLOGY_ANNOTATIONS:
        problem("topology", f"'{spec.topology_mode}' is not a Kueue topology mode; allowed: {', '.join(TOPOLOGY_ANNOTATIONS)}")
    elif spec.topology_mode is not None and (spec.queue_name is None or spec.topology_level is None):
        problem("topology", "a topology request needs a queue (queue_name) and a level (topology_level): only Kueue reads it")

    for name in spec.env:
        if name in GENERATED_ENV:
            problem(f"job.env.{name}", "is set by the template (torchrun rendezvous and EFA); remove it")
        elif not name or name[0].isdigit() or not set(name) <= _ENV_NAME_CHARS:
            problem(f"job.env.{name}", "is not a valid environment variable name")
    return problems
