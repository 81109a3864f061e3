"""``--stack``: what the stack files declare, judged on snapshots of a cluster the stack built (and
of the same cluster with one thing changed by hand)."""

from __future__ import annotations

import copy
from typing import Optional

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.config.team_settings import TeamConfig, team_gid
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.verify import Snapshot, judge, judge_stack, load_stack_args
from eks_gpu_training.verify import stack as checks
from tests.support.builders import stack_without_teams
from tests.support.cluster_objects import SEED_CLASSES, daemon_pods, daemon_set, node, pdb, priority_class, system_node, training_pods
from tests.support.harness import PROJECT_ROOT, stack_file
from eks_gpu_training.platform.stack_files import stack_file_name
from eks_gpu_training.workloads.team_access import team_role_binding
from eks_gpu_training.workloads.team_admission import (
    gpu_pod_policy_binding_manifest,
    gpu_pod_policy_manifest,
    job_class_policy_binding_manifest,
    job_class_policy_manifest,
    priority_quota,
)

PROD_QUOTA = {"requests.nvidia.com/gpu": "32", "requests.cpu": "768", "requests.memory": "8Ti", "persistentvolumeclaims": "6"}
"""What each of prod's namespaces' quotas computes to: its team's reach, 8 GPUs of each pool of its
own plus the other team's 8 of each it may borrow, which is the whole fleet, 2 × p5.48xlarge plus
Karpenter's gpuLimit of 16 (32 GPUs, 768 vCPUs, 8 TiB) (the stack file's own comment says so); 5
claims plus the FSx claim. Before teams, the one namespace's quota was the same, the fleet's."""
FLAVORS = ["p5-training-tas", "karpenter-gpu-training"]


@pytest.fixture(scope="module")
def prod():
    return load_stack_args("prod", PROJECT_ROOT)


@pytest.fixture(scope="module")
def dev():
    return load_stack_args("dev", PROJECT_ROOT)


def queue(name: str, flavors: list[str], active: str = "True", *, cohort: str | None = None, gpus: dict[str, int] | None = None,
          usage: dict[str, tuple[int, int]] | None = None) -> dict:
    """A ClusterQueue as Kueue shows it: ``gpus`` its nominal GPU quota per flavor, ``usage`` its
    (total, borrowed) GPUs per flavor (``status.flavorsUsage``)."""
    def resources(flavor: str) -> list[dict]:
        return [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus[flavor])}] if gpus and flavor in gpus else []

    spec: dict = {"resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": f, "resources": resources(f)} for f in flavors]}]}
    if cohort is not None:
        spec["cohortName"] = cohort
    status: dict = {"conditions": [{"type": "Active", "status": active, "reason": "Ready" if active == "True" else "FlavorNotFound", "message": "Can admit new workloads" if active == "True" else "Can't admit new workloads: references missing ResourceFlavor(s): p5-training-tas."}]}
    if usage is not None:
        status["flavorsUsage"] = [{"name": f, "resources": [{"name": "nvidia.com/gpu", "total": str(t), "borrowed": str(b)}]} for f, (t, b) in usage.items()]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec, "status": status}


def team_queue(name: str, usage: dict[str, tuple[int, int]], **changes) -> dict:
    """A team's ClusterQueue of prod: 8 GPUs of each pool, in the teams' cohort."""
    return queue(name, FLAVORS, **{"cohort": "gpu-teams", "gpus": {f: 8 for f in FLAVORS}, "usage": usage, **changes})


def claim(namespace: str, team: Optional[str] = None) -> dict:
    """The namespace's FSx claim: its team's directory's (``fsx-lustre-<team>``), else the whole file system's."""
    claim_name = "fsx-lustre" if team is None else f"fsx-lustre-{team}"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim_name, "namespace": namespace},
            "spec": {"volumeName": f"{namespace}-{claim_name}"}, "status": {"phase": "Bound"}}


def run_as_team(pods: list[dict], team: str) -> list[dict]:
    """Pods as the library's template runs a team's: as its user and group, never root."""
    gid = team_gid(TeamConfig(name=team, namespaces=["x"]))
    for pod in pods:
        pod["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": gid, "runAsGroup": gid, "fsGroup": gid}
    return pods


