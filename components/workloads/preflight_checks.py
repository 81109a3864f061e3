"""``PreflightChecks``: the pre-flight checks of ``preflight.py`` run as Jobs that `pulumi up` waits
for, on every managed GPU pool that starts with nodes (Karpenter pools launch nodes only for pending
pods, so there is nothing to check at `pulumi up`; run the checks there with
``eks-gpu-training-preflight``).

Per pool: DCGM diagnostics first, then, on EFA pools of two or more nodes, the NCCL all-reduce test
(both want every GPU of every node, and a node that fails its diagnostics should fail the update
before the network test). A Job's pod template is immutable, so a changed check replaces its Job
and runs again; an unchanged one is left alone, as the smoke test is.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..config import GpuTrainingPlatformArgs, PreflightConfig, Problem, TrainingNamespaceConfig
from ..facts.gpu_nodes import GPU_POOL_KEY
from .fleet_capacity import pool_capacity
from .teams import namespace_quota
from ..facts.quantity import MIB, cpu_quantity, memory_quantity, parse_quantity
from .preflight_jobs import DCGM_POD_CPU, DCGM_POD_MEMORY, NcclTestSpec, dcgm_diag_job, nccl_pod_requests, nccl_test_objects


@dataclass(frozen=True)
class PreflightPool:
    """A GPU pool the pre-flight checks run on."""

    name: str
    """Pool name."""
    pool_label: tuple[str, str]
    """Node label that selects the pool's nodes."""
    nodes: int
    """Nodes to check: the pool's size at creation."""
    gpus: int
    """GPUs of each node."""
    instance_types: tuple[str, ...]
    """The pool's instance types."""
    efa_devices: int
    """EFA devices per node; 0 without EFA."""

    @property
    def runs_nccl(self) -> bool:
        """An all-reduce across nodes needs EFA and at least two nodes."""
        return self.efa_devices > 0 and self.nodes >= 2


def preflight_pools(args: GpuTrainingPlatformArgs) -> list[PreflightPool]:
    """Every managed GPU pool that starts with nodes."""
    pools = []
    for i, pool in enumerate(args.gpu_node_groups):
        capacity = pool_capacity(pool, f"gpuNodeGroups[{i}]")
        if capacity is None or pool.initial_size == 0:
            continue
        pools.append(
            PreflightPool(
                name=pool.name,
                pool_label=(GPU_POOL_KEY, pool.name),
                nodes=pool.initial_size,
                gpus=capacity.smallest_node_gpus,
                instance_types=tuple(pool.instance_types),
                efa_devices=pool.efa_interfaces if pool.efa_enabled else 0,
            )
        )
    return pools


def preflight_namespace(args: GpuTrainingPlatformArgs) -> Optional[str]:
    """``preflight.namespace``, else the first training namespace (None when there is none)."""
    namespace = args.preflight.namespace
    if namespace is not None:
        return namespace
    return args.scheduling.namespaces[0].name if args.scheduling.namespaces else None


