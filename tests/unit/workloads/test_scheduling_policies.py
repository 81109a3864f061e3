"""Priority classes, training namespaces and quotas, and the rules that tie quotas to the fleet."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS, ConfigError, PriorityClassConfig
from eks_gpu_training.platform import parse_platform_args
from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota, fleet_gpu_capacity, resolve_quota
from eks_gpu_training.workloads.scheduling_policies import (
    QUOTA_NAME,
    NamespacePolicy,
    SchedulingPolicies,
    SchedulingPoliciesArgs,
    priority_class,
    resource_quota,
    training_job_spec,
    training_namespace,
)
from tests.support.builders import raw_settings, stack_without_teams
from tests.support.harness import PROJECT_ROOT, run_main, run_program, stack_config, stack_file

NAMESPACE = "eks-gpu-training:"

SCHEDULING = "eks-gpu-training:index:SchedulingPolicies"
"""The component whose priority classes and namespace quotas these tests read (the health gate has its own)."""


def raw(stack: str = "prod") -> dict[str, Any]:
    """A stack's configuration as ``parse_platform_args`` takes it, without teams: its namespace
    ``training`` with a quota and a ClusterQueue of its own, and its first training app (the one
    these tests change). Teams' quotas are tests/unit/workloads/test_teams.py's."""
    return raw_settings(stack_without_teams(stack))


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_platform_args(values)
    return [str(p) for p in error.value.problems]


def test_both_stacks_parse():
    for stack in ("dev", "prod"):
        parse_platform_args(raw_settings(stack_config(stack)))
        parse_platform_args(raw(stack))


# --- quota arithmetic ---------------------------------------------------------------------------


def test_fleet_gpu_capacity_of_the_seed_is_two_p5_nodes():
    values = raw()
    values["karpenter"] = {"enabled": False}
    assert fleet_gpu_capacity(parse_platform_args(values)) == 16


def test_fleet_gpu_capacity_adds_the_karpenter_pools_gpu_limits():
    # prod: p5-training's 2 × 8 plus the Karpenter pool's gpuLimit of 16
    assert fleet_gpu_capacity(parse_platform_args(raw())) == 32
    values = raw()
    values["karpenter"]["gpuNodePools"][0]["gpuLimit"] = 24
    assert fleet_gpu_capacity(parse_platform_args(values)) == 40


def test_fleet_gpu_capacity_counts_a_mixed_pool_with_its_largest_type():
    values = raw()
    values["gpuNodeGroups"].append(
        {"name": "l40s", "instanceTypes": ["g6e.12xlarge", "g6e.48xlarge"], "maxSize": 3, "placementGroup": {"mode": "none"}, "efa": "disabled"}
    )
    values["scheduling"]["trainingApps"][0]["pool"] = "p5-training"
    # 2 × 8 (p5.48xlarge) + 3 × 8 (g6e.48xlarge, the larger of the pool's types) + Karpenter's 16
    assert fleet_gpu_capacity(parse_platform_args(values)) == 56


def test_default_quota_is_the_fleet_capacity(prod_graph_without_teams):
    # A namespace of no team without quota.gpus (prod before teams): its quota is the whole fleet.
    (quota,) = [r for r in prod_graph_without_teams.resources if r.inputs.get("kind") == "ResourceQuota" and r.inputs["metadata"]["name"] == QUOTA_NAME]
    assert quota.inputs["metadata"] == {"name": "gpu-quota", "namespace": "training", "labels": {"app.kubernetes.io/part-of": "eks-gpu-training"}}
    # p5-training's 2 nodes and the 2 that Karpenter's 16-GPU limit allows, each a p5.48xlarge
    assert quota.inputs["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "32",
        "requests.cpu": "768",
        "requests.memory": "8Ti",
        # the default 5 for the namespace's users, plus the stack's FSx claim
        "persistentvolumeclaims": "6",
    }


def test_dev_quota_is_three_l40s_nodes(dev_graph_without_teams):
    # dev-gpu's one g6e.xlarge and the two that Karpenter's 2-GPU limit allows
    (quota,) = [r for r in dev_graph_without_teams.resources if r.inputs.get("kind") == "ResourceQuota" and r.inputs["metadata"]["name"] == QUOTA_NAME]
    assert quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == "3"
    assert quota.inputs["spec"]["hard"]["requests.cpu"] == "12"
    assert quota.inputs["spec"]["hard"]["requests.memory"] == "96Gi"


def test_each_dev_team_namespace_may_reach_all_three_l40s_nodes(dev_graph):
    # A team namespace's quota is its team's reach, its own GPUs plus what the other team lends
    # (workloads/teams.py). research: dev-gpu 1 of its own, gpu-training 1 of its own + evaluation's 1.
    # evaluation: gpu-training 1 of its own + research's 1, and research's 1 on dev-gpu. Each GPU a
    # g6e.xlarge's (4 vCPUs, 32 GiB).
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in dev_graph.resources
              if r.inputs.get("kind") == "ResourceQuota" and r.inputs["metadata"]["name"] == QUOTA_NAME}
    expected = {"requests.nvidia.com/gpu": "3", "requests.cpu": "12", "requests.memory": "96Gi", "persistentvolumeclaims": "5"}
    assert quotas == {"training": expected, "evaluation": expected}


def test_each_prod_team_namespace_may_reach_the_whole_fleet(prod_graph):
    # pretraining (training) and research each hold 8 GPUs of p5-training and 8 of gpu-training and
    # lend all of them: each reaches 16 + 16 = 32 GPUs, with 24 vCPUs and 256 GiB per p5.48xlarge
    # GPU, so its namespace's quota is the fleet's, as the one namespace's was before teams.
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in prod_graph.resources
              if r.inputs.get("kind") == "ResourceQuota" and r.inputs["metadata"]["name"] == QUOTA_NAME}
    fleet = {"requests.nvidia.com/gpu": "32", "requests.cpu": "768", "requests.memory": "8Ti"}
    # training's own 5 claims (research takes the default, 5), plus the stack's FSx claim in each
    assert quotas == {"training": {**fleet, "persistentvolumeclaims": "6"}, "research": {**fleet, "persistentvolumeclaims": "6"}}


def test_explicit_quota_amounts_are_kept():
    args = parse_platform_args(raw())
    quota = args.scheduling.namespaces[0].quota.model_copy(update={"gpus": 8, "cpu": "200", "memory": "2Ti"})
    # persistentvolumeclaims: the 5 set, plus prod's FSx claim
    assert resolve_quota(quota, args) == ResolvedQuota(gpus=8, cpu="200", memory="2Ti", persistent_volume_claims=6)


def test_rejects_a_gpu_quota_above_the_fleet_naming_both_keys():
    values = raw()
    values["scheduling"]["namespaces"][0]["quota"]["gpus"] = 48
    assert problems(values) == [
        "scheduling.namespaces[0].quota.gpus: 48 exceeds the 32 GPUs the fleet can provide "
        "(gpuNodeGroups[0].maxSize 2 × 8 GPUs (p5.48xlarge) = 16; karpenter.gpuNodePools[0].gpuLimit = 16); "
        "raise the pool limits or lower the quota"
    ]


def test_rejects_a_gpu_quota_below_one_node():
    values = raw()
    values["scheduling"]["namespaces"][0]["quota"]["gpus"] = 4
    assert problems(values)[0] == (
        "scheduling.namespaces[0].quota.gpus: 4 is below one node's GPUs (8): no whole-node training pod could ever be admitted"
    )


def test_rejects_a_quota_too_small_for_a_declared_app_naming_both_keys():
    values = raw()
    # Without Kueue: with it, a quota below the fleet's is refused on its own (tests/unit/workloads/test_kueue_queues.py).
    values["kueue"]["enabled"] = False
    values["scheduling"]["namespaces"][0]["quota"].update(gpus=8, cpu="100")
    assert problems(values) == [
        "scheduling.trainingApps[0].nodes: the app needs 2 × 8 GPUs but scheduling.namespaces[0].quota.gpus is 8: its pods could never all be admitted",
        "scheduling.trainingApps[0].nodes: the app needs 2 × 189 CPU but scheduling.namespaces[0].quota.cpu is 100: its pods could never all be admitted",
    ]


def test_a_quota_of_one_node_is_accepted_without_multi_node_apps():
    values = raw()
    values["kueue"]["enabled"] = False
    values["scheduling"]["namespaces"][0]["quota"]["gpus"] = 8
    values["scheduling"]["trainingApps"] = []
    assert parse_platform_args(values).scheduling.namespaces[0].quota.gpus == 8


# --- priority classes ---------------------------------------------------------------------------


def test_default_priority_classes_are_the_seeds_and_none_is_the_global_default(prod_graph):
    classes = [r.inputs for r in prod_graph.subtree(prod_graph.one(SCHEDULING)).resources if r.inputs.get("kind") == "PriorityClass"]
    assert sorted(((c["metadata"]["name"], c["value"], c["globalDefault"]) for c in classes), key=lambda c: -c[1]) == [
        ("training-critical", 1_000_000, False),
        ("evaluation-normal", 500_000, False),
        ("data-prep-low", 100_000, False),
    ]
    assert all(c["description"] for c in classes)


def test_a_new_priority_class_value_replaces_the_class_deleting_it_first(prod_graph):
    # The value is immutable and the Kubernetes provider would plan an update the API server refuses
    # (tests/cluster/test_engine.py shows both with the real engine).
    classes = [r for r in prod_graph.subtree(prod_graph.one(SCHEDULING)).resources if r.inputs.get("kind") == "PriorityClass"]
    assert classes
    assert all((c.replace_on_changes, c.delete_before_replace) == (["value"], True) for c in classes)


def test_priority_classes_are_configurable():
    values = raw()
    values["scheduling"]["priorityClasses"] = [
        {"name": "training-critical", "value": 2000, "description": "training"},
        {"name": "batch", "value": 10, "globalDefault": True, "preemptionPolicy": "Never"},
    ]
    classes = parse_platform_args(values).scheduling.priority_classes
    assert priority_class(classes[1]) == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch", "labels": {"app.kubernetes.io/part-of": "eks-gpu-training"}},
        "value": 10,
        "globalDefault": True,
        "description": "",
        "preemptionPolicy": "Never",
    }


def test_rejects_priority_values_above_one_billion():
    values = raw()
    values["scheduling"]["priorityClasses"] = [{"name": "urgent", "value": 2_000_000_000}]
    assert problems(values) == ["scheduling.priorityClasses[0].value: Input should be less than or equal to 1000000000"]


def seed_classes() -> list[dict[str, Any]]:
    return [{"name": "training-critical", "value": 1_000_000}, {"name": "evaluation-normal", "value": 500_000}, {"name": "data-prep-low", "value": 100_000}]


def test_rejects_the_reserved_system_prefix():
    values = raw()
    values["scheduling"]["priorityClasses"] = [*seed_classes(), {"name": "system-urgent", "value": 7}]
    assert problems(values) == [
        "scheduling.priorityClasses[3].name: 'system-urgent': the 'system-' prefix is reserved for Kubernetes' own classes"
    ]


def test_rejects_duplicate_priority_class_names_and_values():
    values = raw()
    values["scheduling"]["priorityClasses"] = [
        *seed_classes(),
        {"name": "training-critical", "value": 7},
        {"name": "eval-copy", "value": 500_000},
    ]
    assert problems(values) == [
        "scheduling.priorityClasses[3].name: 'training-critical' is used by scheduling.priorityClasses[0] too",
        "scheduling.priorityClasses[4].value: 500000 is the value of scheduling.priorityClasses[1] too; values must be unique",
    ]


def test_rejects_two_global_defaults():
    values = raw()
    values["scheduling"]["priorityClasses"] = [
        {"name": "a", "value": 2, "globalDefault": True},
        {"name": "b", "value": 1, "globalDefault": True},
    ]
    values["scheduling"]["trainingApps"][0]["priorityClass"] = "a"
    assert problems(values) == [
        "scheduling.priorityClasses[1].globalDefault: only one class may be the global default (scheduling.priorityClasses[0] is)"
    ]


# --- namespaces ---------------------------------------------------------------------------------


def test_namespaces_enforce_a_pod_security_standard():
    assert training_namespace("training", "baseline")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    # restricted cannot be enforced on root training images, but every pod that fails it is warned and audited.
    labels = training_namespace("training", "baseline")["metadata"]["labels"]
    assert (labels["pod-security.kubernetes.io/warn"], labels["pod-security.kubernetes.io/audit"]) == ("restricted", "restricted")


def test_rejects_duplicate_and_kubernetes_namespaces():
    values = raw()
    values["scheduling"]["namespaces"] += [{"name": "training"}, {"name": "kube-system"}]
    assert problems(values) == [
        "scheduling.namespaces[1].name: 'training' is listed twice",
        "scheduling.namespaces[2].name: 'kube-system' belongs to Kubernetes; choose another namespace",
    ]


# --- training apps ------------------------------------------------------------------------------


def app(values: dict[str, Any]) -> dict[str, Any]:
    return values["scheduling"]["trainingApps"][0]


def test_rejects_host_networking_in_a_baseline_namespace_naming_both_keys():
    values = raw()
    app(values)["hostNetwork"] = True
    assert problems(values) == [
        "scheduling.trainingApps[0].hostNetwork: needs scheduling.namespaces[0].podSecurity 'privileged' "
        "(it is 'baseline', which refuses host networking)"
    ]
    values["scheduling"]["namespaces"][0]["podSecurity"] = "privileged"
    parse_platform_args(values)


def test_rejects_more_nodes_than_the_fleet_can_have_naming_the_pool_keys():
    values = raw()
    values["kueue"]["enabled"] = False  # with Kueue, an app counts only its own pool (tests/unit/workloads/test_training_spec_topology.py)
    app(values).update(nodes=5, efa=False)
    assert problems(values)[0] == (
        "scheduling.trainingApps[0].nodes: 5 pods, one per node, need more nodes of p5.48xlarge than the fleet can have "
        "(gpuNodeGroups[0].maxSize 2 × 8 GPUs (p5.48xlarge): 2 nodes; karpenter.gpuNodePools[0].gpuLimit: 2 nodes)"
    )


def test_efa_apps_count_only_managed_nodes_since_karpenter_cannot_provision_hugepages():
    values = raw()
    app(values)["nodes"] = 3  # 2 managed + 2 Karpenter p5 nodes would do, but EFA pods need hugepages
    assert problems(values)[0] == (
        "scheduling.trainingApps[0].nodes: 3 pods, one per node, need more nodes of p5.48xlarge than the fleet can have "
        "(gpuNodeGroups[0].maxSize 2 × 8 GPUs (p5.48xlarge): 2 nodes)"
    )


def test_refuses_an_efa_app_on_a_karpenter_pool():
    values = raw()
    app(values)["pool"] = "gpu-training"
    (problem,) = [p for p in problems(values) if p.startswith("scheduling.trainingApps[0].pool")]
    assert problem.startswith("scheduling.trainingApps[0].pool: 'gpu-training' is a Karpenter pool; EFA training pods request hugepages-2Mi")


def test_rejects_references_to_unknown_pools_classes_and_namespaces():
    values = raw()
    app(values).update(pool="h100", priorityClass="urgent", namespace="research")
    assert problems(values) == [
        "scheduling.trainingApps[0].namespace: 'research' is not in scheduling.namespaces; allowed: training",
        "scheduling.trainingApps[0].pool: 'h100' is not the name of a GPU pool; allowed: p5-training, gpu-training",
        "scheduling.trainingApps[0].priorityClass: 'urgent' is not in scheduling.priorityClasses; allowed: training-critical, evaluation-normal, data-prep-low",
    ]


def test_rejects_a_pool_name_used_by_both_kinds_of_pool():
    values = raw()
    values["karpenter"]["gpuNodePools"][0]["name"] = "p5-training"
    assert problems(values) == [
        "scheduling.trainingApps[0].pool: 'p5-training' names gpuNodeGroups[0] and karpenter.gpuNodePools[0]; rename one of them"
    ]


def test_an_app_may_take_its_defaults_from_a_karpenter_pool(dev_graph):
    # dev's rl-training and eval-sweep name the Karpenter pool gpu-training and no instance types.
    jobs = {r.inputs["metadata"]["name"]: r for r in dev_graph.resources if r.inputs.get("kind") == "Job"}
    assert sorted(jobs) == ["eval-sweep", "rl-training"]
    for job in jobs.values():
        expressions = job.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        assert {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6e.xlarge"]} in expressions


def test_requires_a_pool_when_there_are_several():
    values = raw()
    values["gpuNodeGroups"].append({"name": "l40s", "instanceTypes": ["g6e.48xlarge"], "placementGroup": {"mode": "none"}, "efa": "disabled"})
    app(values).pop("pool")
    assert problems(values) == ["scheduling.trainingApps[0].pool: is required: the stack has 3 GPU pools (p5-training, l40s, gpu-training)"]


def test_rejects_instance_types_and_efa_the_pool_does_not_have():
    values = raw()
    values["gpuNodeGroups"][0]["efa"] = "disabled"
    app(values).update(instanceTypes=["p4de.24xlarge"], efa=True)
    assert problems(values) == [
        "scheduling.trainingApps[0].instanceTypes[0]: 'p4de.24xlarge' is not among gpuNodeGroups[0].instanceTypes (p5.48xlarge)",
        "scheduling.trainingApps[0].efa: is true but gpuNodeGroups[0].efa leaves the pool's nodes without EFA interfaces",
    ]


def test_an_app_narrowing_a_mixed_pool_requests_the_efa_interfaces_its_nodes_have():
    values = raw()
    values["gpuNodeGroups"][0]["instanceTypes"] = ["p5.48xlarge", "p4de.24xlarge"]
    app(values)["instanceTypes"] = ["p5.48xlarge"]
    app(values)["topology"] = "none"  # Kueue's topology search would pick among both types' nodes
    args = parse_platform_args(values)
    # The pool's launch template lays out 4 interfaces (p4de's), so a p5 node of this pool has 4, not 32.
    assert training_job_spec(args.scheduling.training_apps[0], args).efa_devices == 4


def test_reports_job_rules_under_the_app_key():
    values = raw()
    app(values)["gpusPerNode"] = 9
    assert problems(values) == ["scheduling.trainingApps[0].gpusPerNode: 9 exceeds the GPUs of p5.48xlarge (8)"]


def test_rejects_duplicate_app_names():
    values = raw()
    values["scheduling"]["trainingApps"].append(copy.deepcopy(app(values)))
    assert problems(values)[0] == "scheduling.trainingApps[1].name: 'rl-training' is used by scheduling.trainingApps[0] too"


def test_the_default_priority_class_is_the_highest():
    values = raw()
    app(values).pop("priorityClass")
    graph = run_main({f"{NAMESPACE}{k}": v for k, v in values.items() if k != "region"} | {"aws:region": "us-west-2"})
    (job,) = [r for r in graph.resources if r.inputs.get("kind") == "Job"]
    assert job.inputs["spec"]["template"]["spec"]["priorityClassName"] == "training-critical"


def test_an_app_the_stack_does_not_run_gets_its_pdb_from_the_scheduling_policies():
    config = stack_config("dev")
    config[f"{NAMESPACE}scheduling"] = {"trainingApps": [{"name": "notebook-finetune", "nodes": 1, "pool": "dev-gpu"}]}
    graph = run_main(config)
    assert graph.error is None, graph.error
    (pdb,) = [r for r in graph.resources if r.inputs.get("kind") == "PodDisruptionBudget"]
    assert pdb.name == "gpu-training-scheduling-notebook-finetune-pdb"
    assert pdb.inputs["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in pdb.inputs["spec"]
    assert pdb.inputs["spec"]["selector"] == {"matchLabels": {"app": "notebook-finetune"}}
    assert [r for r in graph.resources if r.inputs.get("kind") == "Job"] == []


def test_an_app_the_stack_runs_has_exactly_one_pdb_from_its_training_job(prod_graph):
    pdbs = [r for r in prod_graph.resources if r.inputs.get("kind") == "PodDisruptionBudget"]
    assert sorted(r.name for r in pdbs) == ["gpu-training-training-finetune-pdb", "gpu-training-training-rl-training-pdb"]
    (pdb,) = [r for r in pdbs if r.name == "gpu-training-training-rl-training-pdb"]
    assert pdb.inputs["spec"]["minAvailable"] == 2
    assert pdb.inputs["spec"]["selector"] == {"matchLabels": {"app": "rl-training-multi"}}


# --- wiring -------------------------------------------------------------------------------------


def test_every_kubernetes_object_uses_the_clusters_provider(stack_graph):
    _, graph = stack_graph
    provider = graph.one("pulumi:providers:kubernetes")
    objects = [r for r in graph.resources if r.type.startswith("kubernetes:")]
    assert objects
    assert {r.provider.rsplit("::", 1)[0] for r in objects} == {provider.urn}


def test_training_jobs_wait_for_the_scheduling_policy(prod_graph):
    # Children register only once their parent has, and the parent waits for its dependencies. A
    # TrainJob's component waits only for what its runtime needs (its namespace and Trainer), and
    # the TrainJob itself, whose pods name the class, for the whole policy (TrainingJobArgs.job_after).
    training_jobs = prod_graph.of_type("eks-gpu-training:index:TrainingJob")
    made_pods = {job.name: [r for r in prod_graph.children(job) if r.inputs.get("kind") in ("Job", "JobSet", "TrainJob")]
                 for job in training_jobs}
    assert {name: [r.inputs["kind"] for r in objects] for name, objects in made_pods.items()} == {
        "gpu-training-training-rl-training": ["Job"], "gpu-training-training-finetune": ["TrainJob"],
    }
    scheduling = prod_graph.one("eks-gpu-training:index:SchedulingPolicies")
    policy = [r for r in prod_graph.children(scheduling) if r.inputs.get("kind") in ("PriorityClass", "Namespace")]
    # the seed's three classes and prod's two namespaces
    assert sorted((r.inputs["kind"], r.inputs["metadata"]["name"]) for r in policy) == [
        ("Namespace", "research"), ("Namespace", "training"),
        ("PriorityClass", "data-prep-low"), ("PriorityClass", "evaluation-normal"), ("PriorityClass", "training-critical"),
    ]
    assert all(prod_graph.depends_on(job, p) or prod_graph.depends_on(made, p)
               for job in training_jobs for made in made_pods[job.name] for p in policy)


def test_invalid_scheduling_config_creates_nothing():
    config = stack_config("prod")
    config[f"{NAMESPACE}scheduling"]["namespaces"][0]["quota"]["gpus"] = 64
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert "scheduling.namespaces[0].quota.gpus" in str(graph.error)
    assert "gpuNodeGroups[0].maxSize" in str(graph.error)
    assert graph.resources == []


def test_scheduling_policies_component_refuses_duplicate_priority_values():
    classes = [PriorityClassConfig(name="a", value=1), PriorityClassConfig(name="b", value=1)]
    graph = run_program(lambda: SchedulingPolicies("policy", SchedulingPoliciesArgs(priority_classes=classes)))
    assert isinstance(graph.error, ConfigError)
    assert "SchedulingPolicies(policy).priorityClasses[1].value" in str(graph.error)
    assert graph.resources == []


# --- smoke test ---------------------------------------------------------------------------------


def test_smoke_test_is_off_in_both_stacks(stack_graph):
    stack, graph = stack_graph
    assert graph.of_type("eks-gpu-training:index:GpuSmokeTest") == [], stack


def test_prod_smoke_test_checks_both_p5_nodes_after_the_node_group_exists():
    config = stack_without_teams("prod")  # teams refuse the smoke test (Kueue would hold its Job)
    config[f"{NAMESPACE}smokeTest"] = {"enabled": True}
    graph = run_main(config)
    assert graph.error is None, graph.error
    (job,) = [r for r in graph.resources if r.inputs.get("kind") == "Job" and r.inputs["metadata"]["name"].startswith("gpu-smoke-test")]
    assert job.inputs["spec"]["completions"] == 2
    assert job.inputs["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    smoke = graph.one("eks-gpu-training:index:GpuSmokeTest")
    assert job.parent == smoke.urn
    assert graph.depends_on(smoke, graph.one("aws:eks/nodeGroup:NodeGroup", "gpu-training-p5-training-node-group"))
    # Its Jobs are created in a training namespace, through Kueue's webhook, once that answers.
    assert graph.depends_on(smoke, graph.one("kubernetes:helm.sh/v3:Release", "gpu-training-kueue-release"))


def test_rejects_a_smoke_test_with_no_node_to_check():
    values = raw("dev")
    values["gpuNodeGroups"][0].update(minSize=0, desiredSize=0)
    values["smokeTest"] = {"enabled": True}
    assert problems(values) == ["smokeTest.enabled: no GPU pool starts with nodes (every initial size is 0), so there is nothing to check"]


def test_rejects_a_smoke_test_in_an_unknown_namespace():
    values = raw()
    values["smokeTest"] = {"enabled": True, "namespace": "default"}
    assert problems(values) == ["smokeTest.namespace: 'default' is not in scheduling.namespaces; allowed: training"]


# --- strict schema ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_policy_object_passes_strict_schema_validation(version):
    args = parse_platform_args(raw())
    quota = resolve_quota(args.scheduling.namespaces[0].quota, args)
    for obj in (
        *(priority_class(c) for c in args.scheduling.priority_classes),
        training_namespace("training", "privileged"),
        resource_quota("training", quota),
    ):
        kubernetes_validate.validate(obj, version, strict=True)


def test_namespace_policy_defaults_to_baseline():
    assert NamespacePolicy("training", ResolvedQuota(8, "1", "1Gi", 1)).pod_security == "baseline"


def test_stack_files_live_where_the_harness_reads_them():
    assert stack_file("prod", PROJECT_ROOT).is_file()