def quota(namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": namespace}, "spec": {"hard": dict(PROD_QUOTA)}}


def local_queue(namespace: str, name: str, cluster_queue: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}}


def prod_cluster() -> Snapshot:
    """The prod stack's cluster as `pulumi up` leaves it, with rl-training running (submitted) and
    finetune held: rl-training's 16 GPUs on p5-training are pretraining's 8 and the 8 it borrows
    from research, which leaves its own idle."""
    gpu = ["gpu-0", "gpu-1"]
    return Snapshot(
        nodes=[system_node("system-0"), *(node(n) for n in gpu)],
        pods=[
            *run_as_team(training_pods("rl-training", gpu), "pretraining"),
            *daemon_pods("topology-labeler", "topology-labeler", gpu),
            *daemon_pods("eks-node-monitoring-agent", "kube-system", ["system-0", *gpu]),
            *daemon_pods("dcgm-server", "kube-system", gpu),
        ],
        pod_disruption_budgets=[pdb("rl-training", "training", "rl-training-multi", min_available=2),
                                pdb("finetune", "research", "finetune-multi", min_available=2)],
        priority_classes=list(SEED_CLASSES),
        resource_quotas=[quota("training"), quota("research"), priority_quota("training", ["training-critical", "evaluation-normal", "data-prep-low"]),
                         priority_quota("research", ["evaluation-normal", "data-prep-low"])],
        persistent_volume_claims=[claim("training", "pretraining"), claim("research", "research")],
        daemon_sets=[daemon_set("topology-labeler", "topology-labeler"), daemon_set("eks-node-monitoring-agent", "kube-system"), daemon_set("dcgm-server", "kube-system")],
        cluster_queues=[
            team_queue("pretraining", {"p5-training-tas": (16, 8), "karpenter-gpu-training": (0, 0)}),
            team_queue("research", {"p5-training-tas": (0, 0), "karpenter-gpu-training": (0, 0)}),
        ],
        local_queues=[local_queue("training", "gpu-queue", "pretraining"), local_queue("training", "gpu-queue-held", "pretraining"),
                      local_queue("research", "gpu-queue", "research"), local_queue("research", "gpu-queue-held", "research")],
        role_bindings=[team_role_binding(team, namespace) for team in load_stack_args("prod", PROJECT_ROOT).scheduling.teams
                       for namespace in team.namespaces],
        admission_policies=[gpu_pod_policy_manifest(), job_class_policy_manifest()],
        admission_policy_bindings=[gpu_pod_policy_binding_manifest(["training", "research"]),
                                   job_class_policy_binding_manifest(["training", "research"])],
    )


@pytest.fixture(scope="module")
def prod_without_teams():
    """prod's arguments ``without_teams``: its namespace training with a ClusterQueue of its own."""
    return platform_args_from_settings(stack_without_teams("prod"))


def prod_cluster_without_teams() -> Snapshot:
    """The cluster of prod ``without_teams`` as `pulumi up` leaves it (prod's before teams)."""
    snapshot = prod_cluster()
    snapshot.pod_disruption_budgets.pop()
    snapshot.resource_quotas[:] = [quota("training")]
    snapshot.admission_policies.clear()
    snapshot.admission_policy_bindings.clear()
    snapshot.persistent_volume_claims[:] = [claim("training")]
    snapshot.cluster_queues[:] = [queue("training", FLAVORS)]
    snapshot.local_queues[:] = [local_queue("training", "gpu-queue", "training"), local_queue("training", "gpu-queue-held", "training")]
    return snapshot


def rows_of(snapshot, args) -> dict[str, object]:
    return {r.item: r for r in judge_stack(snapshot, args)}


