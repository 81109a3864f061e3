"""The health gate in the cluster: the program in ``components/healthgate`` as a one-replica
Deployment on the system nodes, its settings, the check pod it runs on every joining GPU node
(``health_gate_check``, re-exported here), and the least privilege it needs (``aws.labeler_image``
builds and pushes its image).

Every object is a plain dict from a pure function below; ``HealthGate`` hands them to
pulumi-kubernetes. The namespace enforces ``baseline`` Pod Security, which the DCGM check's root
user needs; its ResourceQuota (``health_gate_quota``) bounds what the checks and the gate may hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..aws.labeler_image import HEALTH_GATE_DIR, build_and_push, ecr_repository_name
from ..facts.aws_names import PhysicalName
from ..config.base import Tags, tag_map
from ..config import ConfigError, GpuNodeGroupConfig, HealthGateConfig, KarpenterGpuNodePoolConfig, validate_health_gate
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..facts.catalog import GPU_INSTANCE_TYPES
from ..healthgate.gate_loop import HEARTBEAT_FILE, HEARTBEAT_MAX_AGE_SECONDS
from ..healthgate.gate_settings import CONFIG_KEY, GateSettings, PoolDevices
from ..addons import labeler_admission
from . import health_gate_admission
from .health_gate_check import CHECK_PRIORITY_CLASS, RESTRICTED, RUN_AS_USER, check_pod
from .health_gate_quota import pool_nodes_at_once, quota_hard, quota_manifest

NAME = "health-gate"
"""Name of the namespace, ServiceAccount, ConfigMap, roles and Deployment."""
NAMESPACE = NAME
SERVICE_ACCOUNT = NAME
REPOSITORY_SUFFIX = NAME
"""The gate's ECR repository is ``<cluster>/health-gate``."""
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "eks-gpu-training"}
SELECTOR = {"app.kubernetes.io/name": NAME}
PRIORITY_CLASS = "system-cluster-critical"
"""The gate holds every joining node back: it must not be preempted by workloads."""
QUARANTINE_IGNORED_REASONS = ("DCGMError",)
"""Agent reasons that are no GPU fault: ``DCGMError`` is the agent losing its DCGM host engine (its
own DaemonSet, a configuration, an upgrade), which would otherwise evict every job at once."""
GATE_CPU, GATE_MEMORY, GATE_CPU_LIMIT, GATE_MEMORY_LIMIT = "50m", "128Mi", "500m", "256Mi"
"""The gate's requests and limits: a list of nodes and Jobs every few seconds. The CPU limit keeps a
runaway round off the system node's other controllers; throttled, a round only ends later."""


def pool_devices(pool: Any) -> PoolDevices:
    """What every node of a GPU pool advertises: the GPUs of its smallest type, and its EFA layout."""
    gpus = min(GPU_INSTANCE_TYPES[t].gpus for t in pool.instance_types)
    return PoolDevices(gpus=gpus, efa=pool.efa_interfaces)


def gate_settings(gate_image: Any, config: HealthGateConfig, managed: Sequence[GpuNodeGroupConfig],
                  karpenter: Sequence[KarpenterGpuNodePoolConfig], mirrors: Optional[Mapping[str, str]] = None) -> GateSettings:
    """The gate's settings for the stack's GPU pools, the check images from ``mirrors``."""
    return GateSettings(
        namespace=NAMESPACE,
        pools={pool.name: pool_devices(pool) for pool in [*managed, *karpenter]},
        check_pod=check_pod(gate_image, config, mirrors),
        check_seconds=config.timeout_minutes * 60,
        quarantine=config.quarantine,
        quarantine_ignored_reasons=QUARANTINE_IGNORED_REASONS,
        karpenter_pools=tuple(pool.name for pool in karpenter),
        replacements_per_hour=config.max_node_replacements_per_hour,
    )


# --- Kubernetes objects (pure) ---------------------------------------------------------------------

def namespace_manifest() -> dict[str, Any]:
    """The gate's namespace: ``baseline`` enforced (the DCGM check runs as root), ``restricted``
    warned and audited."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
        **LABELS,
        "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "restricted",
    }}}


def check_priority_class_manifest() -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": CHECK_PRIORITY_CLASS, "labels": dict(LABELS)},
            "value": 0, "preemptionPolicy": "Never", "globalDefault": False,
            "description": "The health gate's node checks: they wait for a node's devices and never preempt."}


def service_account_manifest() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE,
                                                                        "labels": dict(LABELS)}}


def config_map_manifest(settings_json: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)},
            "data": {CONFIG_KEY: settings_json}}


def cluster_role_manifest(karpenter: bool) -> dict[str, Any]:
    """Nodes: list and watch them, and patch them and their status (the admission policy narrows what
    a patch may change); with Karpenter pools, list, watch and delete NodeClaims (the policy narrows
    which). The gate decides from lists, and its watches only say when to list again."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    ]
    if karpenter:
        rules.append({"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "watch", "delete"]})
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME, "labels": dict(LABELS)},
            "rules": rules}


