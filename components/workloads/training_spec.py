"""A distributed training job as plain data: ``TrainingJobSpec`` with the defaults it fills in from its
instance types, the labels that mark a training app's objects, and the rules a spec must pass
(``validate_training_job``). The Kubernetes objects built from a spec are ``templates.py``'s; where
its pods are placed, ``placement.py``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

import pulumi

from ..facts.catalog import GPU_INSTANCE_TYPES, efa_interface_count
from ..config import JOB_KINDS, TORCHRUN_PORT, TRAINING_APP_NAME_MAX, Problem, image_reference_problem
from ..config.scheduling import MAX_RESTARTS, MAX_RESTARTS_LIMIT
from ..facts.quantity import MIB, cpu_quantity, memory_quantity, parse_quantity
from .node_fit import NodeLoad, default_requests, library_node_load, training_room

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPONENT_LABEL = "app.kubernetes.io/component"
TRAINING_COMPONENT = "training"
PART_OF = "eks-gpu-training"
TOPOLOGY_ANNOTATIONS = {
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "required": "kueue.x-k8s.io/podset-required-topology",
}
"""Pod-template annotations of a Kueue topology request, by mode (Kueue docs-topology_aware_scheduling.md,
"User-facing APIs")."""

REPLICATED_JOB = "node"
"""The one replicated Job of a JobSet or TrainingRuntime: a Job of one pod per node. Kubeflow Trainer's
torch plugin fills in torchrun's environment in the ``node`` container of the ``node`` Job only."""

CHECKPOINT_ENV = "CHECKPOINT_DIR"
"""The environment variable that names a training pod's checkpoint directory (``templates.checkpoint_env``)."""
CHECKPOINT_MOUNT_PATH = "/checkpoints"
"""Where every training pod finds its checkpoint directory."""
CHECKPOINTS_SUBDIRECTORY = "checkpoints"
"""The folder of the shared file system that holds every app's checkpoint directory."""

GENERATED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "FI_PROVIDER",
                 CHECKPOINT_ENV)
"""Environment variables the pod template sets itself (``templates.torchrun_env``, ``templates.checkpoint_env``), so a job may not."""


@dataclass(frozen=True)
class SecretKeyRef:
    """An environment variable's value kept in a Secret of the job's namespace (the pod spec names
    the Secret and key only: ``env[].valueFrom.secretKeyRef``)."""

    name: str
    """The Secret."""
    key: str
    """Its key."""


EnvValue = Union[pulumi.Input[str], SecretKeyRef]
"""What a training job's extra environment variable holds."""


@dataclass(frozen=True)
class TrainingJobSpec:
    """One distributed training job: what the pod template, the Job, its Service and PDB are built from."""

    name: str
    """App name; Job, Service and PDB are named after it."""
    nodes: int
    """Nodes (= pods, one per node)."""
    instance_types: tuple[str, ...]
    """Instance types the pods may land on."""
    priority_class: Optional[str]
    """PriorityClass of the pods; None (a stack with no priority classes): the cluster's default."""
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
    """CPU request per pod. Default: what the smallest allowed node offers a pod beside its DaemonSets
    (``node_loads``), less a reserve of 1% (at least 500m), in whole cores (``node_fit``)."""
    memory: Optional[str] = None
    """Memory request per pod. Default: what the smallest allowed node offers a pod beside its
    DaemonSets and EFA's hugepages, less a reserve of 1% (at least 1 GiB) (``node_fit``)."""
    shm_size_limit: Optional[str] = None
    """Size limit of /dev/shm. Default: none."""
    image: Optional[pulumi.Input[str]] = None
    """Container image; required to run the job (an Output of an image built in the same program will do). Default: none."""
    command: tuple[str, ...] = ()
    """Container command. Default: the image's entrypoint."""
    args: tuple[str, ...] = ()
    """Container arguments. Default: none."""
    env: Mapping[str, "EnvValue"] = field(default_factory=dict)
    """Extra environment variables: a value (an Output stays one, a secret one stays secret) or a
    ``SecretKeyRef``, read by the kubelet from a Secret of the namespace. Default: none."""
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
    checkpoint_mount_path: str = CHECKPOINT_MOUNT_PATH
    """Where the trainer finds its checkpoint directory (``CHECKPOINT_DIR``): the shared file
    system's ``checkpoints/<namespace>/<name>`` (under ``teams/<team>`` in a team's namespace), seen
    by every run and requeue, else an emptyDir on the node that lasts as long as the pod. Default:
    /checkpoints."""
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
    unreachable_node_seconds: Optional[int] = None
    """Seconds a pod stays on a node that stopped answering (tolerations of
    ``node.kubernetes.io/unreachable`` and ``not-ready``) before eviction; with ``queue_name`` the
    pod also opts in to Kueue's forceful deletion, so its Job makes the rank again. Default: none
    (the API server's 300 s)."""
    kind: str = "Job"
    """What runs the job: ``Job`` (an Indexed Job), ``JobSet`` or ``TrainJob`` (``config.JOB_KINDS``). Default: Job."""
    max_restarts: int = MAX_RESTARTS
    """Group restarts of a JobSet or TrainJob when one rank fails (JobSet's ``failurePolicy.maxRestarts``). Default: 3."""
    revision: int = 1
    """Run of the job; each revision is a Job of its own (``job_name``). Default: 1."""
    run_as: Optional[int] = None
    """User and group ID the containers run as (``runAsUser``, ``runAsGroup``, ``fsGroup``; a team's,
    owner of its directory), holding no capability at all. Default: none (the image's user, holding
    ``templates.TRAINING_CAPABILITIES``)."""
    service_account: Optional[str] = None
    """ServiceAccount the pods run as (its EKS Pod Identity role gives them AWS credentials). Default:
    none (the namespace's default account)."""
    node_loads: Optional[Mapping[str, NodeLoad]] = None
    """What stands on a node of each instance type before the pod arrives (DaemonSets, hugepages),
    which the default requests leave room for. Default: every DaemonSet this library can run on a GPU
    node, and EFA's hugepages where ``efa`` is on; a platform passes its stack's own."""

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

    def node_load(self, instance_type: str) -> NodeLoad:
        """What stands on a node of ``instance_type`` before the pod (``node_loads``, else the library's)."""
        if self.node_loads is not None and instance_type in self.node_loads:
            return self.node_loads[instance_type]
        return library_node_load(instance_type, efa_node=self.efa)

    @property
    def pod_cpu(self) -> str:
        if self.cpu is not None:
            return self.cpu
        millicores, _ = default_requests(self.instance_types, self.node_load)
        return cpu_quantity(millicores)

    @property
    def pod_memory(self) -> str:
        if self.memory is not None:
            return self.memory
        _, mebibytes = default_requests(self.instance_types, self.node_load)
        return memory_quantity(mebibytes)

    @property
    def job_name(self) -> str:
        """Name of the revision's Job: ``<name>`` for revision 1, ``<name>-r<revision>`` after it."""
        return self.name if self.revision == 1 else f"{self.name}-r{self.revision}"

    @property
    def checkpoint_subpath(self) -> str:
        """The app's checkpoint directory within the shared file system: the same for every run,
        revision, restart and requeue of the app, and apart from every other namespace's apps."""
        return f"{CHECKPOINTS_SUBDIRECTORY}/{self.namespace}/{self.name}"

    @property
    def master_address(self) -> str:
        """DNS name of rank 0. Indexed Job pods are named ``<job>-<index>`` under the app's Service;
        a JobSet's (and so a TrainJob's) ``<jobset>-<replicated job>-<job index>-<pod index>`` under
        the Service the JobSet makes, named after it (JobSet's ``network.subdomain`` default)."""
        if self.kind == "Job":
            return f"{self.job_name}-0.{self.name}"
        return f"{self.job_name}-{REPLICATED_JOB}-0-0.{self.job_name}"