def test_prods_cluster_as_pulumi_up_leaves_it_passes_every_stack_row(prod):
    rows = rows_of(prod_cluster(), prod)
    assert {item: r.status for item, r in rows.items()} == {
        "pool-nodes/p5-training": "pass",
        "priority-class-values": "pass",
        "resource-quota/training": "pass",
        "resource-quota/research": "pass",
        "kueue-queues/training": "pass",
        "kueue-queues/research": "pass",
        "kueue-blocks/p5-training": "pass",
        "team/pretraining": "pass",
        "team/research": "pass",
        "team-members/pretraining": "pass",
        "team-members/research": "pass",
        "team-queue/pretraining": "pass",
        "team-priorities/pretraining": "pass",
        "team-queue/research": "pass",
        "team-priorities/research": "pass",
        "topology-labeler": "pass",
        "node-monitoring-agent": "pass",
        "fsx-claim/training": "pass",
        "fsx-claim/research": "pass",
        "team-data/pretraining": "pass",
        "team-data/research": "pass",
    }
    for namespace in ("training", "research"):
        assert rows[f"resource-quota/{namespace}"].evidence == (
            f"{namespace}/gpu-quota: requests.nvidia.com/gpu 32, requests.cpu 768, requests.memory 8Ti, persistentvolumeclaims 6, as the stack computes."
        )
    for namespace, team in (("training", "pretraining"), ("research", "research")):
        assert rows[f"fsx-claim/{namespace}"].evidence == f"{namespace}/fsx-lustre-{team} is Bound to {namespace}-fsx-lustre-{team}."
    gid = team_gid(TeamConfig(name="pretraining", namespaces=["x"]))
    assert rows["team-data/pretraining"].evidence == (
        f"training/fsx-lustre-pretraining Bound to the team's directory; 2 running training pods run as {gid}:{gid}, non-root.")
    assert rows["kueue-queues/training"].evidence == (
        "team pretraining's ClusterQueue pretraining active with flavors karpenter-gpu-training, p5-training-tas; "
        "LocalQueues gpu-queue and gpu-queue-held point at it."
    )
    assert rows["kueue-queues/research"].evidence == (
        "team research's ClusterQueue research active with flavors karpenter-gpu-training, p5-training-tas; "
        "LocalQueues gpu-queue and gpu-queue-held point at it."
    )
    # rl-training's 16 GPUs: pretraining's own 8 of p5-training and the 8 research lends while idle
    assert rows["team/pretraining"].evidence == (
        "team pretraining (weight 2, namespaces training): p5-training: quota 8, using 16 (8 borrowed), lending 0; "
        "gpu-training: quota 8, using 0 (0 borrowed), lending 0."
    )
    assert rows["team/research"].evidence == (
        "team research (weight 1, namespaces research): p5-training: quota 8, using 0 (0 borrowed), lending 8; "
        "gpu-training: quota 8, using 0 (0 borrowed), lending 0."
    )


def test_prod_without_teams_passes_every_stack_row_with_a_cluster_queue_per_namespace(prod_without_teams):
    rows = rows_of(prod_cluster_without_teams(), prod_without_teams)
    assert {item: r.status for item, r in rows.items()} == {
        "pool-nodes/p5-training": "pass",
        "priority-class-values": "pass",
        "resource-quota/training": "pass",
        "kueue-queues/training": "pass",
        "kueue-blocks/p5-training": "pass",
        "teams": "skip",
        "team-members": "skip",
        "team-admission": "skip",
        "topology-labeler": "pass",
        "node-monitoring-agent": "pass",
        "fsx-claim/training": "pass",
        "team-data": "skip",
    }
    assert rows["resource-quota/training"].evidence == (
        "training/gpu-quota: requests.nvidia.com/gpu 32, requests.cpu 768, requests.memory 8Ti, persistentvolumeclaims 6, as the stack computes."
    )
    assert rows["kueue-queues/training"].evidence == (
        "ClusterQueue training active with flavors karpenter-gpu-training, p5-training-tas; LocalQueues gpu-queue and gpu-queue-held point at it."
    )
    assert rows["teams"].evidence == "scheduling.teams is empty in the stack: each namespace has a ClusterQueue of its own."


def test_with_the_stack_the_seed_rows_come_first_then_the_health_rows_then_the_stacks(prod):
    items = [r.item for r in judge(prod_cluster(), prod)]
    assert items[:8] == ["gpu-device-plugin", "efa-device-plugin", "priority-classes", "pod-disruption-budgets", "gpu-taints", "one-pod-per-node", "topology-labels", "topology-aware-spread"]
    assert items[8:12] == ["health-gate", "health-gate-configuration", "accelerated-hardware", "replacement-wait"]
    assert items[12:] == [
        "pool-nodes/p5-training", "priority-class-values", "resource-quota/training", "resource-quota/research",
        "kueue-queues/training", "kueue-queues/research", "kueue-blocks/p5-training", "team/pretraining", "team/research",
        "team-members/pretraining", "team-members/research", "team-queue/pretraining", "team-priorities/pretraining",
        "team-queue/research", "team-priorities/research", "topology-labeler", "node-monitoring-agent", "fsx-claim/training", "fsx-claim/research",
        "team-data/pretraining", "team-data/research",
    ]


