"""What the Kueue tests read of a stack's graph: its quotas, node sources, training Jobs and
configuration problems, and Kueue's chart beside a program for the CRD check."""

from __future__ import annotations

from typing import Any

import pytest

from eks_gpu_training.addons.kueue import KUEUE_CHART
from eks_gpu_training.config import ConfigError
import pulumi_kubernetes as k8s

from eks_gpu_training.platform.loading import parse_platform_args
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME
from tests.support.harness import Graph
from tests.support.builders import KARPENTER_NODE_POOL, MANAGED_NODE_GROUP, raw_settings, stack_without_teams


NAMESPACE = "eks-gpu-training:"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
LAYER_3 = "topology.k8s.aws/network-node-layer-3"


def namespace_quotas(graph):
    """The training namespaces' ResourceQuotas (the health gate's namespace has one of its own)."""
    return [r for r in graph.of_type("kubernetes:core/v1:ResourceQuota") if r.inputs["metadata"]["name"] == QUOTA_NAME]


def raw(stack: str = "prod") -> dict[str, Any]:
    """A stack's configuration without teams (its namespace ``training`` with a ClusterQueue of its
    own, its first app), as ``parse_platform_args`` takes it: the rules here are a namespace's and
    an app's; teams' are tests/unit/workloads/test_teams.py's."""
    return raw_settings(stack_without_teams(stack))


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return [str(p) for p in error.value.problems]


def node_sources(graph: Graph) -> dict[str, dict[str, str]]:
    """Every node group and Karpenter NodePool of the graph (system nodes too), with the labels its nodes carry."""
    sources = {}
    for group in graph.of_type(MANAGED_NODE_GROUP):
        sources[group.name] = dict(group.inputs.get("labels") or {})
    for pool in graph.of_type(KARPENTER_NODE_POOL):
        template_labels = pool.inputs["spec"]["template"]["metadata"].get("labels") or {}
        # Karpenter labels each node with its NodePool's name.
        sources[pool.name] = {**template_labels, "karpenter.sh/nodepool": pool.inputs["metadata"]["name"]}
    return sources


def jobs(graph: Graph) -> dict[str, dict[str, Any]]:
    """The training Jobs (not the platform's own, such as the FSx team directories Job in kube-system)."""
    return {r.inputs["metadata"]["name"]: r.inputs for r in graph.of_type("kubernetes:batch/v1:Job")
            if r.inputs["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "training"}


def node_affinity_labels(job: dict[str, Any]) -> dict[str, list[str]]:
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return {e["key"]: e["values"] for e in terms[0]["matchExpressions"]}


KUEUE_RELEASE = {"release": "kueue", "chart": KUEUE_CHART, "version": "0.19.2", "namespace": "kueue-system", "values": {}}


def with_kueue_chart(program):
    """``program`` beside Kueue's chart, whose templates hold its CRDs, which the check reads from
    the render as the API server gets them from the chart."""
    def both():
        k8s.helm.v3.Release("kueue", name="kueue", chart=KUEUE_CHART, version="0.19.2", namespace="kueue-system")
        program()

    return both
