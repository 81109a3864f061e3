"""The topology labeler: the program in ``components/labeler`` and a least-privilege DaemonSet that
runs it on every GPU node (``labeler_image`` builds and pushes its image).

EKS's cloud-controller-manager sets the ``topology.k8s.aws/network-node-layer-N`` labels itself when
a node of a supported type initialises; the labeler fills in what a node still lacks (API down at
join time, older control planes, self-managed nodes, a fourth layer) and reports nodes whose type has
no topology. It never overwrites a label.

Every Kubernetes object is a plain dict from a pure function below; the component hands those very
dicts to pulumi-kubernetes, and the tests validate them against the Kubernetes schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from ..config.base import Tags, tag_map
from ..aws.eks_cluster import ClusterInput, cluster_field, cluster_ref_of
from ..config import ConfigError, TopologyLabelerConfig, validate_topology_labeler
from ..facts.gpu_nodes import gpu_daemon_tolerations, gpu_node_selector
from ..aws.labeler_image import build_and_push, ecr_repository_name
from ..aws.pod_identity import pod_identity_role
from ..facts.aws_names import PhysicalName
from . import labeler_admission
from ..labeler.settings import (
    ENV_HEARTBEAT_FILE,
    ENV_INTERVAL,
    ENV_NODE_NAME,
    HEARTBEAT_DIR,
    HEARTBEAT_FILE,
    MAX_HEARTBEAT_AGE_SECONDS,
)
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider

NAME = "topology-labeler"
"""Name of the namespace, ServiceAccount, ClusterRole(Binding) and DaemonSet."""
NAMESPACE = NAME
SERVICE_ACCOUNT = NAME
CONTAINER = "labeler"

RUN_AS_USER = 65532
"""The image's numeric non-root user (``USER 65532:65532`` in the Dockerfile)."""

PRIORITY_CLASS = "system-node-critical"
"""Built-in PriorityClass that keeps a per-node daemon scheduled and spares it from eviction."""

AWS_REGION_ENV = "AWS_REGION"
"""The region for any AWS SDK call that names none. The labeler names the region of each node's zone
itself (``labeler.topology.region_of_zone``), but nothing in the pod may fall back to instance
metadata, which pods cannot reach with the nodes' hop limit of 1 (aws/karpenter-provider-aws#8219)."""

LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "eks-gpu-training"}
SELECTOR = {"app.kubernetes.io/name": NAME}


# --- Kubernetes objects (pure) -----------------------------------------------------------------

def namespace_manifest() -> dict[str, Any]:
    """The labeler's namespace; Pod Security Admission enforces the ``restricted`` profile, which
    the DaemonSet meets."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": NAMESPACE,
            "labels": {
                **LABELS,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


def service_account_manifest() -> dict[str, Any]:
    """The identity the RBAC binding and the Pod Identity association name."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE, "labels": dict(LABELS)},
    }


def cluster_role_manifest() -> dict[str, Any]:
    """Nodes only, and only what the program calls: GET of its node and PATCH of its labels (no
    list or watch). RBAC cannot narrow this to one node or to some labels; the admission policy
    (``labeler_admission``) does."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NAME, "labels": dict(LABELS)},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
    }


def cluster_role_binding_manifest() -> dict[str, Any]:
    """Grants the ClusterRole to the labeler's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NAME, "labels": dict(LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
    }


def container_resources(config: TopologyLabelerConfig) -> dict[str, dict[str, str]]:
    """Requests and limits of the labeler container."""
    resources = config.resources
    return {
        "requests": {"cpu": resources.cpu_request, "memory": resources.memory_request},
        "limits": {"cpu": resources.cpu_limit, "memory": resources.memory_limit},
    }


def network_policy_manifest() -> dict[str, Any]:
    """No connection into the labeler's namespace: the labeler listens on no port (its liveness
    probe is a command), it only calls out to the API server and EC2."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "deny-ingress", "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def node_policy_manifest() -> dict[str, Any]:
    """The admission policy that holds the labeler to its own node's topology labels."""
    return labeler_admission.node_policy_manifest(NAME, NAMESPACE, SERVICE_ACCOUNT, LABELS)


