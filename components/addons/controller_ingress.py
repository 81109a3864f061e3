"""Who may connect to the Kueue, JobSet and Kubeflow Trainer controllers: one NetworkPolicy in each
controller's namespace, so a training pod cannot reach their webhook servers or metrics.

Each policy selects every pod of its namespace (the controller's) and admits, on TCP only:

- the webhook server (and Kueue's visibility API server, an aggregated API) from where the API
  server connects: on EKS the control plane's cross-account ENIs, which EKS places in the cluster's
  subnets (docs.aws.amazon.com/eks/latest/best-practices/subnets.html), so the ``ipBlock`` s are those
  subnets' CIDRs. Pods that get their addresses from the same subnets (the VPC CNI's default) are
  inside those blocks too: NetworkPolicy cannot tell the API server from them by address, only
  separate pod subnets (the VPC CNI's custom networking) can. No CIDR known: the webhook ports are
  open to every source, and the rest stays closed;
- the metrics endpoint from pods of the monitoring namespace (``monitoring.namespace``) only.

Everything else is refused, Trainer's status server (port 10443, for the alpha ``TrainJobStatus``
feature, off) included. The kubelet's probes come from the node itself, which NetworkPolicy never
blocks (Kubernetes docs, "Network Policies": a pod cannot block access from its node; the VPC CNI's
agent allows the node's address, aws/aws-network-policy-agent#65). Enforced only where the CNI
enforces NetworkPolicy: on EKS the VPC CNI's network policy agent, which the stack turns on
(``aws/eks_control_plane.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

NAME = "controller-ingress"
"""Each controller namespace's NetworkPolicy."""
WEBHOOK_PORT = 9443
METRICS_PORT = 8443
"""The container ports of the three controllers' webhook and metrics servers, as their charts render them
(Kueue 0.19.2, JobSet 0.12.0, Trainer 2.3.0: ``containerPort`` 9443 ``webhook``, 8443 ``metrics``)."""
KUEUE_VISIBILITY_PORT = 8082
"""Kueue's visibility API server (its APIService ``v1beta1/v1beta2.visibility.kueue.x-k8s.io``), which the API server proxies to."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server gives every namespace, its name (Kubernetes 1.22 and later)."""
LABELS = {"app.kubernetes.io/part-of": "eks-gpu-training"}


@dataclass(frozen=True)
class ControllerIngress:
    """Where a controller's webhook and metrics may be reached from."""

    api_server_cidrs: Optional[Sequence[pulumi.Input[str]]]
    """The blocks the API server connects from (the cluster's subnets); None: unknown, the webhook ports open to every source."""
    monitoring_namespace: str
    """The namespace whose pods may scrape the controller's metrics."""


def network_policy_manifest(namespace: str, ingress: ControllerIngress, webhook_ports: Sequence[int] = (WEBHOOK_PORT,)) -> dict[str, Any]:
    """The NetworkPolicy of a controller's namespace (``api_server_cidrs`` may hold Outputs, passed on as they are)."""
    webhooks: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": port} for port in webhook_ports]}
    if ingress.api_server_cidrs is not None:
        webhooks["from"] = [{"ipBlock": {"cidr": cidr}} for cidr in ingress.api_server_cidrs]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [
                webhooks,
                {"from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ingress.monitoring_namespace}}}],
                 "ports": [{"protocol": "TCP", "port": METRICS_PORT}]},
            ],
        },
    }


def network_policy(name: str, namespace: str, ingress: ControllerIngress, opts: pulumi.ResourceOptions,
                   webhook_ports: Sequence[int] = (WEBHOOK_PORT,)) -> pulumi.Resource:
    """The NetworkPolicy as a resource ``<name>-ingress``."""
    manifest = network_policy_manifest(namespace, ingress, webhook_ports)
    return k8s.networking.v1.NetworkPolicy(f"{name}-ingress", metadata=manifest["metadata"], spec=manifest["spec"], opts=opts)