def role_manifest() -> dict[str, Any]:
    """In its own namespace only: its check Jobs, their pods (the verdict), its ConfigMap, and Events."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)},
        "rules": [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "watch", "delete"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
            # A watch narrowed to one name is allowed by resourceNames (it selects metadata.name).
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME], "verbs": ["get", "watch"]},
            # Its NodeClaim deletions, recorded and counted (healthgate.replacements).
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "list", "watch"]},
        ],
    }


def _binding(kind: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": NAME, "labels": dict(LABELS)}
    if kind == "RoleBinding":
        metadata["namespace"] = NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole" if kind == "ClusterRoleBinding" else "Role",
                    "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
    }


def network_policy_manifest() -> dict[str, Any]:
    """No connection into the namespace: the gate and its checks listen on nothing."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "deny-ingress", "namespace": NAMESPACE, "labels": dict(LABELS)},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}


def deployment_manifest(image: Any, system_node_selector: Mapping[str, str]) -> dict[str, Any]:
    """One gate pod on the system nodes (``Recreate``: never two deciding at once)."""
    heartbeat_dir = HEARTBEAT_FILE.rsplit("/", 1)[0]
    age_check = (f"import os,sys,time; sys.exit(time.time() - os.path.getmtime({HEARTBEAT_FILE!r}) > {HEARTBEAT_MAX_AGE_SECONDS})")
    container = {
        "name": "gate",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--namespace", NAMESPACE, "--config-map", NAME, "--heartbeat-file", HEARTBEAT_FILE],
        "resources": {"requests": {"cpu": GATE_CPU, "memory": GATE_MEMORY}, "limits": {"cpu": GATE_CPU_LIMIT, "memory": GATE_MEMORY_LIMIT}},
        "securityContext": RESTRICTED,
        "livenessProbe": {"exec": {"command": ["python", "-c", age_check]}, "initialDelaySeconds": 60, "periodSeconds": 30,
                          "timeoutSeconds": 10, "failureThreshold": 3},
        "volumeMounts": [{"name": "run", "mountPath": heartbeat_dir}],
    }
    pod: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": True,
        "enableServiceLinks": False,
        "priorityClassName": PRIORITY_CLASS,
        "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": dict(SELECTOR)},
                 "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod}},
    }


def node_policy_manifest(managed_pools: Sequence[str], karpenter_pools: Sequence[str]) -> dict[str, Any]:
    """The gate's admission policy for the stack's managed and Karpenter GPU pools (by name)."""
    return health_gate_admission.node_policy_manifest(NAME, NAMESPACE, SERVICE_ACCOUNT, managed_pools, karpenter_pools, LABELS)


def resource_quota_manifest(config: HealthGateConfig, managed: Sequence[GpuNodeGroupConfig],
                            karpenter: Sequence[KarpenterGpuNodePoolConfig]) -> dict[str, Any]:
    """The namespace's ResourceQuota: a check pod for every node the pools may have at once, and the
    gate's pod (``health_gate_quota``)."""
    pools = [(pool_nodes_at_once(pool, f"gpuNodeGroups[{i}]"), pool_devices(pool)) for i, pool in enumerate(managed)]
    pools += [(pool_nodes_at_once(pool, f"karpenter.gpuNodePools[{i}]"), pool_devices(pool)) for i, pool in enumerate(karpenter)]
    requests_only = check_pod("", config)  # what its containers request, which no image changes
    hard = quota_hard(requests_only, pools, {"cpu": GATE_CPU, "memory": GATE_MEMORY})
    return quota_manifest(NAMESPACE, LABELS, hard)


def node_policy_binding_manifest() -> dict[str, Any]:
    return labeler_admission.node_policy_binding_manifest(NAME, LABELS)


