"""Kueue's ClusterQueues and LocalQueues (``workloads/kueue_queues.py``): their quotas never admit more
than a namespace's ResourceQuota allows, with or without teams, and their preemption."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from eks_gpu_training.facts.quantity import parse_quantity
import pulumi_kubernetes as k8s

from eks_gpu_training.offline.check import check_render
from eks_gpu_training.platform.loading import parse_platform_args
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE, cluster_queue
from eks_gpu_training.workloads.scheduling_policies import QUOTA_NAME
from tests.support.harness import Graph, research_cluster, run_main, run_program, stack_config, two_az_network
from tests.support.builders import kubernetes_objects, stack_without_teams
from tests.support.kueue_stacks import NAMESPACE, namespace_quotas, raw, jobs, with_kueue_chart


def test_cluster_queue_quotas_equal_the_namespace_resource_quota(prod_graph_without_teams):
    # A namespace of no team has a ClusterQueue of its own, named after it (with teams, each team's
    # reach is its namespaces' quota: test_a_team_can_never_be_admitted_more_than_its_namespaces_resource_quota).
    quotas = [q for q in kubernetes_objects(prod_graph_without_teams, "ResourceQuota") if q.inputs["metadata"]["name"] == QUOTA_NAME]
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in kubernetes_objects(prod_graph_without_teams, "ClusterQueue")}
    assert [q.inputs["metadata"]["namespace"] for q in quotas] == list(queues) == ["training"]
    for quota in quotas:
        hard = quota.inputs["spec"]["hard"]
        queue = queues[quota.inputs["metadata"]["namespace"]]
        [group] = queue["resourceGroups"]
        totals: dict[str, Fraction] = {}
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                totals[resource["name"]] = totals.get(resource["name"], Fraction(0)) + parse_quantity(resource["nominalQuota"])
        assert totals == {r: parse_quantity(hard[f"requests.{r}"]) for r in ("cpu", "memory", "nvidia.com/gpu")}
        assert totals["nvidia.com/gpu"] == 32  # p5-training's 2 × 8 plus the Karpenter pool's gpuLimit 16


def test_queues_preempt_lower_priority_and_each_namespace_has_its_local_queues(prod_graph_without_teams):
    # A namespace of no team: its own ClusterQueue, borrowing nothing (teams' queues:
    # tests/unit/workloads/test_teams.py).
    [queue] = kubernetes_objects(prod_graph_without_teams, "ClusterQueue")
    assert queue.inputs["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
    assert queue.inputs["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}
    local = {q.inputs["metadata"]["name"]: q.inputs for q in kubernetes_objects(prod_graph_without_teams, "LocalQueue")}
    assert {n: (q["metadata"]["namespace"], q["spec"]["clusterQueue"], q["spec"].get("stopPolicy")) for n, q in local.items()} == {
        LOCAL_QUEUE: ("training", "training", None),
        HELD_LOCAL_QUEUE: ("training", "training", "Hold"),
    }
    # Kueue reads the pods' PriorityClass as the workload's priority.
    assert jobs(prod_graph_without_teams)["rl-training"]["spec"]["template"]["spec"]["priorityClassName"] == "training-critical"


def test_a_cluster_queue_flavor_missing_a_covered_resource_fails(render_program):
    queue = cluster_queue("training", {"p5": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"}})
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()
    program = with_kueue_chart(lambda: k8s.apiextensions.CustomResource(
        "queue", api_version=queue["apiVersion"], kind="ClusterQueue", metadata=queue["metadata"], spec=queue["spec"]
    ))
    [failure] = check_render(render_program(program)).failures
    assert "flavors must have the same number of resources as the coveredResources" in failure


def capped_prod_graph(quota: dict[str, Any]) -> Graph:
    """Prod without teams, its namespace's quota changed by ``quota``."""
    config = stack_without_teams("prod")
    config[f"{NAMESPACE}scheduling"]["namespaces"][0]["quota"].update(quota)
    graph = run_main(config, stack="prod")
    assert graph.error is None, repr(graph.error)
    return graph


