"""A stack's part in a MultiKueue fleet, run end to end under the mock engine: a worker stack makes
the manager's identity and exports its kubeconfig; a manager stack reads each worker's by stack
reference (or makes the identity on a cluster it names), and its ClusterQueues dispatch. A manager
naming a worker stack of this project that does not mirror its queues is refused before anything."""

from __future__ import annotations

import copy

import pulumi
import pytest
import yaml

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform.multikueue_fleet import endpoint_and_authority, fleet_problems
from eks_gpu_training.platform.stack_files import locate_stack
from tests.support.harness import PROJECT_ROOT, PlausibleMocks, run_main, stack_config

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
EAST_KUBECONFIG = "apiVersion: v1\nkind: Config\n# east's, as its stack exports it\n"


class FleetMocks(PlausibleMocks):
    """A worker stack's outputs behind a stack reference, and the token a token controller writes."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, outputs = super().new_resource(args)
        if args.typ == "pulumi:pulumi:StackReference":
            outputs = {**outputs, "outputs": {"multiKueueKubeconfig": EAST_KUBECONFIG}, "secretOutputNames": ["multiKueueKubeconfig"]}
        if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == "kubernetes.io/service-account-token":
            outputs = {**outputs, "data": {"token": "dG9rZW4="}}
        return resource_id, outputs


def dev_with(multi_kueue: dict) -> dict:
    config = copy.deepcopy(stack_config("dev"))
    config["eks-gpu-training:multiKueue"] = multi_kueue
    return config


@pytest.fixture(scope="module")
def worker_graph():
    graph = run_main(dev_with({"worker": True}), stack="dev", mocks=FleetMocks())
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="module")
def manager_graph():
    graph = run_main(dev_with({"manager": True, "workers": [
        {"name": "east", "stack": "acme/eks-gpu-training/east"},
        {"name": "west", "clusterName": "gpu-training-west", "region": "us-east-1"},
    ]}), stack="dev", mocks=FleetMocks())
    assert graph.error is None, repr(graph.error)
    return graph


def test_a_worker_stack_exports_the_kubeconfig_of_the_managers_identity_as_a_secret(worker_graph):
    assert "multiKueueKubeconfig" in worker_graph.secret_exports
    kubeconfig = yaml.safe_load(worker_graph.exports["multiKueueKubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"].endswith(".eks.amazonaws.com")
    assert kubeconfig["users"][0]["user"] == {"token": "token"}
    bindings = worker_graph.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
    writers = sorted(b.inputs["metadata"]["namespace"] for b in bindings if b.inputs["roleRef"]["name"].endswith("multikueue-writer"))
    assert writers == ["evaluation", "training"]


def test_a_worker_stacks_queues_run_no_admission_check(worker_graph):
    assert [q.inputs["spec"].get("admissionChecksStrategy") for q in worker_graph.of_type(f"{KUEUE}ClusterQueue")] == [None, None]


def test_a_manager_reads_a_worker_by_stack_reference_and_makes_one_on_a_named_cluster(manager_graph):
    [reference] = manager_graph.of_type("pulumi:pulumi:StackReference")
    assert reference.inputs["name"] == "acme/eks-gpu-training/east"
    secrets = {s.inputs["metadata"]["name"]: s for s in manager_graph.of_type("kubernetes:core/v1:Secret")}
    assert secrets["multikueue-east"].inputs["stringData"]["value"] == {"kubeconfig": EAST_KUBECONFIG}
    [remote] = manager_graph.of_type("eks-gpu-training:index:MultiKueueWorker")
    provider = next(p for p in manager_graph.of_type("pulumi:providers:kubernetes") if p.name.startswith("gpu-training-worker-west"))
    assert all(r.provider.rsplit("::", 1)[0] == provider.urn for r in manager_graph.subtree(remote).resources if r.custom)


def test_a_managers_cluster_queues_run_multikueues_check(manager_graph):
    assert sorted(c.inputs["metadata"]["name"] for c in manager_graph.of_type(f"{KUEUE}MultiKueueCluster")) == ["east", "west"]
    assert manager_graph.one(f"{KUEUE}MultiKueueConfig").inputs["spec"] == {"clusters": ["east", "west"]}
    queues = manager_graph.of_type(f"{KUEUE}ClusterQueue")
    assert [q.inputs["spec"]["admissionChecksStrategy"] for q in queues] == [{"admissionChecks": [{"name": "multikueue"}]}] * 2
    check = manager_graph.one(f"{KUEUE}AdmissionCheck")
    assert all(manager_graph.depends_on(q, check) for q in queues)


def test_refuses_a_manager_with_no_worker_before_registering_anything():
    graph = run_main(dev_with({"manager": True}), stack="dev")
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["multiKueue.workers"]
    assert graph.resources == []


def test_refuses_a_worker_stack_of_this_project_that_is_no_worker_and_does_not_mirror_the_queues():
    graph = run_main(dev_with({"manager": True, "workers": [{"name": "p", "stack": "prod"}]}), stack="dev")
    assert isinstance(graph.error, ConfigError)
    found = [(p.path, p.message) for p in graph.error.problems]
    assert ("multiKueue.workers[0].stack", "stack prod is no worker: set multiKueue.worker: true there, or it exports no "
            "kubeconfig for this manager") in found
    assert ("multiKueue.workers[0]", "worker p queues namespace training in ClusterQueue 'pretraining', the manager in "
            "'research': give the namespace the same team on both") in found
    assert graph.resources == []


def test_a_worker_from_the_managers_own_stack_mirrors_it():
    dev = locate_stack("dev", PROJECT_ROOT).platform_args()
    manager = dev.model_copy(update={"multi_kueue": dev.multi_kueue.model_validate(
        {"manager": True, "workers": [{"name": "east", "stack": "dev-east"}]})})
    worker = dev.model_copy(update={"multi_kueue": dev.multi_kueue.model_validate({"worker": True})})
    assert fleet_problems(manager, {0: worker}) == []


def test_the_worker_is_reached_at_its_kubeconfigs_server_with_its_ca():
    kubeconfig = '{"clusters": [{"cluster": {"server": "https://a.example", "certificate-authority-data": "Q0E="}}]}'
    assert endpoint_and_authority(kubeconfig, "https://b.example") == ("https://a.example", "Q0E=")
    assert endpoint_and_authority({"clusters": [{"name": "x"}]}, "https://b.example") == ("https://b.example", None)
    with pytest.raises(ConfigError):
        endpoint_and_authority("/home/me/.kube/config", None)


def kueue_configuration(graph) -> dict:
    release = next(r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("name") == "kueue")
    return yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_the_managers_kueue_gives_a_lost_worker_the_stacks_timeout_and_a_workers_kueue_has_none(manager_graph, worker_graph):
    assert kueue_configuration(manager_graph)["multiKueue"] == {"workerLostTimeout": "15m"}
    assert "multiKueue" not in kueue_configuration(worker_graph)