def _resource_kwargs(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest as keyword arguments of its pulumi-kubernetes class (``roleRef`` -> ``role_ref``)."""
    return {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): value for key, value in manifest.items() if key not in ("apiVersion", "kind")}


def health_gate_physical_names(config: HealthGateConfig, cluster_name: Optional[str]) -> list[PhysicalName]:
    """The AWS names ``HealthGate`` generates: its ECR repository, named after the cluster, when it
    builds its image (none for a cluster name known only at deployment)."""
    if config.image is not None or cluster_name is None:
        return []
    return [PhysicalName("aws:ecr/repository:Repository", ecr_repository_name(cluster_name, REPOSITORY_SUFFIX), autonamed=False)]


# --- the component ---------------------------------------------------------------------------------

@documented_args
@dataclass
class HealthGateArgs:
    """Arguments of ``HealthGate``."""

    cluster: ClusterInput
    """The cluster whose GPU nodes are gated: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: HealthGateConfig
    """DCGM level and image, EFA loopback image, check deadline, quarantine, the gate's image (``enabled`` is read by ``GpuTrainingPlatform``)."""
    gpu_node_groups: Sequence[GpuNodeGroupConfig] = ()
    """The managed GPU pools whose nodes join with the startup taint (``GpuNodeGroupArgs.health_gate``). Default: none."""
    karpenter_pools: Sequence[KarpenterGpuNodePoolConfig] = ()
    """The Karpenter GPU pools whose nodes join with it (``GpuNodePoolArgs.health_gate``); a failing node's NodeClaim is deleted. Default: none."""
    tags: Tags = field(default_factory=dict)
    """Tags of the ECR repository (when the image is built). Default: none."""
    image_mirrors: Mapping[str, str] = field(default_factory=dict)
    """Source registry -> mirror prefix (`images.registryMirrors`) the check pod's images are pulled from; they travel in the gate's ConfigMap, where no transform rewrites them. Default: none."""
    image_digests: Mapping[str, str] = field(default_factory=dict)
    """Image reference -> digest (`images.digests`): a built image's Dockerfile base is built from its locked digest. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))


@documented_component(HealthGateArgs)
class HealthGate(pulumi.ComponentResource):
    """Namespace, ConfigMap, RBAC, admission policy, the checks' PriorityClass, the namespace's
    ResourceQuota and Deployment of the health gate, plus (without a prebuilt image) its ECR
    repository and image build."""

    image: pulumi.Output[str]
    """The image the gate and its EFA check run (``<repository>@sha256:...`` when built here)."""

    def __init__(self, name: str, args: Optional[HealthGateArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(HealthGateArgs, "HealthGate", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"HealthGate({name})")
        problems = validate_health_gate(args.config.model_copy(update={"enabled": True}), path=f"HealthGate({name}).config")
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:HealthGate", name, None, opts)
        ref, config = cluster_ref_of(args), args.config

        def in_cluster(*depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))

        self.image = (
            pulumi.Output.from_input(config.image)
            if config.image is not None
            else build_and_push(name, ref.name, tag_map(args.tags), parent=self, region=ref.region, directory=HEALTH_GATE_DIR,
                                repository_suffix=REPOSITORY_SUFFIX, base_digests=args.image_digests)
        )
        managed_names = [pool.name for pool in args.gpu_node_groups]
        karpenter_names = [pool.name for pool in args.karpenter_pools]
        mirrors = dict(args.image_mirrors)
        settings = self.image.apply(
            lambda image: gate_settings(image, config, args.gpu_node_groups, args.karpenter_pools, mirrors).to_json())

        namespace = k8s.core.v1.Namespace(f"{name}-namespace", **_resource_kwargs(namespace_manifest()), opts=in_cluster(*ref.ready))
        account = k8s.core.v1.ServiceAccount(f"{name}-service-account", **_resource_kwargs(service_account_manifest()),
                                             opts=in_cluster(namespace))
        settings_map = k8s.core.v1.ConfigMap(f"{name}-settings", **_resource_kwargs(config_map_manifest(settings)),
                                             opts=in_cluster(namespace))
        k8s.networking.v1.NetworkPolicy(f"{name}-network-policy", **_resource_kwargs(network_policy_manifest()),
                                        opts=in_cluster(namespace))
        cluster_role = k8s.rbac.v1.ClusterRole(f"{name}-cluster-role", **_resource_kwargs(cluster_role_manifest(bool(karpenter_names))),
                                               opts=in_cluster(*ref.ready))
        cluster_binding = k8s.rbac.v1.ClusterRoleBinding(f"{name}-cluster-role-binding", **_resource_kwargs(_binding("ClusterRoleBinding")),
                                                         opts=in_cluster(cluster_role, account))
        role = k8s.rbac.v1.Role(f"{name}-role", **_resource_kwargs(role_manifest()), opts=in_cluster(namespace))
        binding = k8s.rbac.v1.RoleBinding(f"{name}-role-binding", **_resource_kwargs(_binding("RoleBinding")), opts=in_cluster(role, account))
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-node-policy", **_resource_kwargs(node_policy_manifest(managed_names, karpenter_names)), opts=in_cluster(*ref.ready))
        policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-node-policy-binding", **_resource_kwargs(node_policy_binding_manifest()), opts=in_cluster(policy))
        # The policy before any pod holds a token that can patch nodes; RBAC and settings before the
        # first round.
        check_priority = k8s.scheduling.v1.PriorityClass(
            f"{name}-check-priority", **_resource_kwargs(check_priority_class_manifest()), opts=in_cluster(*ref.ready))
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-quota", **_resource_kwargs(resource_quota_manifest(config, args.gpu_node_groups, args.karpenter_pools)),
            opts=in_cluster(namespace))
        k8s.apps.v1.Deployment(
            f"{name}-deployment", **_resource_kwargs(deployment_manifest(self.image, ref.system_node_selector)),
            opts=in_cluster(namespace, account, settings_map, cluster_binding, binding, policy_binding, quota, check_priority),
        )
        self.register_outputs({"image": self.image})

