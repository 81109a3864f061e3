"""examples/fleet-manager, a MultiKueue manager of one's own program, run with its stack file under the
mock engine. Its stack references answer with the outputs of the README's two worker stacks, each
run under the mock engine first (the test's own answer, as the engine hands a referenced stack's
outputs to a stack reference); the manager makes every object MultiKueue needs and mirrors the
workers' queues, which nobody else checks for a worker of another project."""

from __future__ import annotations

import pytest
import yaml

from eks_gpu_training.platform.stack_files import locate_stack
from tests.support.fleet_stacks import WORKERS, run_fleet_workers, write_fleet_project
from tests.support.harness import PROJECT_ROOT, PlausibleMocks, run_main

EXAMPLE = PROJECT_ROOT / "examples" / "fleet-manager"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The README's workers, run, and the example run reading them: (workers by stack, manager)."""
    project = tmp_path_factory.mktemp("fleet")
    write_fleet_project(project)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        workers = run_fleet_workers(project)
    # The example names the README's stacks as another project does: organization/project/stack.
    answers = {f"acme/eks-gpu-training/{stack}": graph.stack_outputs() for stack, graph in workers.items()}
    located = locate_stack("fleet", EXAMPLE)
    manager = run_main(located.settings(), stack="fleet", project_root=EXAMPLE, project=located.namespace(),
                       mocks=PlausibleMocks(stacks=answers))
    assert manager.error is None, repr(manager.error)
    assert manager.output_text() == []
    return workers, manager


def test_the_example_reads_each_worker_by_stack_reference_into_its_kubeconfig_secret(fleet):
    workers, manager = fleet
    assert sorted(r.inputs["name"] for r in manager.of_type("pulumi:pulumi:StackReference")) == [
        "acme/eks-gpu-training/fleet-east", "acme/eks-gpu-training/fleet-west"]
    secrets = {s.inputs["metadata"]["name"]: s for s in manager.of_type("kubernetes:core/v1:Secret")}
    for name, stack in WORKERS.items():
        secret = secrets[f"multikueue-{name}"]
        assert secret.inputs["metadata"]["namespace"] == "kueue-system"
        kubeconfig = secret.inputs["stringData"]["value"]["kubeconfig"]
        assert kubeconfig == workers[stack].exports["multiKueueKubeconfig"]
        assert yaml.safe_load(kubeconfig)["users"][0]["user"] == {"token": f"token-of-{stack}"}


def test_the_example_makes_every_object_multikueue_needs_on_the_manager(fleet):
    _, manager = fleet
    clusters = manager.of_type(f"{KUEUE}MultiKueueCluster")
    assert {c.inputs["metadata"]["name"]: c.inputs["spec"]["clusterSource"]["kubeConfig"]["location"] for c in clusters} == {
        "west": "multikueue-west", "east": "multikueue-east"}
    assert manager.one(f"{KUEUE}MultiKueueConfig").inputs["spec"] == {"clusters": ["west", "east"]}
    check = manager.one(f"{KUEUE}AdmissionCheck")
    assert check.inputs["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    queues = manager.of_type(f"{KUEUE}ClusterQueue")
    assert sorted(q.inputs["metadata"]["name"] for q in queues) == ["evaluation", "research"]
    assert all(q.inputs["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]} for q in queues)
    assert all(manager.depends_on(q, check) for q in queues)
    assert manager.exports["admissionCheck"] == "multikueue"
    # A manager of its own program creates nothing in AWS: its cluster was made elsewhere.
    assert not [r for r in manager.resources if r.type.startswith(("aws:", "eks:"))]


def local_queues(graph) -> set[tuple[str, str, str]]:
    return {(q.inputs["metadata"]["namespace"], q.inputs["metadata"]["name"], q.inputs["spec"]["clusterQueue"])
            for q in graph.of_type(f"{KUEUE}LocalQueue")}


def test_the_example_mirrors_the_workers_namespaces_local_queues_and_teams(fleet):
    workers, manager = fleet
    assert local_queues(manager)
    for graph in workers.values():
        assert local_queues(manager) <= local_queues(graph)
