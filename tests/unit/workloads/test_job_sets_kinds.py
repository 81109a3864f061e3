"""A training app runs as a Job, a JobSet or a TrainJob, and every kind keeps the app's placement
rules: the pod template is the same, only what wraps it changes (mock engine registrations and the
plain templates)."""

from __future__ import annotations

import pytest

from eks_gpu_training import TrainingJob, TrainingJobArgs
from eks_gpu_training.addons.kueue import integrations
from eks_gpu_training.workloads.job_sets import ANCESTOR_LABEL, train_job, training_jobset, training_runtime
from eks_gpu_training.workloads.templates import QUEUE_NAME_LABEL, training_job, training_pod_template
from tests.support.harness import run_main, run_program, stack_config
from tests.support.builders import p5_job

SCHEDULING = "eks-gpu-training:scheduling"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
TRAINJOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE_PATCH = "kubernetes:core/v1:NamespacePatch"


def queued_job(**changes):
    return p5_job(queue_name="gpu-queue", topology_mode="required",
                  topology_level="topology.k8s.aws/network-node-layer-3", **changes)


def _without_generated(pod: dict) -> dict:
    """The pod template less what each kind fills in itself: the container's name and torchrun's
    environment (Trainer's for a TrainJob), and the subdomain (the JobSet's Service)."""
    spec = dict(pod["spec"])
    spec.pop("subdomain", None)
    (container,) = spec["containers"]
    container = {k: v for k, v in container.items() if k not in ("name", "env")}
    return {"metadata": pod["metadata"], "spec": {**spec, "containers": [container]}}


def _replicated_pod(body: dict) -> dict:
    (replicated,) = body["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]


@pytest.mark.parametrize("kind", ["JobSet", "TrainJob"])
def test_every_kind_carries_the_jobs_pod_template_with_its_placement_rules(kind):
    job_pod = training_job(queued_job())["spec"]["template"]
    spec = queued_job(kind=kind)
    body = training_jobset(spec) if kind == "JobSet" else training_runtime(spec)["spec"]["template"]
    pod = _replicated_pod(body)
    # GPU toleration, one pod per node, PriorityClass, ServiceAccount, EFA and shm, the topology request.
    assert _without_generated(pod) == _without_generated(job_pod)
    assert pod["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}


def test_a_jobset_restarts_the_whole_group_when_a_rank_fails_and_is_queued_suspended():
    jobset = training_jobset(queued_job(kind="JobSet", max_restarts=2))
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "Recreate"}
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"][QUEUE_NAME_LABEL] == "gpu-queue"
    (replicated,) = jobset["spec"]["replicatedJobs"]
    job = replicated["template"]["spec"]
    assert (replicated["replicas"], job["completionMode"], job["completions"], job["parallelism"]) == (1, "Indexed", 2, 2)


def test_a_jobsets_ranks_rendezvous_through_the_service_the_jobset_makes():
    spec = queued_job(kind="JobSet", revision=2)
    jobset = training_jobset(spec)
    # JobSet names pods <jobset>-<replicated job>-<job index>-<pod index> under a Service named after it.
    assert spec.master_address == "rl-training-r2-node-0-0.rl-training-r2"
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    env = {e["name"]: e.get("value") for e in _replicated_pod(jobset)["spec"]["containers"][0]["env"]}
    assert env["PET_MASTER_ADDR"] == spec.master_address
    assert "subdomain" not in _replicated_pod(jobset)["spec"]


def test_a_trainjob_leaves_torchruns_environment_to_trainer_and_names_its_own_runtime():
    spec = queued_job(kind="TrainJob")
    runtime, job = training_runtime(spec), train_job(spec)
    pod = _replicated_pod(runtime["spec"]["template"])
    (container,) = pod["spec"]["containers"]
    # Trainer's torch plugin fills in PET_* in the `node` container of the `node` Job only.
    assert container["name"] == "node"
    assert [e["name"] for e in container["env"]] == ["FI_PROVIDER", "CHECKPOINT_DIR"]
    assert runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] == "node"
    assert runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]["labels"][ANCESTOR_LABEL] == "trainer"
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 2, "torch": {}}
    assert job["spec"]["trainer"] == {"numNodes": 2, "numProcPerNode": 8}
    assert job["spec"]["runtimeRef"] == {"name": runtime["metadata"]["name"], "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"}
    assert (job["spec"]["suspend"], job["metadata"]["labels"][QUEUE_NAME_LABEL]) == (True, "gpu-queue")


def test_the_job_kind_keeps_its_pod_template_unchanged():
    pod = training_pod_template(p5_job())
    assert pod["spec"]["subdomain"] == "rl-training"
    assert pod["spec"]["containers"][0]["name"] == "trainer"


@pytest.mark.parametrize(("kind", "types"), [("JobSet", [JOBSET]), ("TrainJob", [RUNTIME, TRAINJOB])])
def test_a_group_kind_is_retained_and_its_spec_left_alone_like_a_job(kind, types):
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=p5_job(), kind=kind)))
    assert graph.error is None, graph.error
    for type_ in types:
        (registration,) = graph.of_type(type_)
        assert registration.retain_on_delete is True
        assert registration.ignore_changes == ["spec", 'metadata.labels["kueue.x-k8s.io/queue-name"]']
    # The app's Service, which a JobSet of revision 1 (named as the app) uses as its own.
    (service,) = graph.of_type("kubernetes:core/v1:Service")
    assert service.name == "rl-rendezvous"
    assert len(graph.of_type("kubernetes:policy/v1:PodDisruptionBudget")) == 1


