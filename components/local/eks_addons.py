"""The pods EKS itself runs on every cluster, which take room on the nodes the platform's
controllers need: CoreDNS, kube-proxy, the VPC CNI (aws-node) and the Pod Identity agent.

The local cluster runs them as EKS installs them (replicas, requests, tolerations, anti-affinity),
so the real scheduler places the platform beside them. Their containers never start (KWOK runs
none), so the images are named for what EKS supplies, not pulled.
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "kube-system"
COREDNS_REPLICAS = 2
COREDNS_REQUESTS = {"cpu": "100m", "memory": "70Mi"}
"""CoreDNS as the EKS add-on installs it: two replicas, each requesting 100m CPU and 70Mi memory,
spread over nodes by a preferred anti-affinity (EKS user guide, "Manage CoreDNS for DNS in Amazon EKS
clusters"; the add-on's Deployment, as coredns/deployment's kubernetes manifest it derives from)."""
KUBE_PROXY_REQUESTS = {"cpu": "100m"}
"""kube-proxy DaemonSet of the EKS add-on: 100m CPU on every node, tolerating every taint."""
AWS_NODE_REQUESTS = {"cpu": "25m"}
AWS_NODE_AGENT_REQUESTS = {"cpu": "25m"}
"""The VPC CNI DaemonSet's two containers (aws/eks-charts stable/aws-vpc-cni values.yaml:
``resources.requests.cpu: 25m`` for aws-node, ``nodeAgent.resources.requests.cpu: 25m``), on every
node, tolerating every taint."""
POD_IDENTITY_AGENT_REQUESTS: dict[str, str] = {}
"""The Pod Identity agent DaemonSet (aws/eks-pod-identity-agent chart) sets no requests."""


def _container(name: str, requests: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": f"eks-add-on/{name}"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    return container


def _daemonset(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    labels = {"k8s-app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": containers,
                },
            },
        },
    }


def eks_system_objects(*, pod_identity_agent: bool = True) -> list[dict[str, Any]]:
    labels = {"k8s-app": "kube-dns"}
    coredns = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": COREDNS_REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-cluster-critical",
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {"labelSelector": {"matchLabels": labels},
                                            "topologyKey": "kubernetes.io/hostname"},
                    }]}},
                    "containers": [_container("coredns", COREDNS_REQUESTS)],
                },
            },
        },
    }
    objects = [
        coredns,
        _daemonset("kube-proxy", [_container("kube-proxy", KUBE_PROXY_REQUESTS)]),
        _daemonset("aws-node", [_container("aws-node", AWS_NODE_REQUESTS),
                                _container("aws-eks-nodeagent", AWS_NODE_AGENT_REQUESTS)]),
    ]
    if pod_identity_agent:
        objects.append(_daemonset("eks-pod-identity-agent", [_container("eks-pod-identity-agent",
                                                                        POD_IDENTITY_AGENT_REQUESTS)]))
    return objects