def validate_preflight(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Rules of ``preflight`` that involve other keys."""
    preflight = args.preflight
    if not preflight.enabled:
        return []
    namespaces = {ns.name: ns for ns in args.scheduling.namespaces}
    namespace = preflight_namespace(args)
    if namespace is None or namespace not in namespaces:
        return [Problem("preflight.namespace", f"'{namespace}' is not in scheduling.namespaces; allowed: {', '.join(namespaces) or 'none'}")]
    if not (preflight.dcgm_diag.enabled or preflight.nccl.enabled):
        return [Problem("preflight.enabled", "is true but dcgmDiag.enabled and nccl.enabled are both false: nothing would run")]
    pools = preflight_pools(args)
    if not pools:
        return [Problem("preflight.enabled", "no managed GPU pool starts with nodes (every initial size is 0), so there is nothing to check")]
    if not preflight.dcgm_diag.enabled and not any(p.runs_nccl for p in pools):
        return [
            Problem(
                "preflight.dcgmDiag.enabled",
                "is false and no pool that starts with nodes has EFA and two or more nodes for the NCCL test: nothing would run",
            )
        ]
    problems = []
    if preflight.nccl.enabled and preflight.nccl.image is None and any(p.runs_nccl for p in pools):
        names = ", ".join(p.name for p in pools if p.runs_nccl)
        problems.append(
            Problem(
                "preflight.nccl.image",
                f"is required to run the NCCL test on {names}: an image with Open MPI, sshd and nccl-tests built "
                "with MPI=1 (AWS's nccl-tests.Dockerfile, or public.ecr.aws/hpc-cloud/nccl-tests:<tag>); or set nccl.enabled: false",
            )
        )
    problems += _quota_problems(args, pools, namespace, namespaces[namespace])
    return problems


def _quota_problems(args: GpuTrainingPlatformArgs, pools: Sequence[PreflightPool], namespace: str, namespace_config: TrainingNamespaceConfig) -> list[Problem]:
    """Each pool's checks run one after the other, the pools' checks all at once: the namespace quota
    must admit the largest check of every pool together, or pods are refused and the update waits
    for its timeout."""
    config = args.preflight
    gpus, cpu, memory = 0, Fraction(0), Fraction(0)
    for pool in pools:
        demands = []
        if config.dcgm_diag.enabled:
            demands.append((parse_quantity(DCGM_POD_CPU), parse_quantity(DCGM_POD_MEMORY)))
        if config.nccl.enabled and pool.runs_nccl:
            pod_cpu, pod_memory = nccl_pod_requests(_nccl_spec(pool, config, namespace, None))
            demands.append((parse_quantity(pod_cpu), parse_quantity(pod_memory)))
        if not demands:
            continue
        gpus += pool.nodes * pool.gpus
        cpu += pool.nodes * max(d[0] for d in demands)
        memory += pool.nodes * max(d[1] for d in demands)
    quota = namespace_quota(namespace_config, args)
    limits = (("GPUs", gpus, quota.gpus, str(quota.gpus)), ("CPU", cpu, parse_quantity(quota.cpu), quota.cpu), ("memory", memory, parse_quantity(quota.memory), quota.memory))
    return [
        Problem("preflight.namespace", f"the pre-flight checks need {_amount(needed, what)} {what} at once but '{namespace}' allows {shown}")
        for what, needed, allowed, shown in limits
        if needed > allowed
    ]


def _amount(value: int | Fraction, what: str) -> str:
    if what == "memory":
        return memory_quantity(int(value // MIB))
    if what == "CPU":
        return cpu_quantity(int(value * 1000))
    return str(int(value))


def _nccl_spec(pool: PreflightPool, config: PreflightConfig, namespace: str, priority_class: Optional[str]) -> NcclTestSpec:
    return NcclTestSpec(
        pool=pool.name,
        pool_label=pool.pool_label,
        instance_types=pool.instance_types,
        nodes=pool.nodes,
        image=config.nccl.image or "",
        namespace=namespace,
        priority_class=priority_class,
        min_bus_bandwidth_fraction=config.nccl.min_bus_bandwidth_fraction,
        active_deadline_seconds=config.timeout_minutes * 60,
        efa_devices_per_node=pool.efa_devices,
    )


@documented_args
@dataclass
class PreflightChecksArgs:
    """Arguments of ``PreflightChecks``."""

    pools: Sequence[PreflightPool]
    """Pools to check."""
    namespace: str
    """Namespace of the Jobs."""
    priority_class: Optional[str]
    """PriorityClass of the NCCL pods (they take whole nodes like training). Default: none."""
    config: PreflightConfig
    """DCGM level and image, NCCL image and threshold, timeout."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(PreflightChecksArgs)
class PreflightChecks(pulumi.ComponentResource):
    """DCGM diagnostics and the NCCL all-reduce test on each pool, as Jobs `pulumi up` waits for.
    Make it depend on the node groups, the GPU Operator and EFA device plugin, and the namespace;
    give it the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    def __init__(self, name: str, args: Optional[PreflightChecksArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(PreflightChecksArgs, "PreflightChecks", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"PreflightChecks({name})")
        super().__init__("eks-gpu-training:index:PreflightChecks", name, None, opts)
        config = args.config
        deadline = config.timeout_minutes * 60
        awaited = pulumi.CustomTimeouts(create=f"{config.timeout_minutes}m", update=f"{config.timeout_minutes}m")
        for pool in args.pools:
            before_nccl: list[pulumi.Resource] = []
            if config.dcgm_diag.enabled:
                job = dcgm_diag_job(
                    pool.name, pool.pool_label, pool.nodes, pool.gpus, config.dcgm_diag.level, config.dcgm_diag.image, args.namespace, deadline
                )
                before_nccl.append(
                    k8s.batch.v1.Job(
                        f"{name}-{pool.name}-dcgm-diag",
                        metadata=job["metadata"],
                        spec=job["spec"],
                        # The pod template is immutable: a change replaces the Job, whose fixed name must be free first.
                        opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, custom_timeouts=awaited),
                    )
                )
            if not (config.nccl.enabled and pool.runs_nccl and config.nccl.image is not None):
                continue
            spec = _nccl_spec(pool, config, args.namespace, args.priority_class)
            # Generated once and kept (encrypted) in the stack's state, so the Secret is stable across updates.
            key = tls.PrivateKey(f"{name}-{pool.name}-nccl-ssh-key", algorithm="ED25519", opts=pulumi.ResourceOptions(parent=self))
            secret, config_map, service, job = nccl_test_objects(spec, key.private_key_openssh, key.public_key_openssh)
            prerequisites = [
                k8s.core.v1.Secret(
                    f"{name}-{pool.name}-nccl-ssh",
                    metadata=secret["metadata"],
                    type=secret["type"],
                    string_data=secret["stringData"],
                    opts=pulumi.ResourceOptions(parent=self),
                ),
                k8s.core.v1.ConfigMap(
                    f"{name}-{pool.name}-nccl-judge",
                    metadata=config_map["metadata"],
                    data=config_map["data"],
                    opts=pulumi.ResourceOptions(parent=self),
                ),
                k8s.core.v1.Service(
                    f"{name}-{pool.name}-nccl-hosts",
                    metadata=service["metadata"],
                    spec=service["spec"],
                    opts=pulumi.ResourceOptions(parent=self),
                ),
            ]
            k8s.batch.v1.Job(
                f"{name}-{pool.name}-nccl-test",
                metadata=job["metadata"],
                spec=job["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    delete_before_replace=True,
                    custom_timeouts=awaited,
                    depends_on=[*prerequisites, *before_nccl],
                ),
            )
        self.register_outputs({})