def test_a_kind_change_is_a_new_resource_beside_the_retained_old_one():
    names = {}
    for kind in ("Job", "JobSet", "TrainJob"):
        graph = run_program(lambda kind=kind: TrainingJob("rl", TrainingJobArgs(job=p5_job(revision=2), kind=kind)))
        names[kind] = sorted(r.name for r in graph.resources if r.type.startswith("kubernetes:") and "pdb" not in r.name
                             and "rendezvous" not in r.name)
    assert names == {"Job": ["rl-job-r2"], "JobSet": ["rl-jobset-r2"], "TrainJob": ["rl-trainjob-r2", "rl-trainjob-r2-runtime"]}


def test_an_unknown_kind_is_refused_with_its_key():
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=p5_job(), kind="MPIJob")))
    assert "TrainingJob(rl).kind" in str(graph.error)


def _stack_with_kind(kind: str, **job):
    config = stack_config("dev")
    app = config[SCHEDULING]["trainingApps"][0]
    # The stack's first app alone, of that kind: the others' kinds would install their controllers.
    config[SCHEDULING]["trainingApps"] = [{**app, "kind": kind, "job": {**app["job"], **job}}]
    return config


@pytest.mark.parametrize(("kind", "releases"), [("Job", []), ("JobSet", ["jobset"]), ("TrainJob", ["jobset", "kubeflow-trainer"])])
def test_the_stack_installs_the_controllers_its_kinds_need_and_kueue_manages_them(kind, releases):
    graph = run_main(_stack_with_kind(kind))
    assert graph.error is None, graph.error
    names = {r.inputs["name"]: r for r in graph.of_type(RELEASE)}
    assert sorted(set(names) & {"jobset", "kubeflow-trainer"}) == releases
    kueue_config = names["kueue"].inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    for framework in integrations(kind != "Job", kind == "TrainJob"):
        assert framework in kueue_config
    if kind == "TrainJob":
        values = names["kubeflow-trainer"].inputs["values"]
        # One JobSet controller serves both: Trainer's chart does not install its own.
        assert values["jobset"] == {"install": False}


def test_controllers_run_on_system_nodes_with_two_replicas_behind_a_budget():
    graph = run_main(_stack_with_kind("TrainJob"))
    names = {r.inputs["name"]: r for r in graph.of_type(RELEASE)}
    jobset = names["jobset"].inputs["values"]["controller"]
    trainer = names["kubeflow-trainer"].inputs["values"]["manager"]
    for controller in (jobset, trainer):
        assert controller["replicas"] == 2
        assert controller["nodeSelector"]["role"] == "system"
        assert all(t.get("key") != "nvidia.com/gpu" for t in controller["tolerations"])
    assert jobset["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}


def test_max_restarts_on_a_job_is_refused_with_its_key():
    graph = run_main(_stack_with_kind("Job", maxRestarts=2))
    assert "scheduling.trainingApps[0].job.maxRestarts" in str(graph.error)


def test_a_kind_needs_its_controller():
    config = _stack_with_kind("TrainJob")
    config["eks-gpu-training:trainer"] = {"enabled": False}
    graph = run_main(config)
    assert "scheduling.trainingApps[0].kind" in str(graph.error)
    assert "trainer.enabled" in str(graph.error)


def test_the_controllers_stay_installed_when_the_last_app_of_their_kind_leaves_the_stack():
    """Retained like the jobs: a retained TrainJob still needs Trainer, and uninstalling it would
    delete its CRDs and every TrainJob with them."""
    graph = run_main(_stack_with_kind("TrainJob"))
    releases = [r for r in graph.of_type(RELEASE) if r.inputs["name"] in ("jobset", "kubeflow-trainer")]
    namespaces = [r for r in graph.of_type(NAMESPACE_PATCH)
                  if r.inputs["metadata"]["name"] in ("jobset-system", "kubeflow-system")]
    assert len(releases) == len(namespaces) == 2
    assert all(r.retain_on_delete for r in releases + namespaces)
    assert {r.inputs["namespace"] for r in releases} == {"jobset-system", "kubeflow-system"}


def test_a_kind_added_back_takes_over_its_retained_namespace_instead_of_creating_it():
    """The namespace outlives a removal (retained; `helm uninstall` leaves it), so it is applied
    server-side, which takes an existing one over, not created, which the API server refuses with
    AlreadyExists; no plain Namespace of the controllers is left to create."""
    graph = run_main(_stack_with_kind("TrainJob"))
    created = [r for r in graph.of_type("kubernetes:core/v1:Namespace")
               if r.inputs["metadata"]["name"] in ("jobset-system", "kubeflow-system")]
    assert created == []
    patches = {r.inputs["metadata"]["name"]: r for r in graph.of_type(NAMESPACE_PATCH)}
    assert sorted(patches) == ["jobset-system", "kubeflow-system"]
    assert all(p.retain_on_delete and p.inputs["kind"] == "Namespace" for p in patches.values())


def test_the_controllers_namespaces_enforce_the_restricted_pod_security_standard():
    graph = run_main(_stack_with_kind("TrainJob"))
    namespaces = [r for r in graph.of_type(NAMESPACE_PATCH)
                  if r.inputs["metadata"]["name"] in ("jobset-system", "kubeflow-system")]
    assert [r.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for r in namespaces] == ["restricted"] * 2
