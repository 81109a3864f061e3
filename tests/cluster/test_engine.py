"""The real Pulumi engine deploys in-cluster components to a bare local cluster, and plans each
change of the change table's in-cluster rows (docs/operations.md) as the table says.

The Pulumi CLI and the Kubernetes provider are built from their Go modules (``eks-gpu-training-local
tools``); the engine plans, diffs and applies against the local API server (``engine.Engine``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from kubernetes import client

from eks_gpu_training.addons import topology_labeler
from eks_gpu_training.config import JOBSET_CHART_VERSIONS
from eks_gpu_training.addons.verifier_role import VERIFIER_ROLE_NAME, VerifierRole, VerifierRoleArgs
from eks_gpu_training.config.scheduling import PriorityClassConfig
from eks_gpu_training.config.team_settings import TeamConfig
from eks_gpu_training.local import build as builds
from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota
from eks_gpu_training.workloads.scheduling_policies import NamespacePolicy, SchedulingPolicies, SchedulingPoliciesArgs
from eks_gpu_training.workloads.team_access import TEAM_MEMBER_ROLE, TeamAccess, TeamAccessArgs
from eks_gpu_training.workloads.templates import TrainingJobSpec
from eks_gpu_training.workloads.training_job import TrainingJob, TrainingJobArgs

from tests.support.clusters import start
from tests.support.module_charts import JOBSET as JOBSET_CHART, module_source
from tests.support.engine import Engine, changed, exists
from tests.support.environment import wait_for

JOB = "kubernetes:batch/v1:Job"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET = f"kubernetes:{JOBSET_API}:JobSet"
JOBSET_CRD = "charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml"
PRIORITY_CLASS_TYPE = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
QUOTA = "kubernetes:core/v1:ResourceQuota"
NAMESPACE = "engine-training"
PRIORITY_CLASS = "engine-training"
APP = "engine-trainer"
UPGRADED = " (as a later library version words it)"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy engine-labeler-policy"


@dataclass(frozen=True)
class Settings:
    """What a test changes between two runs of the same program."""

    priority: int = 1000
    gpus: int = 16
    image: Optional[str] = "registry.local/trainer:1"
    """The training job's image; None leaves the job out of the program."""
    verifier_group: str = "engine-verifiers"
    """The group the verify command's read-only ClusterRole is bound to (``verify.group``)."""
    revision: int = 1
    """The training job's revision (``job.revision``): each is a Job of its own."""
    kind: str = "Job"
    """The training job's kind (``trainingApps[].kind``)."""
    labeler_policy_upgraded: bool = False
    """The topology labeler's admission policy as a later library version might write it (a changed
    validation message)."""
    team_members: tuple[str, ...] = ()
    """The Kubernetes groups the training namespace's team lists (``scheduling.teams[].members``)."""


def program(kubeconfig: Path, settings: Settings):
    def run() -> None:
        provider = k8s.Provider("local", kubeconfig=str(kubeconfig))
        on_cluster = pulumi.ResourceOptions(provider=provider)
        policies = SchedulingPolicies(
            "engine",
            SchedulingPoliciesArgs(
                priority_classes=[PriorityClassConfig(name=PRIORITY_CLASS, value=settings.priority)],
                namespaces=[NamespacePolicy(NAMESPACE, ResolvedQuota(gpus=settings.gpus, cpu="1000", memory="4Ti",
                                                                      persistent_volume_claims=4))],
            ),
            opts=on_cluster,
        )
        VerifierRole("engine-verify", VerifierRoleArgs(group=settings.verifier_group), opts=on_cluster)
        team = TeamConfig(name="engine", namespaces=[NAMESPACE], members=list(settings.team_members))
        TeamAccess("engine-team", TeamAccessArgs(teams=[team], namespaces=policies.namespaces), opts=on_cluster)
        policy = topology_labeler.node_policy_manifest()
        if settings.labeler_policy_upgraded:
            policy["spec"]["validations"][0]["message"] += UPGRADED
        labeler_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            "engine-labeler-policy", metadata=policy["metadata"], spec=policy["spec"], opts=on_cluster)
        binding = topology_labeler.node_policy_binding_manifest()
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            "engine-labeler-policy-binding", metadata=binding["metadata"], spec=binding["spec"],
            opts=pulumi.ResourceOptions(provider=provider, depends_on=[labeler_policy]))
        if settings.image is not None:
            job = TrainingJobSpec(name=APP, nodes=2, instance_types=("p5.48xlarge",), priority_class=PRIORITY_CLASS,
                                  namespace=NAMESPACE, image=settings.image, revision=settings.revision,
                                  kind=settings.kind)
            TrainingJob(APP, TrainingJobArgs(job=job),
                        opts=pulumi.ResourceOptions(provider=provider, depends_on=[policies]))

    return run