def _selected_namespaces(selector: dict[str, Any]) -> list[str]:
    if "matchLabels" in selector:
        return list(selector["matchLabels"].values())
    [expression] = selector["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("kubernetes.io/metadata.name", "In")
    return list(expression["values"])


def admission_bounds(graph: Graph) -> list[tuple[str, str, Fraction, Fraction]]:
    """For every ClusterQueue of the generated objects, every namespace it admits and every resource
    it covers: the most Kueue can admit at once (Kueue docs, "Cluster Queue": the flavors' nominal
    quotas together, plus on each flavor what it may borrow from its cohort: what the cohort's other
    queues lend there, each its lendingLimit or else its whole nominal quota, at most its own
    borrowingLimit; a queue without a cohort borrows nothing) and what the namespace's ResourceQuota
    allows."""
    quotas = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in namespace_quotas(graph)}
    queues = [q.inputs["spec"] for q in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")]

    def entries(spec: dict[str, Any], resource: str) -> dict[str, dict[str, str]]:
        return {f["name"]: e for g in spec["resourceGroups"] for f in g["flavors"] for e in f["resources"] if e["name"] == resource}

    bounds = []
    for spec in queues:
        cohort = [other for other in queues if other is not spec and spec.get("cohortName") and other.get("cohortName") == spec["cohortName"]]
        for group in spec["resourceGroups"]:
            for resource in group["coveredResources"]:
                admitted = Fraction(0)
                for flavor, entry in entries(spec, resource).items():
                    lent = sum((parse_quantity(e.get("lendingLimit", e["nominalQuota"])) for other in cohort
                                for f, e in entries(other, resource).items() if f == flavor), Fraction(0))
                    borrowed = min(lent, parse_quantity(entry["borrowingLimit"])) if "borrowingLimit" in entry else lent
                    admitted += parse_quantity(entry["nominalQuota"]) + borrowed
                for namespace in _selected_namespaces(spec["namespaceSelector"]):
                    bounds.append((namespace, resource, admitted, parse_quantity(quotas[namespace][f"requests.{resource}"])))
    return bounds


@pytest.mark.parametrize(
    "quota",
    [{}, {"gpus": 24}, {"gpus": 16}, {"gpus": 17}, {"gpus": 24, "cpu": "500500m", "memory": "5000Gi"}],
    ids=["fleet", "24-of-32-gpus", "one-pool-of-gpus", "a-gpu-past-one-pool", "gpus-cpu-and-memory"],
)
def test_kueue_can_never_admit_more_than_the_namespaces_resource_quota(quota):
    graph = capped_prod_graph(quota)
    # Without teams, the namespace's ClusterQueue is in no cohort and borrows nothing.
    assert all("cohortName" not in q.inputs["spec"] and "cohort" not in q.inputs["spec"]
               for q in graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
    bounds = admission_bounds(graph)
    assert {resource for _, resource, _, _ in bounds} == {"cpu", "memory", "nvidia.com/gpu"}
    assert [(ns, r, str(a), str(q)) for ns, r, a, q in bounds if a > q] == []


TEAM_VARIANTS = {
    "prod": ("prod", lambda teams, namespaces: None),
    "dev": ("dev", lambda teams, namespaces: None),
    "borrowing-limit": ("prod", lambda teams, namespaces: teams[0]["quotas"][1].update(borrowingLimit=4)),
    "lending-limit": ("prod", lambda teams, namespaces: teams[1]["quotas"][1].update(lendingLimit=3)),
    "team-without-quota": ("prod", lambda teams, namespaces: (namespaces.append({"name": "evaluation"}),
                                                              teams.append({"name": "evaluation", "namespaces": ["evaluation"]}))),
    "one-team-two-namespaces": ("prod", lambda teams, namespaces: (namespaces.append({"name": "evaluation"}),
                                                                   teams[1]["namespaces"].append("evaluation"))),
}


@pytest.mark.parametrize("variant", list(TEAM_VARIANTS))
def test_a_team_can_never_be_admitted_more_than_its_namespaces_resource_quota(variant):
    # A team's namespace's ResourceQuota is its team's reach (workloads/teams.py): what its
    # ClusterQueue can be admitted at once, borrowing included, so Kueue never admits a pod the
    # quota then refuses (kubernetes-sigs/kueue#1403), and GPUs it could borrow are not refused either.
    stack, change = TEAM_VARIANTS[variant]
    config = stack_config(stack)
    scheduling = config[f"{NAMESPACE}scheduling"]
    change(scheduling["teams"], scheduling["namespaces"])
    graph = run_main(config, stack=stack)
    assert graph.error is None, repr(graph.error)
    bounds = admission_bounds(graph)
    assert {ns for ns, _, _, _ in bounds} == {ns["name"] for ns in scheduling["namespaces"]}
    assert [(ns, r, str(a), str(q)) for ns, r, a, q in bounds if a > q] == []
    # The GPUs are exact (CPU and memory are each pool's share of its GPUs, rounded down per queue).
    assert [(ns, str(a), str(q)) for ns, r, a, q in bounds if r == "nvidia.com/gpu" and a != q] == []


def test_a_teams_borrowing_limit_lowers_its_namespaces_quota():
    # pretraining may borrow 4 of research's 8 gpu-training GPUs: 8 + 8 on p5-training and 8 + 4 on
    # gpu-training, 28 GPUs at 24 vCPUs and 256 GiB each. research still reaches all 32.
    config = stack_config("prod")
    config[f"{NAMESPACE}scheduling"]["teams"][0]["quotas"][1]["borrowingLimit"] = 4
    graph = run_main(config, stack="prod")
    assert graph.error is None, repr(graph.error)
    hard = {r.inputs["metadata"]["namespace"]: r.inputs["spec"]["hard"] for r in namespace_quotas(graph)}
    assert {ns: (h["requests.nvidia.com/gpu"], h["requests.cpu"], h["requests.memory"]) for ns, h in hard.items()} == {
        "training": ("28", "672", "7Ti"), "research": ("32", "768", "8Ti"),
    }


def test_a_namespace_capped_below_the_fleet_splits_its_quota_between_flavors_in_pool_order():
    graph = capped_prod_graph({"gpus": 24})
    [queue] = graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    gpus = {f["name"]: next(e["nominalQuota"] for e in f["resources"] if e["name"] == "nvidia.com/gpu") for f in queue.inputs["spec"]["resourceGroups"][0]["flavors"]}
    # The managed pool first, whole (its 16 GPUs, so a two-node job still fits it), then what is left.
    assert gpus == {"p5-training-tas": "16", "karpenter-gpu-training": "8"}
    [quota] = namespace_quotas(graph)
    assert quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] == "24"


def test_cpu_and_memory_caps_are_split_like_gpus_and_rounded_down():
    from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota
    from eks_gpu_training.workloads.kueue_queues import flavor_quotas, pool_flavors

    flavors = pool_flavors(parse_platform_args(raw()))
    # prod's pools each hold 2 × p5.48xlarge: 16 GPUs, 384 vCPUs and 4Ti of memory.
    quotas = flavor_quotas(flavors, ResolvedQuota(gpus=20, cpu="500500m", memory="5000Gi", persistent_volume_claims=5))
    assert quotas == {
        "p5-training-tas": {"cpu": "384", "memory": "4Ti", "nvidia.com/gpu": "16"},
        "karpenter-gpu-training": {"cpu": "116500m", "memory": "904Gi", "nvidia.com/gpu": "4"},
    }


def test_the_fleets_own_quota_gives_every_flavor_its_whole_pool():
    from eks_gpu_training.workloads.fleet_capacity import ResolvedQuota
    from eks_gpu_training.workloads.kueue_queues import flavor_quotas, pool_flavors

    flavors = pool_flavors(parse_platform_args(raw()))
    quotas = flavor_quotas(flavors, ResolvedQuota(gpus=32, cpu="768", memory="8Ti", persistent_volume_claims=5))
    assert set(map(frozenset, (q.items() for q in quotas.values()))) == {
        frozenset({"cpu": "384", "memory": "4Ti", "nvidia.com/gpu": "16"}.items())
    }


def test_a_namespace_quota_below_the_fleet_is_accepted_with_a_single_pool():
    values = raw()
    values["karpenter"] = {"enabled": False}
    values["scheduling"]["namespaces"][0]["quota"]["gpus"] = 8
    values["scheduling"]["trainingApps"][0]["nodes"] = 1
    args = parse_platform_args(values)
    from eks_gpu_training.workloads.kueue_queues import kueue_queues_args

    [queues] = kueue_queues_args(args).namespaces
    assert queues.quotas["p5-training-tas"]["nvidia.com/gpu"] == "8"


def test_kueue_queues_given_a_cluster_put_their_objects_on_the_clusters_kubernetes_provider():
    from eks_gpu_training.workloads.kueue_queues import KueueQueues, KueueQueuesArgs, kueue_queues_args

    stack_args = kueue_queues_args(parse_platform_args(raw()))

    def program():
        cluster = research_cluster(two_az_network())
        KueueQueues("queues", KueueQueuesArgs(flavors=stack_args.flavors, namespaces=stack_args.namespaces, cluster=cluster))

    graph = run_program(program, {"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    provider = graph.one("pulumi:providers:kubernetes")
    queue_objects = [r for r in graph.resources if r.name.startswith("queues-")]
    assert {r.inputs["kind"] for r in queue_objects} == {"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"}
    assert {r.provider.rsplit("::", 1)[0] for r in queue_objects} == {provider.urn}
