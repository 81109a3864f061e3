"""Scheduling policy: PriorityClasses, training namespaces with their ResourceQuotas, and PDBs for
the training apps the stack does not run itself; and the stack's training apps as ``TrainingJobSpec``s.

The GPU quota of a namespace defaults to the fleet's GPU capacity (``fleet_capacity.py``). The
stack-wide rules that tie quotas, apps and pools together are ``scheduling_validation.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..config import (
    DEFAULT_PRIORITY_CLASSES,
    ConfigError,
    GpuTrainingPlatformArgs,
    PriorityClassConfig,
    Problem,
    TrainingAppConfig,
)
from .host_network_admission import host_network_policy_binding_manifest, host_network_policy_manifest
from ..facts.gpu_nodes import network_layer_key
from .fleet_capacity import PoolCapacity, ResolvedQuota, fleet_capacity, pool_capacity
from .teams import namespace_quota, team_of
from ..config.team_settings import team_gid
from .kueue_flavors import app_topology, pool_flavor, topology_layer_of
from .kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE
from .gpu_smoke_test import SmokeTestPool
from .training_storage import training_storage_fields
from .templates import training_pdb
from .node_fit import stack_node_load
from .training_spec import PART_OF, SecretKeyRef, TrainingJobSpec
from ..config.inputs import is_unknown
from ..facts.catalog import GPU_INSTANCE_TYPES
from ..config.arguments import check_model_fields
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider

QUOTA_NAME = "gpu-quota"
"""Name of each training namespace's ResourceQuota (the seed's)."""

POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"


# --- Kubernetes objects -------------------------------------------------------------------------


def priority_class(config: PriorityClassConfig) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": config.name, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "value": config.value,
        "globalDefault": config.global_default,
        "description": config.description,
        "preemptionPolicy": config.preemption_policy,
    }


def training_network_policy(namespace: str) -> dict[str, Any]:
    """Pods of a training namespace accept connections from pods of the same namespace only: the
    ranks of a job reach each other on any port (torchrun's rendezvous, NCCL's sockets), nothing
    outside the namespace reaches them. Egress stays open (S3, the registry, the API server).
    Host-network pods are outside any NetworkPolicy (they use the node's network)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "same-namespace-only", "namespace": namespace, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]},
    }


POD_SECURITY_WARN_LABEL = "pod-security.kubernetes.io/warn"
POD_SECURITY_AUDIT_LABEL = "pod-security.kubernetes.io/audit"


def training_namespace(name: str, pod_security: str) -> dict[str, Any]:
    """A training namespace that enforces a Pod Security Standard (``baseline`` refuses host
    networking) and warns and audits against ``restricted``: training images run as root with a few
    capabilities, which ``restricted`` refuses, so it cannot be enforced, but every pod that would
    fail it says so to whoever creates it and in the API server's audit log (warn and audit never
    refuse a pod; kubernetes.io/docs/concepts/security/pod-security-admission/)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {
            POD_SECURITY_LABEL: pod_security,
            POD_SECURITY_WARN_LABEL: "restricted",
            POD_SECURITY_AUDIT_LABEL: "restricted",
            "app.kubernetes.io/part-of": PART_OF,
        }},
    }


def resource_quota(namespace: str, quota: ResolvedQuota) -> dict[str, Any]:
    """The namespace's ResourceQuota. Because it limits ``requests.cpu`` and ``requests.memory``,
    every pod in the namespace must request both (the training templates do)."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "spec": {"hard": quota.hard()},
    }