def test_features_the_dev_stack_leaves_off_are_skips_that_say_so(dev):
    snapshot = Snapshot(nodes=[node("dev-0", "g6e.xlarge", pool="dev-gpu")])
    rows = rows_of(snapshot, dev)
    assert (rows["topology-labeler"].status, rows["topology-labeler"].evidence) == ("skip", "topologyLabeler.enabled is false in the stack.")
    assert (rows["fsx-claim"].status, rows["fsx-claim"].evidence) == ("skip", "storage.fsx.enabled is false in the stack.")


def test_a_stack_file_is_found_by_name_or_path_and_a_missing_one_is_refused(tmp_path, prod):
    assert load_stack_args(stack_file("prod", PROJECT_ROOT)) == prod
    with pytest.raises(ConfigError, match=r"Pulumi\.absent\.yaml: no such stack file"):
        load_stack_args("absent", tmp_path)


def test_a_stack_file_in_another_projects_namespace_is_read_from_it(tmp_path, dev):
    text = stack_file("dev", PROJECT_ROOT).read_text().replace("eks-gpu-training:", "acme:")
    (tmp_path / stack_file_name("dev")).write_text(text)
    assert load_stack_args(tmp_path / stack_file_name("dev")) == dev


# --- pool-nodes ------------------------------------------------------------------------------------


def test_pool_nodes_fail_when_a_declared_node_is_missing(prod):
    snapshot = prod_cluster()
    del snapshot.nodes[2]
    (row,) = checks.pool_nodes(snapshot, prod)
    assert row.status == "fail"
    assert row.evidence == "1 Ready of 1 nodes labelled eks-gpu-training/pool=p5-training; the stack declares 2 (minSize 2, maxSize 2)."


def test_pool_nodes_fail_when_a_node_is_not_ready(prod):
    snapshot = prod_cluster()
    snapshot.nodes[2] = node("gpu-1", ready=False)
    (row,) = checks.pool_nodes(snapshot, prod)
    assert row.status == "fail"
    assert row.evidence.endswith("; 1 node with Ready False, reason KubeletNotReady (gpu-1).")


def test_pool_nodes_fail_above_max_size(prod):
    snapshot = prod_cluster()
    snapshot.nodes.append(node("gpu-2"))
    (row,) = checks.pool_nodes(snapshot, prod)
    assert row.status == "fail"
    assert "3 Ready of 3 nodes" in row.evidence


# --- priority-class-values -------------------------------------------------------------------------


def test_priority_class_values_fail_on_a_value_edited_by_hand(prod):
    snapshot = prod_cluster()
    snapshot.priority_classes[1] = priority_class("evaluation-normal", 2_000_000)
    row = checks.priority_class_values(snapshot, prod)
    assert (row.status, row.evidence) == ("fail", "evaluation-normal: value 2000000, the stack declares 500000.")


def test_priority_class_values_fail_on_a_class_made_the_global_default(prod):
    snapshot = prod_cluster()
    snapshot.priority_classes[2] = priority_class("data-prep-low", 100_000, global_default=True)
    assert "data-prep-low: globalDefault True, the stack declares False" in checks.priority_class_values(snapshot, prod).evidence


def test_priority_class_values_fail_on_a_missing_class(prod):
    snapshot = prod_cluster()
    snapshot.priority_classes.pop(0)
    assert checks.priority_class_values(snapshot, prod).evidence == "training-critical is missing."


# --- resource-quota --------------------------------------------------------------------------------


def test_a_quota_in_the_api_servers_canonical_form_equals_the_stacks():
    args = load_stack_args("prod", PROJECT_ROOT)
    snapshot = prod_cluster()
    snapshot.resource_quotas[0]["spec"]["hard"]["requests.memory"] = str(8 * 1024**4)
    snapshot.resource_quotas[0]["spec"]["hard"]["requests.cpu"] = "768000m"
    assert checks.resource_quotas(snapshot, args)[0].status == "pass"