def node_policy_binding_manifest() -> dict[str, Any]:
    """Puts the policy in force."""
    return labeler_admission.node_policy_binding_manifest(NAME, LABELS)


def daemonset_manifest(image: Any, config: TopologyLabelerConfig, region: str) -> dict[str, Any]:
    """One labeler pod per GPU node. ``image`` is the reference to run (a string, or the Output of
    the pushed image's digest reference); ``region`` is the cluster's, set as ``AWS_REGION`` (also the
    labeler's region for a node whose provider id names no zone)."""
    restricted = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": ENV_INTERVAL, "value": str(config.interval_seconds)},
            {"name": ENV_HEARTBEAT_FILE, "value": HEARTBEAT_FILE},
            {"name": AWS_REGION_ENV, "value": region},
        ],
        "resources": container_resources(config),
        "livenessProbe": {
            "exec": {
                "command": [
                    "python", "-m", "labeler.healthcheck",
                    "--file", HEARTBEAT_FILE, "--max-age", str(MAX_HEARTBEAT_AGE_SECONDS),
                ]
            },
            "initialDelaySeconds": 30,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
        "securityContext": restricted,
        "volumeMounts": [{"name": "run", "mountPath": HEARTBEAT_DIR}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            # The labeler is a helper, not on any data path: a quarter of the pool may restart at once,
            # so a rollout over hundreds of nodes does not hold `pulumi up` for an hour.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "automountServiceAccountToken": True,
                    "enableServiceLinks": False,
                    "priorityClassName": PRIORITY_CLASS,
                    "nodeSelector": {**gpu_node_selector(), "kubernetes.io/os": "linux"},
                    "tolerations": gpu_daemon_tolerations(),
                    "terminationGracePeriodSeconds": 10,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
                },
            },
        },
    }


def manifests(image: Any, config: TopologyLabelerConfig, region: str) -> list[dict[str, Any]]:
    """Every Kubernetes object of the labeler, in creation order."""
    return [
        namespace_manifest(),
        service_account_manifest(),
        network_policy_manifest(),
        cluster_role_manifest(),
        cluster_role_binding_manifest(),
        node_policy_manifest(),
        node_policy_binding_manifest(),
        daemonset_manifest(image, config, region),
    ]


def _resource_kwargs(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest as keyword arguments of its pulumi-kubernetes class: top-level keys in snake_case
    (``roleRef`` -> ``role_ref``); nested dicts are passed through with their Kubernetes names."""
    return {
        re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): value
        for key, value in manifest.items()
        if key not in ("apiVersion", "kind")
    }


# --- AWS side (pure) ---------------------------------------------------------------------------

def describe_topology_policy(region: str) -> str:
    """``ec2:DescribeInstanceTopology`` and nothing more. The action has no resource-level
    permissions, so ``Resource`` is ``*``; the condition keeps it to the cluster's region."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "ec2:DescribeInstanceTopology",
                    "Resource": "*",
                    "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
                }
            ],
        }
    )


# --- the component -----------------------------------------------------------------------------

@documented_args
@dataclass
class TopologyLabelerArgs:
    """Arguments of ``TopologyLabeler``."""

    cluster: ClusterInput
    """The cluster whose GPU nodes get labelled: a ``ClusterRef``, an ``EksCluster`` or a ``pulumi_eks.Cluster``."""
    config: TopologyLabelerConfig
    """Image, interval and resources (``enabled`` is read by ``GpuTrainingPlatform``, which creates
    this component only when it is true)."""
    tags: Tags = field(default_factory=dict)
    """Tags for every AWS resource (values, or the whole map, may be Outputs). Default: none."""
    image_digests: Mapping[str, str] = field(default_factory=dict)
    """Image reference -> digest (`images.digests`): a built image's Dockerfile base is built from its locked digest. Default: none."""

    def __post_init__(self) -> None:
        check_model_fields(self, cluster_field(self))