def training_service_account(namespace: str, name: str) -> dict[str, Any]:
    """The ServiceAccount training pods run as. No API token is mounted: training pods never talk to
    the API server, and EKS Pod Identity does not need it (its webhook mounts a projected token of its
    own, audience ``pods.eks.amazonaws.com``, beside ``AWS_CONTAINER_CREDENTIALS_FULL_URI``)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": PART_OF}},
        "automountServiceAccountToken": False,
    }


# --- from the stack's configuration ---------------------------------------------------------------


def default_priority_class(classes: Sequence[PriorityClassConfig]) -> Optional[str]:
    """The class training apps get unless they name one: the highest value."""
    return max(classes, key=lambda c: c.value).name if classes else None


def app_pool(app: TrainingAppConfig, args: GpuTrainingPlatformArgs) -> Optional[PoolCapacity]:
    """The app's pool: the one it names, else the only pool; None when that does not exist or the
    name is ambiguous."""
    fleet = fleet_capacity(args)
    if app.pool is None:
        return fleet[0] if len(fleet) == 1 else None
    named = [c for c in fleet if c.pool.name == app.pool]
    return named[0] if len(named) == 1 else None


def training_job_spec(app: TrainingAppConfig, args: GpuTrainingPlatformArgs) -> TrainingJobSpec:
    """The app with every default filled in from its pool, the namespaces and the priority classes.
    Call it on arguments that passed ``validate_scheduling``."""
    scheduling = args.scheduling
    capacity = app_pool(app, args)
    assert capacity is not None, "validate_scheduling reports an app without a pool"  # noqa: S101 - an invariant of validated args
    pool = capacity.pool
    job = app.job
    runs: dict[str, Any] = (
        dict(
            image=job.image,
            command=tuple(job.command),
            args=tuple(job.args),
            env={
                name: value if isinstance(value, str) or is_unknown(value) else SecretKeyRef(value.secret_key_ref.name, value.secret_key_ref.key)
                for name, value in job.env.items()
            },
            suspend=job.suspend,
            backoff_limit=job.backoff_limit,
            rendezvous_port=job.rendezvous_port,
            revision=job.revision,
            kind=app.kind,
            max_restarts=job.max_restarts,
        )
        if job is not None
        else {}
    )
    queued: dict[str, Any] = {}
    if args.kueue.enabled:
        # Pinned to its own pool, so Kueue gives the job that pool's flavor (EFA jobs stay on managed pools).
        flavor = pool_flavor(capacity)
        mode = app_topology(app, flavor, args.kueue)
        queued = dict(
            queue_name=HELD_LOCAL_QUEUE if job is not None and job.suspend else LOCAL_QUEUE,
            topology_mode=mode,
            topology_level=network_layer_key(topology_layer_of(args.kueue, app.nodes)) if mode is not None else None,
            pool_selector=flavor.node_label,
            unreachable_node_seconds=args.kueue.unreachable_node_seconds,
        )
    instance_types = tuple(app.instance_types if app.instance_types is not None else pool.instance_types)
    namespace = app.namespace if app.namespace is not None else scheduling.namespaces[0].name
    team = team_of(args, namespace)
    return TrainingJobSpec(
        name=app.name,
        nodes=app.nodes,
        namespace=namespace,
        instance_types=instance_types,
        priority_class=app.priority_class if app.priority_class is not None else default_priority_class(scheduling.priority_classes),
        gpus_per_node=app.gpus_per_node,
        efa=app.efa if app.efa is not None else pool.efa_enabled,
        # The nodes have the interfaces the pool's launch template lays out, which may be fewer than the
        # app's own instance types have when it narrows a pool of several types.
        efa_devices_per_node=pool.efa_interfaces or None,
        host_network=app.host_network,
        cpu=app.cpu,
        memory=app.memory,
        shm_size_limit=app.shm_size_limit,
        **training_storage_fields(args, app.instance_types if app.instance_types is not None else pool.instance_types, namespace),
        run_as=team_gid(team) if team is not None else None,
        service_account=scheduling.service_account.name,
        node_loads={t: stack_node_load(args, t, efa_node=pool.efa_enabled) for t in instance_types if t in GPU_INSTANCE_TYPES},
        **runs,
        **queued,
    )


def duplicate_indices(values: Sequence[Any]) -> dict[int, int]:
    """For each index whose value appeared earlier, the index of its first occurrence."""
    return {i: values.index(v) for i, v in enumerate(values) if values.index(v) != i}


def validate_priority_classes(classes: Sequence[PriorityClassConfig], path: str) -> list[Problem]:
    """Unique names, unique values (two classes of one value would not order pods), at most one global default."""
    problems = []
    for i, first in duplicate_indices([c.name for c in classes]).items():
        problems.append(Problem(f"{path}[{i}].name", f"'{classes[i].name}' is used by {path}[{first}] too"))
    for i, first in duplicate_indices([c.value for c in classes]).items():
        problems.append(Problem(f"{path}[{i}].value", f"{classes[i].value} is the value of {path}[{first}] too; values must be unique"))
    defaults = [i for i, c in enumerate(classes) if c.global_default]
    for i in defaults[1:]:
        problems.append(Problem(f"{path}[{i}].globalDefault", f"only one class may be the global default ({path}[{defaults[0]}] is)"))
    return problems


def smoke_test_pools(args: GpuTrainingPlatformArgs) -> list[SmokeTestPool]:
    """Every managed pool that starts with nodes, with the GPUs each node must show. Pools at zero and
    Karpenter pools (which launch nodes only for pending pods) have no node to check at `pulumi up`."""
    pools = []
    for i, pool in enumerate(args.gpu_node_groups):
        capacity = pool_capacity(pool, f"gpuNodeGroups[{i}]")
        if capacity is not None and pool.initial_size > 0:
            pools.append(SmokeTestPool(pool.name, pool.initial_size, capacity.smallest_node_gpus))
    return pools


# --- component ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespacePolicy:
    """A training namespace to create, with its quota."""

    name: str
    """Namespace name."""
    quota: ResolvedQuota
    """Its ResourceQuota: GPUs, CPU, memory and PVCs the namespace may request."""
    pod_security: str = "baseline"
    """Pod Security Standard enforced. Default: baseline."""


@documented_args
@dataclass
class SchedulingPoliciesArgs:
    """Arguments of ``SchedulingPolicies``."""

    priority_classes: Sequence[PriorityClassConfig] = DEFAULT_PRIORITY_CLASSES
    """PriorityClasses. Default: the seed's three."""
    namespaces: Sequence[NamespacePolicy] = ()
    """Training namespaces with their quotas. Default: none."""
    protected_apps: Sequence[TrainingJobSpec] = ()
    """Training apps deployed by other means that get a PodDisruptionBudget here. Default: none."""
    service_account: Optional[str] = None
    """ServiceAccount created in every namespace for training pods. Default: none."""

    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