def test_a_quota_edited_by_hand_fails_naming_the_key(prod):
    snapshot = prod_cluster()
    snapshot.resource_quotas[0]["spec"]["hard"]["requests.nvidia.com/gpu"] = "64"
    training, research = checks.resource_quotas(snapshot, prod)
    assert (training.status, training.evidence) == ("fail", "training/gpu-quota: requests.nvidia.com/gpu 64, the stack computes 32.")
    assert research.status == "pass"


def test_a_team_namespaces_quota_is_judged_by_its_teams_reach(prod):
    # With research lending none of its gpu-training GPUs, pretraining reaches 8 + 8 there and 8 on
    # gpu-training: training's quota is 24 GPUs, 576 vCPUs and 6Ti; the cluster's 32 is now too much.
    teams = [t.model_copy(deep=True) for t in prod.scheduling.teams]
    research = teams[1]
    research.quotas[1] = research.quotas[1].model_copy(update={"lending_limit": 0})
    args = prod.model_copy(update={"scheduling": prod.scheduling.model_copy(update={"teams": teams})})
    training, research_row = checks.resource_quotas(prod_cluster(), args)
    assert (training.status, training.evidence) == (
        "fail", "training/gpu-quota: requests.nvidia.com/gpu 32, the stack computes 24; requests.cpu 768, the stack computes 576; "
                "requests.memory 8Ti, the stack computes 6Ti.")
    assert research_row.status == "pass"


def test_a_quota_with_a_limit_the_stack_does_not_set_fails(prod):
    snapshot = prod_cluster()
    snapshot.resource_quotas[0]["spec"]["hard"]["pods"] = "10"
    assert "limits the stack does not set: pods" in checks.resource_quotas(snapshot, prod)[0].evidence


def test_a_deleted_quota_fails(prod):
    snapshot = prod_cluster()
    snapshot.resource_quotas.clear()
    assert checks.resource_quotas(snapshot, prod)[0].evidence == "no ResourceQuota gpu-quota in namespace training."


# --- kueue-queues ----------------------------------------------------------------------------------


def test_an_inactive_cluster_queue_fails_with_kueues_reason(prod):
    snapshot = prod_cluster()
    snapshot.cluster_queues[0] = team_queue("pretraining", {}, active="False")
    training, research = checks.kueue_queues(snapshot, prod)
    assert training.status == "fail"
    assert "ClusterQueue pretraining is not active (FlavorNotFound: Can't admit new workloads" in training.evidence
    assert "kubectl describe clusterqueue pretraining" in training.fix
    assert research.status == "pass"


def test_an_inactive_cluster_queue_of_a_namespace_of_its_own_fails_with_kueues_reason(prod_without_teams):
    snapshot = prod_cluster_without_teams()
    snapshot.cluster_queues[0] = queue("training", FLAVORS, active="False")
    (row,) = checks.kueue_queues(snapshot, prod_without_teams)
    assert row.status == "fail"
    assert "ClusterQueue training is not active (FlavorNotFound: Can't admit new workloads" in row.evidence


def test_a_cluster_queue_missing_a_pools_flavor_fails(prod):
    snapshot = prod_cluster()
    snapshot.cluster_queues[1] = queue("research", ["p5-training-tas"], cohort="gpu-teams", gpus={"p5-training-tas": 8})
    training, research = checks.kueue_queues(snapshot, prod)
    assert training.status == "pass"
    assert "ClusterQueue research lists flavors p5-training-tas, the stack's pools make karpenter-gpu-training, p5-training-tas" in research.evidence


def test_a_missing_or_misdirected_local_queue_fails(prod):
    snapshot = prod_cluster()
    # training's LocalQueue points at the ClusterQueue named after the namespace (before teams), not its team's
    snapshot.local_queues[:] = [local_queue("training", "gpu-queue", "training"), *snapshot.local_queues[2:]]
    training, research = checks.kueue_queues(snapshot, prod)
    assert training.evidence == "LocalQueue training/gpu-queue points at ClusterQueue training, not pretraining; no LocalQueue training/gpu-queue-held."
    assert research.status == "pass"


# --- teams -------------------------------------------------------------------------------------------


