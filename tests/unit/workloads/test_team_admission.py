"""What a team's namespaces admit: Kueue holding every job there, the policy refusing GPU pods
outside a Job, and a quota refusing the classes a team may not use; the rules refusing a team's
classes that could not work. What the API server and Kueue do with them is judged in the cluster
tier (``tests/cluster/test_team_admission.py``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from eks_gpu_training import ConfigError, parse_platform_args
from eks_gpu_training.workloads.team_admission import (
    GPU_POD_POLICY,
    JOB_CLASS_POLICY,
    PRIORITY_QUOTA_NAME,
    gpu_pod_policy_binding_manifest,
    priority_quota,
    team_admission_namespaces,
)
from tests.support.builders import stack_without_teams
from tests.support.harness import run_main, stack_config

NAMESPACE = "eks-gpu-training:"
QUOTA = "kubernetes:core/v1:ResourceQuota"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
STACK_CLASSES = ["training-critical", "evaluation-normal", "data-prep-low"]


def raw(stack: str = "prod") -> dict[str, Any]:
    config = copy.deepcopy(stack_config(stack))
    values = {k[len(NAMESPACE):]: v for k, v in config.items() if k.startswith(NAMESPACE)}
    return {**values, "region": config["aws:region"]}


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return [str(p) for p in error.value.problems]


def _kueue_configuration(config: dict[str, Any]) -> dict[str, Any]:
    graph = run_main(config)
    assert graph.error is None, graph.error
    (kueue,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    return yaml.safe_load(kueue.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_with_teams_kueue_manages_every_job_of_the_team_namespaces_and_without_only_labelled_ones():
    with_teams = _kueue_configuration(stack_config("prod"))
    assert with_teams["manageJobsWithoutQueueName"] is True
    assert with_teams["managedJobsNamespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training", "research"]}]}
    assert _kueue_configuration(stack_without_teams("prod"))["manageJobsWithoutQueueName"] is False


def test_the_stack_binds_the_gpu_pod_policy_to_the_team_namespaces_and_gives_each_its_priority_quota():
    graph = run_main(stack_config("prod"))
    assert graph.error is None, graph.error
    (policy,) = [r for r in graph.of_type(POLICY) if r.inputs["metadata"]["name"] == GPU_POD_POLICY]
    assert policy.inputs["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["pods"]
    (binding,) = [r for r in graph.of_type(BINDING) if r.inputs["metadata"]["name"] == GPU_POD_POLICY]
    assert binding.inputs["spec"]["matchResources"] == {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training", "research"]}]}}
    assert graph.depends_on(binding, policy)
    (class_binding,) = [r for r in graph.of_type(BINDING) if r.inputs["metadata"]["name"] == JOB_CLASS_POLICY]
    assert class_binding.inputs["spec"]["paramRef"] == {"name": PRIORITY_QUOTA_NAME, "parameterNotFoundAction": "Allow"}
    assert class_binding.inputs["spec"]["matchResources"] == binding.inputs["spec"]["matchResources"]
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"] for r in graph.of_type(QUOTA)
              if r.inputs["metadata"]["name"] == PRIORITY_QUOTA_NAME}
    assert quotas == {
        "training": priority_quota("training", STACK_CLASSES)["spec"],
        "research": priority_quota("research", ["evaluation-normal", "data-prep-low"])["spec"],
    }
    assert quotas["research"] == {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "Exists"},
        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["evaluation-normal", "data-prep-low"]}]}}
    namespaces = {r.inputs["metadata"]["name"]: r for r in graph.of_type("kubernetes:core/v1:Namespace")}
    for quota in graph.of_type(QUOTA):
        if quota.inputs["metadata"]["name"] == PRIORITY_QUOTA_NAME:
            assert graph.depends_on(quota, namespaces[quota.inputs["metadata"]["namespace"]])


def test_without_teams_there_is_no_policy_and_no_priority_quota():
    graph = run_main(stack_without_teams("prod"))
    assert graph.error is None, graph.error
    assert not [r for r in graph.of_type(POLICY) + graph.of_type(BINDING) if r.inputs["metadata"]["name"] in (GPU_POD_POLICY, JOB_CLASS_POLICY)]
    assert not [r for r in graph.of_type(QUOTA) if r.inputs["metadata"]["name"] == PRIORITY_QUOTA_NAME]


def test_a_team_without_priority_classes_may_use_every_class_of_the_stack():
    values = raw("dev")
    for team in values["scheduling"]["teams"]:
        team.pop("priorityClasses", None)
    classes = {n.namespace: list(n.priority_classes) for n in team_admission_namespaces(parse_platform_args(values))}
    assert classes == {"training": STACK_CLASSES, "evaluation": STACK_CLASSES}


def test_a_team_allowed_no_class_refuses_every_pod_that_names_one():
    assert priority_quota("research", [])["spec"]["scopeSelector"] == {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}


def test_the_binding_names_the_namespaces_it_is_given():
    assert gpu_pod_policy_binding_manifest(["a", "b"])["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}


# --- refusals -------------------------------------------------------------------------------------


def test_refuses_a_teams_class_the_stack_does_not_make_and_one_listed_twice():
    values = raw()
    values["scheduling"]["teams"][1]["priorityClasses"] = ["system-node-critical", "data-prep-low", "data-prep-low"]
    values["scheduling"]["trainingApps"] = []
    assert problems(values) == [
        "scheduling.teams[1].priorityClasses[0]: 'system-node-critical' is not in scheduling.priorityClasses; "
        "allowed: training-critical, evaluation-normal, data-prep-low",
        "scheduling.teams[1].priorityClasses[2]: 'data-prep-low' is listed in scheduling.teams[1].priorityClasses[1] too",
    ]


def test_refuses_a_training_app_whose_class_its_team_may_not_use_named_or_by_default():
    values = raw()
    # research's finetune names evaluation-normal; rl-training (pretraining's) names training-critical.
    values["scheduling"]["teams"][1]["priorityClasses"] = ["data-prep-low"]
    values["scheduling"]["teams"][0]["priorityClasses"] = ["evaluation-normal"]
    del values["scheduling"]["trainingApps"][0]["priorityClass"]
    assert problems(values) == [
        "scheduling.trainingApps[0].priorityClass: 'training-critical' (unset: the stack's highest class) is not "
        "among team pretraining's classes, which its namespace 'training' refuses; allowed: evaluation-normal",
        "scheduling.trainingApps[1].priorityClass: 'evaluation-normal' is not among team research's "
        "classes, which its namespace 'research' refuses; allowed: data-prep-low",
    ]


@pytest.mark.parametrize("key", ["smokeTest", "preflight"])
def test_refuses_the_checks_at_pulumi_up_with_teams_since_kueue_would_hold_their_jobs(key):
    values = raw("dev")
    values[key] = {"enabled": True, **({"nccl": {"enabled": False}} if key == "preflight" else {})}
    assert (f"{key}.enabled: cannot run with scheduling.teams: every training namespace is a team's, where Kueue holds "
            "a Job that names no queue; run the checks before adding teams, or as Jobs submitted to a team's queue") in problems(values)


# --- verify's rows --------------------------------------------------------------------------------


def _snapshot(args, *, drop_binding: bool = False, research_quota: Any = None):
    from eks_gpu_training.verify import Snapshot
    from eks_gpu_training.workloads.team_admission import gpu_pod_policy_manifest, job_class_policy_binding_manifest, job_class_policy_manifest

    namespaces = [n.namespace for n in team_admission_namespaces(args)]
    quotas = [priority_quota(n.namespace, n.priority_classes) for n in team_admission_namespaces(args)]
    if research_quota is not None:
        quotas = [q for q in quotas if q["metadata"]["namespace"] != "research"] + research_quota
    bindings = [] if drop_binding else [gpu_pod_policy_binding_manifest(namespaces), job_class_policy_binding_manifest(namespaces)]
    return Snapshot(resource_quotas=quotas, admission_policies=[gpu_pod_policy_manifest(), job_class_policy_manifest()],
                    admission_policy_bindings=bindings)


def test_verify_shows_each_teams_queue_enforced_and_priorities_limited():
    from eks_gpu_training.verify.team_isolation import team_admission

    args = parse_platform_args(raw())
    rows = {r.item: r for r in team_admission(_snapshot(args), args)}
    assert {item: r.status for item, r in rows.items()} == {
        "team-queue/pretraining": "pass", "team-priorities/pretraining": "pass",
        "team-queue/research": "pass", "team-priorities/research": "pass"}
    assert rows["team-priorities/research"].detail == "pods, Jobs and JobSets in research may use evaluation-normal, data-prep-low only."
    broken = {r.item: r for r in team_admission(_snapshot(args, drop_binding=True, research_quota=[]), args)}
    assert broken["team-queue/research"].status == "fail"
    assert broken["team-queue/research"].detail.startswith(f"no ValidatingAdmissionPolicyBinding {GPU_POD_POLICY}. Fix: run `pulumi up`")
    assert broken["team-priorities/research"].detail.startswith(
        f"no ValidatingAdmissionPolicyBinding {JOB_CLASS_POLICY}; no ResourceQuota {PRIORITY_QUOTA_NAME} in research.")
    assert broken["team-priorities/pretraining"].detail.startswith(f"no ValidatingAdmissionPolicyBinding {JOB_CLASS_POLICY}.")
    # A quota allowing training-critical to research is not the stack's.
    wider = [priority_quota("research", STACK_CLASSES)]
    assert {r.item: r.status for r in team_admission(_snapshot(args), args)}["team-priorities/research"] == "pass"
    assert {r.item: r.status for r in team_admission(_snapshot(args, research_quota=wider), args)}["team-priorities/research"] == "fail"