def labeler_role_resource_name(name: str) -> str:
    """Logical name of the labeler's Pod Identity role (auto-named)."""
    return f"{name}-role"


def labeler_policy_resource_name(name: str) -> str:
    """Logical name of the labeler role's inline policy (auto-named)."""
    return f"{name}-describe-topology"


def topology_labeler_physical_names(name: str, config: TopologyLabelerConfig, cluster_name: Optional[str]) -> list[PhysicalName]:
    """Every AWS name ``TopologyLabeler(name, ...)`` generates, from the functions it names them with
    (a ``cluster_name`` of None, an Output's, leaves out the repository named after it)."""
    names = [
        PhysicalName("aws:iam/role:Role", labeler_role_resource_name(name), autonamed=True),
        PhysicalName("aws:iam/rolePolicy:RolePolicy", labeler_policy_resource_name(name), autonamed=True),
    ]
    if config.image is None and cluster_name is not None:
        names.append(PhysicalName("aws:ecr/repository:Repository", ecr_repository_name(cluster_name), autonamed=False))
    return names


@documented_component(TopologyLabelerArgs)
class TopologyLabeler(pulumi.ComponentResource):
    """Namespace, RBAC, Pod Identity role and DaemonSet of the topology labeler, plus (without a
    prebuilt image) its ECR repository and image build."""

    image: pulumi.Output[str]
    """The image reference the DaemonSet runs (``<repository>@sha256:...`` when built here)."""
    role_arn: pulumi.Output[str]
    """The IAM role the labeler's pods get through EKS Pod Identity."""

    def __init__(self, name: str, args: Optional[TopologyLabelerArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TopologyLabelerArgs, "TopologyLabeler", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TopologyLabeler({name})")
        problems = validate_topology_labeler(args.config, path=f"TopologyLabeler({name})")
        if problems:
            raise ConfigError(problems)
        super().__init__("eks-gpu-training:index:TopologyLabeler", name, None, opts)
        ref, config, tags = cluster_ref_of(args), args.config, tag_map(args.tags)

        def in_cluster(*depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=list(depends_on))

        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", **_resource_kwargs(namespace_manifest()), opts=in_cluster(*ref.ready)
        )
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account", **_resource_kwargs(service_account_manifest()), opts=in_cluster(namespace)
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-network-policy", **_resource_kwargs(network_policy_manifest()), opts=in_cluster(namespace)
        )
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-cluster-role", **_resource_kwargs(cluster_role_manifest()), opts=in_cluster(*ref.ready)
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-cluster-role-binding",
            **_resource_kwargs(cluster_role_binding_manifest()),
            opts=in_cluster(cluster_role, service_account),
        )
        node_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-node-policy", **_resource_kwargs(node_policy_manifest()), opts=in_cluster(*ref.ready)
        )
        node_policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-node-policy-binding",
            **_resource_kwargs(node_policy_binding_manifest()),
            opts=in_cluster(node_policy),
        )

        identity = pod_identity_role(
            labeler_role_resource_name(name),
            ref,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            holder="Topology labeler",
            tags=tags,
            parent=self,
        )
        role = identity.role
        policy = aws.iam.RolePolicy(
            labeler_policy_resource_name(name),
            role=role.id,
            policy=describe_topology_policy(ref.region),
            opts=pulumi.ResourceOptions(parent=role),
        )
        association = identity.associate(f"{name}-pod-identity")

        self.image = (
            pulumi.Output.from_input(config.image)
            if config.image is not None
            else build_and_push(name, ref.name, tags, parent=self, region=ref.region, base_digests=args.image_digests)
        )

        # Pod Identity injects credentials when a pod is created, so the pods must not start before
        # the association exists; RBAC first too, or the first checks fail with 403; and the
        # admission policy before any pod holds a token that can patch nodes.
        k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            **_resource_kwargs(daemonset_manifest(self.image, config, ref.region)),
            opts=in_cluster(namespace, service_account, binding, node_policy_binding, association, policy),
        )

        self.role_arn = role.arn
        self.register_outputs({"image": self.image, "roleArn": self.role_arn})