def test_a_team_quota_edited_by_hand_fails_naming_the_pool(prod):
    snapshot = prod_cluster()
    snapshot.cluster_queues[1] = team_queue("research", {}, gpus={"p5-training-tas": 16, "karpenter-gpu-training": 8})
    rows = {r.item: r for r in checks.teams(snapshot, prod)}
    assert rows["team/pretraining"].status == "pass"
    assert (rows["team/research"].status, rows["team/research"].evidence) == ("fail", "p5-training: quota 16, the stack declares 8.")


def test_a_team_queue_out_of_the_cohort_fails(prod):
    snapshot = prod_cluster()
    snapshot.cluster_queues[1] = queue("research", FLAVORS, gpus={f: 8 for f in FLAVORS})
    snapshot.cluster_queues.pop(0)
    rows = {r.item: r for r in checks.teams(snapshot, prod)}
    assert rows["team/pretraining"].evidence == "team pretraining's ClusterQueue pretraining does not exist, not in gpu-teams."
    assert rows["team/research"].evidence == "team research's ClusterQueue research is in cohort none, not in gpu-teams."


def test_kueue_queues_skip_when_the_stack_runs_no_kueue(prod):
    no_kueue = prod.model_copy(update={"kueue": prod.kueue.model_copy(update={"enabled": False})})
    assert [(r.item, r.status) for r in checks.kueue_queues(prod_cluster(), no_kueue)] == [("kueue-queues", "skip")]


# --- topology-labeler and node-monitoring-agent -------------------------------------------------------


def test_the_labeler_fails_on_a_gpu_node_without_its_ready_pod(prod):
    snapshot = prod_cluster()
    snapshot.pods[:] = [p for p in snapshot.pods if not (p["metadata"]["name"] == "topology-labeler-gpu-1")]
    row = checks.topology_labeler_running(snapshot, prod)
    assert (row.status, row.evidence) == ("fail", "1 GPU node without a pod of DaemonSet topology-labeler/topology-labeler (gpu-1).")


def test_the_labeler_fails_when_its_daemonset_is_gone(prod):
    snapshot = prod_cluster()
    snapshot.daemon_sets.pop(0)
    assert checks.topology_labeler_running(snapshot, prod).evidence == "no DaemonSet topology-labeler/topology-labeler."


def test_the_agent_fails_when_dcgm_server_is_not_ready_on_a_gpu_node(prod):
    snapshot = prod_cluster()
    for p in snapshot.pods:
        if p["metadata"]["name"] == "dcgm-server-gpu-0":
            p["status"]["conditions"][0]["status"] = "False"
    row = checks.node_monitoring_agent(snapshot, prod)
    assert row.status == "fail"
    assert row.evidence == "1 GPU node whose pod of DaemonSet kube-system/dcgm-server is not Ready (gpu-0)."


def test_the_agent_fails_on_a_gpu_node_without_accelerated_hardware_ready(prod):
    snapshot = prod_cluster()
    snapshot.nodes[1] = node("gpu-0", accelerated_hardware_ready=None)
    row = checks.node_monitoring_agent(snapshot, prod)
    assert row.status == "fail"
    assert row.evidence == "1 GPU node without an AcceleratedHardwareReady condition (gpu-0)."


def test_the_agent_row_reports_a_gpu_fault_the_agent_found(prod):
    snapshot = prod_cluster()
    snapshot.nodes[2] = node("gpu-1", accelerated_hardware_ready="False")
    row = checks.node_monitoring_agent(snapshot, prod)
    assert row.evidence == "1 GPU node with AcceleratedHardwareReady False, reason NvidiaXID79Error (gpu-1)."
    assert "node repair replaces it" in row.fix


def test_the_agent_row_skips_when_the_stack_runs_no_node_monitoring(prod):
    off = prod.model_copy(update={"node_monitoring": prod.node_monitoring.model_copy(update={"enabled": False})})
    row = checks.node_monitoring_agent(prod_cluster(), off)
    assert (row.status, row.evidence) == ("skip", "nodeMonitoring.enabled is false in the stack.")