def scheduling_policies_args(args: GpuTrainingPlatformArgs) -> SchedulingPoliciesArgs:
    """The stack's policy; apps the stack runs itself (with ``job``) get their PDB from ``TrainingJob`` instead,
    since two PDBs over one pod make the eviction API refuse to evict it at all."""
    scheduling = args.scheduling
    return SchedulingPoliciesArgs(
        priority_classes=list(scheduling.priority_classes),
        namespaces=[NamespacePolicy(ns.name, namespace_quota(ns, args), ns.pod_security) for ns in scheduling.namespaces],
        protected_apps=[training_job_spec(app, args) for app in scheduling.training_apps if app.job is None],
        service_account=scheduling.service_account.name,
    )


@documented_component(SchedulingPoliciesArgs)
class SchedulingPolicies(pulumi.ComponentResource):
    """PriorityClasses, training namespaces with ResourceQuotas, and PodDisruptionBudgets for training
    apps. Give it the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    priority_class_names: pulumi.Output[list[str]]
    """Names of the PriorityClasses created."""
    namespace_names: pulumi.Output[list[str]]
    """Names of the training namespaces created."""
    namespaces: dict[str, k8s.core.v1.Namespace]
    """The training namespaces by name, for objects that live in them (Kueue's LocalQueues)."""

    def __init__(self, name: str, args: Optional[SchedulingPoliciesArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(SchedulingPoliciesArgs, "SchedulingPolicies", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"SchedulingPolicies({name})")
        path = f"SchedulingPolicies({name})"
        problems = validate_priority_classes(args.priority_classes, f"{path}.priorityClasses")
        names = [ns.name for ns in args.namespaces]
        for i, first in duplicate_indices(names).items():
            problems.append(Problem(f"{path}.namespaces[{i}].name", f"'{names[i]}' is also namespaces[{first}]"))
        for i, app in enumerate(args.protected_apps):
            if app.namespace not in names:
                problems.append(Problem(f"{path}.protectedApps[{i}].namespace", f"'{app.namespace}' is not among the namespaces created here"))
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:SchedulingPolicies", name, None, opts)

        for config in args.priority_classes:
            body = priority_class(config)
            k8s.scheduling.v1.PriorityClass(
                f"{name}-{config.name}",
                metadata=body["metadata"],
                value=body["value"],
                global_default=body["globalDefault"],
                description=body["description"],
                preemption_policy=body["preemptionPolicy"],
                # The value is immutable, and the Kubernetes provider does not know it (it plans an
                # update, which the API server refuses): a new value replaces the class, whose name
                # must be free first.
                opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["value"], delete_before_replace=True),
            )

        if any(policy.pod_security == "privileged" for policy in args.namespaces):
            # Host networking needs a privileged namespace; this policy keeps the rest of
            # "privileged" out of it and host networking to the training pods' ServiceAccount (see
            # host_network_admission). Without one of the stack's, they run as the namespace's default.
            policy_body = host_network_policy_manifest(args.service_account or "default")
            binding_body = host_network_policy_binding_manifest()
            host_network_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-host-network-policy",
                metadata=policy_body["metadata"],
                spec=policy_body["spec"],
                opts=pulumi.ResourceOptions(parent=self),
            )
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-host-network-policy-binding",
                metadata=binding_body["metadata"],
                spec=binding_body["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[host_network_policy]),
            )

        created: dict[str, k8s.core.v1.Namespace] = {}
        for policy in args.namespaces:
            namespace = k8s.core.v1.Namespace(
                f"{name}-{policy.name}",
                metadata=training_namespace(policy.name, policy.pod_security)["metadata"],
                opts=pulumi.ResourceOptions(parent=self),
            )
            created[policy.name] = namespace
            network_policy = training_network_policy(policy.name)
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy.name}-network-policy",
                metadata=network_policy["metadata"],
                spec=network_policy["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            quota = resource_quota(policy.name, policy.quota)
            k8s.core.v1.ResourceQuota(
                f"{name}-{policy.name}-quota",
                metadata=quota["metadata"],
                spec=quota["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            if args.service_account is not None:
                account = training_service_account(policy.name, args.service_account)
                k8s.core.v1.ServiceAccount(
                    f"{name}-{policy.name}-service-account",
                    metadata=account["metadata"],
                    automount_service_account_token=account["automountServiceAccountToken"],
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
                )

        for app in args.protected_apps:
            pdb = training_pdb(app)
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-{app.name}-pdb",
                metadata=pdb["metadata"],
                spec=pdb["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[created[app.namespace]]),
            )

        self.namespaces = created
        self.priority_class_names = pulumi.Output.from_input([c.name for c in args.priority_classes])
        self.namespace_names = pulumi.Output.from_input(names)
        self.register_outputs({"priorityClassNames": self.priority_class_names, "namespaceNames": self.namespace_names})