@pytest.fixture(scope="module")
def tools() -> Path:
    return builds.tools_dir(log=print)


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory):
    for running in start("dev", tmp_path_factory.mktemp("local-engine"), bare=True):
        # JobSet's CRD, from the module its controller is built from, so a training app's kind can
        # change to JobSet (the engine needs the kind served, not the controller).
        crd = yaml.safe_load((module_source(JOBSET_CHART, f"v{JOBSET_CHART_VERSIONS[0]}") / JOBSET_CRD).read_text())
        running.env.apply(crd)
        running.env.applier.wait_established([crd])
        yield running


@pytest.fixture(scope="module")
def engine(tools, bare_cluster, tmp_path_factory):
    engine = Engine(tools, tmp_path_factory.mktemp("engine-state"), lambda settings: program(bare_cluster.kubeconfig, settings))
    yield engine
    engine.destroy_after_tests()


# The tests below run in order on one stack: each starts from the state the previous one left.

def test_up_creates_the_in_cluster_objects_and_a_second_preview_is_empty(engine, bare_cluster):
    env = bare_cluster.env
    engine.up(Settings())
    scheduling = client.SchedulingV1Api(env.api)
    assert scheduling.read_priority_class(PRIORITY_CLASS).value == 1000
    assert env.core.read_namespaced_resource_quota("gpu-quota", NAMESPACE).spec.hard["requests.nvidia.com/gpu"] == "16"
    job = env.batch.read_namespaced_job(APP, NAMESPACE)
    assert job.spec.template.spec.containers[0].image == "registry.local/trainer:1"
    # expect_no_changes makes the preview itself fail on any change.
    assert changed(engine.plan(Settings(), expect_no_changes=True)) == {}


def test_a_job_image_change_neither_replaces_nor_deletes_the_job(engine, bare_cluster):
    plan = changed(engine.plan(Settings(image="registry.local/trainer:2")))
    assert f"{JOB} {APP}-job" not in plan, plan
    engine.up(Settings(image="registry.local/trainer:2"))
    job = bare_cluster.env.batch.read_namespaced_job(APP, NAMESPACE)
    assert job.spec.template.spec.containers[0].image == "registry.local/trainer:1"


def test_a_priority_class_value_change_replaces_the_class(engine, bare_cluster):
    # The plan is a delete-before-replace; the preview then fails, because its dry run of the
    # replacement's create meets the class that only `pulumi up` deletes first (docs/operations.md).
    plan, output = engine.failed_plan(Settings(priority=2000))
    assert {name: sorted(ops) for name, ops in changed(plan).items()} == {
        f"{PRIORITY_CLASS_TYPE} engine-{PRIORITY_CLASS}": ["create-replacement", "delete-replaced", "replace"]}, plan
    assert f'PriorityClass.scheduling.k8s.io "{PRIORITY_CLASS}" is invalid: value: Forbidden: may not be changed in an update' in output
    engine.up(Settings(priority=2000))
    scheduling = client.SchedulingV1Api(bare_cluster.env.api)
    assert scheduling.read_priority_class(PRIORITY_CLASS).value == 2000


def test_a_quota_change_updates_the_quota_in_place(engine, bare_cluster):
    plan = changed(engine.plan(Settings(priority=2000, gpus=32)))
    assert plan == {f"{QUOTA} engine-{NAMESPACE}-quota": ["update"]}, plan
    engine.up(Settings(priority=2000, gpus=32))
    quota = bare_cluster.env.core.read_namespaced_resource_quota("gpu-quota", NAMESPACE)
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "32"


def test_a_verifier_group_change_updates_the_binding_in_place(engine, bare_cluster):
    # A binding's roleRef is immutable, its subjects are not (kubernetes.io/docs/reference/
    # access-authn-authz/rbac/#clusterrolebinding-example): the role's name never changes, so a new
    # group is an update of the subjects, with no window in which nobody may read.
    settings = Settings(priority=2000, gpus=32, verifier_group="platform-oncall")
    plan = changed(engine.plan(settings))
    assert plan == {"kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding engine-verify-cluster-role-binding": ["update"]}, plan
    engine.up(settings)
    binding = client.RbacAuthorizationV1Api(bare_cluster.env.api).read_cluster_role_binding(VERIFIER_ROLE_NAME)
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", "platform-oncall")]