# --- fsx-claim -------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", ["Pending", "Lost"])
def test_an_fsx_claim_that_is_not_bound_fails(prod, phase):
    snapshot = prod_cluster()
    snapshot.persistent_volume_claims[1]["status"]["phase"] = phase
    training, research = checks.fsx_claims(snapshot, prod)
    assert training.status == "pass"
    assert (research.status, research.evidence) == ("fail", f"research/fsx-lustre-research is {phase}.")


def test_a_deleted_fsx_claim_fails(prod):
    snapshot = prod_cluster()
    snapshot.persistent_volume_claims.clear()
    assert checks.fsx_claims(snapshot, prod)[0].evidence == "training/fsx-lustre-pretraining does not exist."


# --- team-data -------------------------------------------------------------------------------------


def test_a_team_namespace_still_holding_the_whole_file_systems_claim_fails_its_data_row(prod):
    snapshot = prod_cluster()
    snapshot.persistent_volume_claims.append(claim("research"))
    rows = rows_of(snapshot, prod)
    assert rows["team-data/pretraining"].status == "pass"
    assert (rows["team-data/research"].status, rows["team-data/research"].evidence) == (
        "fail", "research/fsx-lustre (the whole file system) still exists.")


def test_a_team_claim_bound_elsewhere_or_missing_fails_its_data_row(prod):
    snapshot = prod_cluster()
    snapshot.persistent_volume_claims[1]["spec"]["volumeName"] = "research-fsx-lustre"
    del snapshot.persistent_volume_claims[0]
    rows = rows_of(snapshot, prod)
    assert rows["team-data/pretraining"].evidence == "training/fsx-lustre-pretraining is not Bound to training-fsx-lustre-pretraining."
    assert rows["team-data/research"].evidence == "research/fsx-lustre-research is not Bound to research-fsx-lustre-research."


def test_a_team_training_pod_run_as_root_fails_its_data_row(prod):
    snapshot = prod_cluster()
    rooted = next(p for p in snapshot.pods if p["metadata"]["namespace"] == "training")
    rooted["spec"]["securityContext"] = {"runAsUser": 0}
    row = rows_of(snapshot, prod)["team-data/pretraining"]
    gid = team_gid(TeamConfig(name="pretraining", namespaces=["x"]))
    assert (row.status, row.evidence) == ("fail", f"training pods not run as the team's user and group {gid}: training/{rooted['metadata']['name']}.")


def test_stack_rows_judge_the_snapshot_without_changing_it(prod):
    snapshot = prod_cluster()
    before = copy.deepcopy(snapshot)
    judge(snapshot, prod)
    assert snapshot == before


def test_a_job_the_stack_asks_one_block_for_that_no_block_can_hold_fails_naming_the_fix(prod):
    """Kueue would hold such a job for ever, with no error but its Workload's message: rl-training's
    two nodes ask for one layer-3 block, and each node of the pool sits under a layer-3 switch of its own."""
    snapshot = prod_cluster()
    snapshot.nodes[1:] = [node("gpu-0", layers=("nn-a", "nn-b", "nn-c")), node("gpu-1", layers=("nn-a", "nn-b", "nn-d"))]
    row = rows_of(snapshot, prod)["kueue-blocks/p5-training"]
    assert row.status == "fail"
    assert "rl-training (2 nodes) asks for one layer-3 block, the largest holds 1" in row.evidence
    assert "a job of 2 to 2 nodes would ask for one layer-3 block (kueue.blockNodes 16), the largest holds 1" in row.evidence
    assert "kueue.blockNodes to at most 1" in row.fix


def test_block_nodes_above_the_largest_block_strands_the_sizes_between(prod):
    """A pool of four nodes in layer-3 blocks of two: jobs of three or four nodes would ask for one
    layer-3 block and never get it; with kueue.blockNodes 2 they ask for a layer-2 block instead."""
    snapshot = prod_cluster()
    snapshot.nodes[1:] = [node(f"gpu-{i}", layers=("nn-a", "nn-b", f"nn-c{i // 2}")) for i in range(4)]
    assert "a job of 3 to 4 nodes" in rows_of(snapshot, prod)["kueue-blocks/p5-training"].evidence
    lowered = prod.model_copy(update={"kueue": prod.kueue.model_copy(update={"block_nodes": 2})})
    assert rows_of(snapshot, lowered)["kueue-blocks/p5-training"].status == "pass"
