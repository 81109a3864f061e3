"""The pods EKS itself runs on every cluster, which take room on the nodes the platform's
controllers need: CoreDNS, kube-proxy, the VPC CNI (aws-node) and the Pod Identity agent.

The local cluster runs them as EKS installs them (replicas, requests, tolerations, anti-affinity),
so the real scheduler places the platform beside them. Their containers never start (KWOK runs
none), so the images are named for what EKS supplies, not pulled.
"""

from __future__ import annotations

from typing import Any

from ..addons.system_footprints import COREDNS, EKS_NODE_DAEMONSETS, PodFootprint

NAMESPACE = "kube-system"
"""Requests and replicas are the figures the system-capacity check uses
(``addons.system_footprints``), each with its source there."""


def _requests(footprint: PodFootprint) -> dict[str, str]:
    requests = {}
    if footprint.cpu_millicores:
        requests["cpu"] = f"{footprint.cpu_millicores}m"
    if footprint.memory_mib:
        requests["memory"] = f"{footprint.memory_mib}Mi"
    return requests


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


def eks_system_objects() -> list[dict[str, Any]]:
    labels = {"k8s-app": "kube-dns"}
    coredns = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": COREDNS.replicas,
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
                    "containers": [_container("coredns", _requests(COREDNS))],
                },
            },
        },
    }
    return [coredns] + [_daemonset(footprint.name, [_container(footprint.name, _requests(footprint))])
                        for footprint in EKS_NODE_DAEMONSETS]
