"""Every Kubernetes object a stack creates passes the Kubernetes OpenAPI schema of its cluster's
version in strict mode (unknown fields are errors), and so does every pod template, as a Pod."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.support.builders import without_teams
from tests.support.harness import Graph, run_main, stack_config

NAMESPACE = "eks-gpu-training:"
BUILT_IN_KINDS = {"PriorityClass", "Namespace", "ResourceQuota", "PodDisruptionBudget", "Job", "Service"}


def with_ints(value: Any) -> Any:
    """Inputs as the program wrote them: the engine hands numbers back as floats."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: with_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [with_ints(v) for v in value]
    return value


def kubernetes_objects(graph: Graph) -> list[dict[str, Any]]:
    return [with_ints(r.inputs) for r in graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") in BUILT_IN_KINDS]


def pods_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pods = []
    for obj in objects:
        if obj["kind"] == "Job":
            template = obj["spec"]["template"]
            metadata = {"name": f"{obj['metadata']['name']}-0", "namespace": obj["metadata"]["namespace"], **template["metadata"]}
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
    return pods


def assert_strictly_valid(graph: Graph, version: str) -> list[str]:
    objects = kubernetes_objects(graph)
    for obj in objects + pods_of(objects):
        kubernetes_validate.validate(obj, version, strict=True)
    return sorted({o["kind"] for o in objects})


def test_every_object_of_every_stack_is_valid_at_its_kubernetes_version(stack_graph):
    stack, graph = stack_graph
    version = stack_config(stack)[f"{NAMESPACE}cluster"]["kubernetesVersion"]
    assert assert_strictly_valid(graph, version) == ["Job", "Namespace", "PodDisruptionBudget", "PriorityClass", "ResourceQuota", "Service"]


@pytest.mark.parametrize("version", ["1.32", "1.36"])
def test_host_network_apps_the_smoke_test_and_pdb_only_apps_are_valid_too(version):
    config = without_teams(stack_config("prod"))  # teams refuse the smoke test (Kueue would hold its Job)
    config[f"{NAMESPACE}cluster"]["kubernetesVersion"] = version
    scheduling = config[f"{NAMESPACE}scheduling"]
    scheduling["namespaces"][0]["podSecurity"] = "privileged"
    scheduling["trainingApps"][0].update(hostNetwork=True, shmSizeLimit="128Gi")
    scheduling["trainingApps"].append({"name": "eval-sweep", "nodes": 1, "pool": "gpu-training", "priorityClass": "evaluation-normal", "efa": False})
    config[f"{NAMESPACE}smokeTest"] = {"enabled": True}
    graph = run_main(config)
    assert graph.error is None, graph.error
    assert assert_strictly_valid(graph, version) == ["Job", "Namespace", "PodDisruptionBudget", "PriorityClass", "ResourceQuota", "Service"]
    # the PDBs of prod's rl-training (its TrainingJob's) and of the PDB-only eval-sweep
    assert sorted(o["metadata"]["name"] for o in kubernetes_objects(graph) if o["kind"] == "PodDisruptionBudget") == [
        "eval-sweep", "rl-training"]