_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def validate_training_job(spec: TrainingJobSpec, path: str) -> list[Problem]:  # noqa: C901 - one independent check per rule, each a row of the Refused-by table under this name
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
        problem("gpusPerNode", f"{spec.gpus_per_node} exceeds the GPUs of {min(gpu_counts, key=lambda t: gpu_counts[t])} ({min(gpu_counts.values())})")
    if spec.efa and any(f.efa_interfaces == 0 for f in types.values()):
        problem("efa", f"is on but {', '.join(t for t, f in types.items() if f.efa_interfaces == 0)} has no EFA")
    elif spec.efa and spec.efa_devices_per_node is not None and not 1 <= spec.efa_devices_per_node <= efa_interface_count(list(types)):
        problem("efaDevicesPerNode", f"must lie between 1 and the {efa_interface_count(list(types))} EFA devices every allowed type has")

    # The scheduler places the pod only where its requests fit beside the node's DaemonSets.
    rooms = [training_room(t, spec.node_load(t)) for t in types]
    tightest_cpu = min(rooms, key=lambda r: r.cpu_millicores)
    if spec.cpu is not None and parse_quantity(spec.cpu) * 1000 > tightest_cpu.cpu_millicores:
        problem("cpu", f"{spec.cpu} does not fit a {tightest_cpu.instance_type} node, which offers a pod "
                f"{cpu_quantity(tightest_cpu.cpu_millicores)} CPU beside its DaemonSets (allocatable less their requests)")
    tightest_memory = min(rooms, key=lambda r: r.memory_mib)
    if spec.memory is not None and parse_quantity(spec.memory) > tightest_memory.memory_mib * MIB:
        problem("memory", f"{spec.memory} does not fit a {tightest_memory.instance_type} node, which offers a pod "
                f"{memory_quantity(tightest_memory.memory_mib)} beside its DaemonSets and hugepages "
                "(allocatable less their requests)")

    if spec.topology_mode is not None and spec.topology_mode not in TOPOLOGY_ANNOTATIONS:
        problem("topology", f"'{spec.topology_mode}' is not a Kueue topology mode; allowed: {', '.join(TOPOLOGY_ANNOTATIONS)}")
    elif spec.topology_mode is not None and (spec.queue_name is None or spec.topology_level is None):
        problem("topology", "a topology request needs a queue (queue_name) and a level (topology_level): only Kueue reads it")

    if spec.kind not in JOB_KINDS:
        problem("kind", f"'{spec.kind}' is not a job kind; allowed: {', '.join(JOB_KINDS)}")
    if not 0 <= spec.max_restarts <= MAX_RESTARTS_LIMIT:
        problem("job.maxRestarts", f"must lie between 0 and {MAX_RESTARTS_LIMIT}")

    for name in spec.env:
        if name in GENERATED_ENV:
            problem(f"job.env.{name}", "is set by the template (torchrun rendezvous and EFA); remove it")
        elif not name or name[0].isdigit() or not set(name) <= _ENV_NAME_CHARS:
            problem(f"job.env.{name}", "is not a valid environment variable name")
    return problems