def test_a_member_group_added_or_removed_updates_the_teams_binding_in_place(engine, bare_cluster):
    # docs/operations.md, "a member added to or removed from a team": the RoleBinding's subjects
    # change in place (its roleRef, which is immutable, never does), and the running job is untouched.
    settings = Settings(priority=2000, gpus=32, verifier_group="platform-oncall")
    job_uid = bare_cluster.env.batch.read_namespaced_job(APP, NAMESPACE).metadata.uid
    rbac = client.RbacAuthorizationV1Api(bare_cluster.env.api)
    for members, groups in ((("ml-oncall",), ["eks-gpu-training-team-engine", "ml-oncall"]), ((), ["eks-gpu-training-team-engine"])):
        changed_settings = replace(settings, team_members=members)
        plan = changed(engine.plan(changed_settings))
        assert plan == {f"kubernetes:rbac.authorization.k8s.io/v1:RoleBinding engine-team-{NAMESPACE}": ["update"]}, plan
        engine.up(changed_settings)
        binding = rbac.read_namespaced_role_binding(TEAM_MEMBER_ROLE, NAMESPACE)
        assert [s.name for s in binding.subjects] == groups
    assert bare_cluster.env.batch.read_namespaced_job(APP, NAMESPACE).metadata.uid == job_uid


def test_a_labeler_policy_change_updates_the_policy_in_place(engine, bare_cluster):
    # ValidatingAdmissionPolicy specs are mutable (Kubernetes docs, Validating Admission Policy):
    # a library upgrade that rewrites the policy updates it, and its binding is left alone.
    settings = Settings(priority=2000, gpus=32, verifier_group="platform-oncall", labeler_policy_upgraded=True)
    plan = changed(engine.plan(settings))
    assert plan == {VAP: ["update"]}, plan
    engine.up(settings)
    policy = client.AdmissionregistrationV1Api(bare_cluster.env.api).read_validating_admission_policy(
        topology_labeler.NAME)
    assert policy.spec.validations[0].message.endswith(UPGRADED)


def test_a_new_revision_is_a_new_job_beside_the_previous_one_which_is_retained(engine, bare_cluster):
    env = bare_cluster.env
    settings = Settings(priority=2000, gpus=32, verifier_group="platform-oncall", labeler_policy_upgraded=True, revision=2)
    plan = changed(engine.plan(settings))
    assert plan[f"{JOB} {APP}-job-r2"] == ["create"], plan
    assert plan[f"{JOB} {APP}-job"] == ["delete"], plan
    engine.up(settings)
    # retainOnDelete: the previous revision's Job leaves the stack and keeps running.
    assert {job.metadata.name for job in env.batch.list_namespaced_job(NAMESPACE).items} == {APP, f"{APP}-r2"}


def test_a_kind_change_is_a_new_object_beside_the_previous_job_which_is_retained_with_its_service(engine, bare_cluster):
    env = bare_cluster.env
    service = env.core.read_namespaced_service(APP, NAMESPACE)
    settings = Settings(priority=2000, gpus=32, verifier_group="platform-oncall", labeler_policy_upgraded=True, revision=2,
                        kind="JobSet")
    plan = changed(engine.plan(settings))
    assert plan[f"{JOBSET} {APP}-jobset-r2"] == ["create"], plan
    assert plan[f"{JOB} {APP}-job-r2"] == ["delete"], plan
    assert not [key for key in plan if key.startswith("kubernetes:core/v1:Service")], plan
    engine.up(settings)
    # retainOnDelete: the Job leaves the stack and keeps running, and the Service its ranks resolve
    # through is the same object.
    assert env.batch.read_namespaced_job(f"{APP}-r2", NAMESPACE).metadata.name == f"{APP}-r2"
    assert env.get(JOBSET_API, "JobSet", f"{APP}-r2", NAMESPACE) is not None
    assert env.core.read_namespaced_service(APP, NAMESPACE).metadata.uid == service.metadata.uid


def test_removing_the_training_job_keeps_the_job_and_deletes_its_service_and_pdb(engine, bare_cluster):
    env = bare_cluster.env
    engine.up(Settings(priority=2000, gpus=32, image=None, verifier_group="platform-oncall", labeler_policy_upgraded=True,
                       revision=2, kind="JobSet"))
    assert env.batch.read_namespaced_job(f"{APP}-r2", NAMESPACE).metadata.name == f"{APP}-r2"
    assert env.get(JOBSET_API, "JobSet", f"{APP}-r2", NAMESPACE) is not None
    assert not exists(lambda: env.core.read_namespaced_service(APP, NAMESPACE))
    assert not exists(lambda: env.policy.read_namespaced_pod_disruption_budget(APP, NAMESPACE))


def test_destroy_removes_the_managed_objects(engine, bare_cluster):
    env = bare_cluster.env
    engine.destroy()
    scheduling = client.SchedulingV1Api(env.api)
    assert not exists(lambda: scheduling.read_priority_class(PRIORITY_CLASS))
    assert not exists(lambda: client.RbacAuthorizationV1Api(env.api).read_cluster_role(VERIFIER_ROLE_NAME))
    wait_for(lambda: not exists(lambda: env.core.read_namespace(NAMESPACE)), timeout=120,
             what=f"namespace {NAMESPACE} going")
