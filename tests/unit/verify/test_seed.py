"""The seed's checklist judged on snapshots of a cluster: for every row, what makes it pass, fail
and skip. The snapshots are plain API objects (``cluster_objects``); how Kubernetes itself gets a
cluster into these states is the cluster tier's to show."""

from __future__ import annotations

import copy

import pytest

from eks_gpu_training.verify import SEED_ITEMS, Snapshot, judge_seed
from eks_gpu_training.verify import seed
from eks_gpu_training.verify.stack import load_stack_args
from tests.support.cluster_objects import SEED_CLASSES, daemon_pods, node, pdb, pod, priority_class, system_node, training_pods
from tests.support.harness import PROJECT_ROOT

LAYER = "topology.k8s.aws/network-node-layer-{}".format


def cluster(nodes=None, pods=None, pdbs=None, classes=None) -> Snapshot:
    """A healthy two-node p5 pool running the seed's two-node job, unless told otherwise."""
    gpu_nodes = nodes if nodes is not None else [node("gpu-0"), node("gpu-1")]
    names = [n["metadata"]["name"] for n in gpu_nodes]
    return Snapshot(
        nodes=[system_node("system-0"), *gpu_nodes],
        pods=pods if pods is not None else [*training_pods("rl-training", names), *daemon_pods("nvidia-device-plugin-daemonset", "gpu-operator", names)],
        pod_disruption_budgets=pdbs if pdbs is not None else [pdb("rl-training", "training", "rl-training-multi", min_available=len(names))],
        priority_classes=classes if classes is not None else list(SEED_CLASSES),
    )


def row(rows, item):
    (found,) = [r for r in rows if r.item == item]
    return found


def statuses(snapshot, args=None) -> dict[str, str]:
    return {r.item: r.status for r in judge_seed(snapshot, args)}


def three_node_cluster(**job) -> Snapshot:
    nodes = [node(f"gpu-{i}") for i in range(3)]
    names = [n["metadata"]["name"] for n in nodes]
    return cluster(nodes=nodes, pods=training_pods("rl-training", names, **job), pdbs=[pdb("rl-training", "training", "rl-training-multi", min_available=3)])


def test_the_rows_are_the_seeds_eight_items_in_its_order():
    assert [r.item for r in judge_seed(cluster())] == list(SEED_ITEMS) == [
        "gpu-device-plugin",
        "efa-device-plugin",
        "priority-classes",
        "pod-disruption-budgets",
        "gpu-taints",
        "one-pod-per-node",
        "topology-labels",
        "topology-aware-spread",
    ]


def test_a_healthy_two_node_pool_passes_and_skips_the_three_node_items_saying_why():
    rows = judge_seed(cluster())
    assert {r.item: r.status for r in rows} == {
        "gpu-device-plugin": "pass",
        "efa-device-plugin": "pass",
        "priority-classes": "pass",
        "pod-disruption-budgets": "pass",
        "gpu-taints": "pass",
        "one-pod-per-node": "pass",
        "topology-labels": "skip",
        "topology-aware-spread": "skip",
    }
    assert row(rows, "topology-labels").evidence == "no GPU pool has 3 or more nodes (the largest, pool p5-training, has 2)"
    assert row(rows, "topology-aware-spread").evidence == "no training job runs on 3 or more nodes"
    assert all(r.fix == "" for r in rows)


def test_a_cluster_without_gpu_nodes_or_jobs_skips_what_it_cannot_judge():
    rows = judge_seed(Snapshot(nodes=[system_node("system-0")], priority_classes=list(SEED_CLASSES)))
    assert {r.item: r.status for r in rows} == {
        "gpu-device-plugin": "skip",
        "efa-device-plugin": "skip",
        "priority-classes": "pass",
        "pod-disruption-budgets": "skip",
        "gpu-taints": "skip",
        "one-pod-per-node": "skip",
        "topology-labels": "skip",
        "topology-aware-spread": "skip",
    }
    assert row(rows, "gpu-device-plugin").evidence.startswith("no GPU node in the cluster")
    assert row(rows, "pod-disruption-budgets").evidence == "no training job runs (no Running pod labelled app.kubernetes.io/component=training)"
    assert row(rows, "priority-classes").evidence.endswith("no training job runs, so no pod's class to check.")


# --- gpu-device-plugin ---------------------------------------------------------------------------


def test_gpu_device_plugin_passes_with_every_gpu_of_the_type_allocatable():
    found = seed.gpu_device_plugin(cluster())
    assert (found.status, found.evidence) == ("pass", "2 GPU nodes offer every GPU of their type (2 × p5.48xlarge: 8 each).")


def test_gpu_device_plugin_fails_on_a_node_whose_allocatable_gpus_are_below_its_types_count():
    found = seed.gpu_device_plugin(cluster(nodes=[node("gpu-0"), node("gpu-1", gpus=7)]))
    assert found.status == "fail"
    assert found.evidence == "1 of 2 GPU nodes: 1 node of type p5.48xlarge offering 7 nvidia.com/gpu of the type's 8 (gpu-1)."
    assert "NVIDIA device plugin" in found.fix


def test_gpu_device_plugin_fails_on_a_gpu_node_reporting_no_gpus_at_all():
    found = seed.gpu_device_plugin(cluster(nodes=[node("gpu-0", gpus=0)]))
    assert found.status == "fail"
    assert "offering 0 nvidia.com/gpu of the type's 8 (gpu-0)" in found.evidence


def test_gpu_device_plugin_fails_on_a_gpu_node_of_a_type_the_catalog_does_not_know():
    found = seed.gpu_device_plugin(cluster(nodes=[node("gpu-0", "x9.huge", gpus=8)]))
    assert found.status == "fail"
    assert "1 node of instance type 'x9.huge', which is not a GPU type of the catalog, so the GPU count is unknown (gpu-0)" in found.evidence


def test_a_gpu_type_node_without_the_role_label_still_counts_as_a_gpu_node():
    found = seed.gpu_device_plugin(cluster(nodes=[node("gpu-0", role=False, gpus=4)]))
    assert found.status == "fail"
    assert "1 node of type p5.48xlarge offering 4 nvidia.com/gpu of the type's 8 (gpu-0)" in found.evidence


# --- efa-device-plugin ---------------------------------------------------------------------------


def test_efa_device_plugin_passes_with_every_efa_interface_of_the_type():
    found = seed.efa_device_plugin(cluster())
    assert (found.status, found.evidence) == ("pass", "2 GPU nodes offer their EFA interfaces (2 × p5.48xlarge: 32 each).")


def test_efa_device_plugin_fails_on_a_node_without_its_efa_interfaces_and_hints_at_stack():
    found = seed.efa_device_plugin(cluster(nodes=[node("gpu-0"), node("gpu-1", efa=0)]))
    assert found.status == "fail"
    assert found.evidence == "1 of 2 EFA-capable GPU nodes: 1 node of type p5.48xlarge (pool p5-training) offering 0 vpc.amazonaws.com/efa, expected 32 (gpu-1)."
    assert "pass --stack" in found.fix


def test_efa_device_plugin_skips_when_no_gpu_node_has_an_efa_type():
    found = seed.efa_device_plugin(cluster(nodes=[node("dev-0", "g6e.xlarge", pool="dev-gpu")]))
    assert (found.status, found.evidence) == ("skip", "no GPU node of an instance type with EFA")


def test_efa_device_plugin_with_the_stack_leaves_out_a_pool_the_stack_runs_without_efa():
    args = load_stack_args("prod", PROJECT_ROOT)
    no_efa = args.model_copy(update={"gpu_node_groups": [args.gpu_node_groups[0].model_copy(update={"efa": "disabled"})]})
    snapshot = cluster(nodes=[node("gpu-0", efa=0), node("gpu-1", efa=0)])
    assert seed.efa_device_plugin(snapshot).status == "fail"
    found = seed.efa_device_plugin(snapshot, no_efa)
    assert (found.status, found.evidence) == ("skip", "the stack runs the GPU nodes of a type with EFA without it (pool p5-training (efa: disabled)).")


def test_efa_device_plugin_with_the_stack_expects_the_pools_layout_the_fewest_of_its_types():
    args = load_stack_args("prod", PROJECT_ROOT)
    mixed = args.model_copy(update={"gpu_node_groups": [args.gpu_node_groups[0].model_copy(update={"instance_types": ["p5.48xlarge", "p4de.24xlarge"]})]})
    snapshot = cluster(nodes=[node("gpu-0", efa=4), node("gpu-1", efa=4)])
    assert seed.efa_device_plugin(snapshot).status == "fail"
    assert seed.efa_device_plugin(snapshot, mixed).status == "pass"


# --- priority-classes ----------------------------------------------------------------------------


def test_priority_classes_pass_when_they_exist_and_the_jobs_pods_name_one():
    found = seed.priority_classes(cluster())
    assert found.status == "pass"
    assert found.evidence == (
        "classes exist: training-critical (1000000), evaluation-normal (500000), data-prep-low (100000); "
        "the 2 pods of running training jobs name existing classes (2 × training-critical)."
    )


def test_priority_classes_fail_when_a_class_is_deleted():
    found = seed.priority_classes(cluster(classes=[c for c in SEED_CLASSES if c["metadata"]["name"] != "data-prep-low"]))
    assert found.status == "fail"
    assert "missing PriorityClasses of the library's default (pass --stack for the stack's own) classes: data-prep-low" in found.evidence


def test_priority_classes_fail_when_the_class_the_pods_name_is_gone():
    classes = [c for c in SEED_CLASSES if c["metadata"]["name"] != "training-critical"]
    found = seed.priority_classes(cluster(classes=classes))
    assert found.status == "fail"
    assert "2 training pods naming PriorityClass 'training-critical', which does not exist (training/rl-training-0-abcde, training/rl-training-1-abcde)" in found.evidence


def test_priority_classes_fail_when_a_training_pod_names_no_class():
    snapshot = cluster(pods=training_pods("rl-training", ["gpu-0", "gpu-1"], priority_class=None))
    found = seed.priority_classes(snapshot)
    assert found.status == "fail"
    assert found.evidence == "2 training pods without a priorityClassName (training/rl-training-0-abcde, training/rl-training-1-abcde)."


def test_priority_classes_with_the_stack_expect_the_stacks_own_classes():
    args = load_stack_args("prod", PROJECT_ROOT)
    custom = args.model_copy(update={"scheduling": args.scheduling.model_copy(update={"priority_classes": [args.scheduling.priority_classes[0]]})})
    found = seed.priority_classes(cluster(classes=[priority_class("training-critical", 1_000_000)]), custom)
    assert found.status == "pass"
    assert found.evidence.startswith("classes exist: training-critical (1000000);")


# --- pod-disruption-budgets ----------------------------------------------------------------------


def test_pdb_passes_when_a_budget_selects_every_pod_and_allows_no_disruption():
    found = seed.pod_disruption_budgets(cluster())
    assert (found.status, found.evidence) == ("pass", "job training/rl-training-multi: 2 pods kept by rl-training (minAvailable 2, disruptionsAllowed 0).")


def test_pdb_fails_when_the_budget_is_deleted():
    found = seed.pod_disruption_budgets(cluster(pdbs=[]))
    assert found.status == "fail"
    assert found.evidence == "1 training job with pods no PDB selects (training/rl-training-multi)."
    assert "minAvailable must equal the job's pods" in found.fix


def test_pdb_fails_when_its_status_lets_a_pod_be_evicted():
    found = seed.pod_disruption_budgets(cluster(pdbs=[pdb("rl-training", "training", "rl-training-multi", min_available=1, disruptions_allowed=1)]))
    assert found.status == "fail"
    assert found.evidence == "1 training job with pods whose PDB's status allows 1 disruption (training/rl-training-multi with PDB rl-training)."


def test_pdb_fails_while_the_disruption_controller_has_not_computed_its_status():
    found = seed.pod_disruption_budgets(cluster(pdbs=[pdb("rl-training", "training", "rl-training-multi", min_available=2, observed=False)]))
    assert found.status == "fail"
    assert "with pods whose PDB's status the disruption controller has not computed yet" in found.evidence


def test_pdb_in_another_namespace_does_not_protect_the_job():
    found = seed.pod_disruption_budgets(cluster(pdbs=[pdb("rl-training", "default", "rl-training-multi", min_available=2)]))
    assert found.status == "fail"
    assert "with pods no PDB selects" in found.evidence


def test_pdb_skips_when_the_job_is_only_pending():
    snapshot = cluster(pods=training_pods("rl-training", [None, None]))
    assert seed.pod_disruption_budgets(snapshot).status == "skip"


def test_finished_training_pods_are_no_running_job():
    snapshot = cluster(pods=training_pods("rl-training", ["gpu-0", "gpu-1"], phase="Succeeded"))
    assert statuses(snapshot)["pod-disruption-budgets"] == "skip"


# --- gpu-taints ----------------------------------------------------------------------------------


def test_gpu_taints_pass_with_tainted_nodes_and_only_gpu_and_daemonset_pods_on_them():
    found = seed.gpu_taints(cluster())
    assert (found.status, found.evidence) == ("pass", "2 GPU nodes carry the nvidia.com/gpu taint; of the 4 pods on them, 2 request GPUs and 2 belong to DaemonSets.")


def test_gpu_taints_fail_when_the_taint_is_removed_from_one_node():
    found = seed.gpu_taints(cluster(nodes=[node("gpu-0"), node("gpu-1", tainted=False)]))
    assert found.status == "fail"
    assert found.evidence == "1 GPU node without the nvidia.com/gpu NoSchedule taint (gpu-1)."
    assert "kubectl taint node <node> nvidia.com/gpu=true:NoSchedule" in found.fix


def test_gpu_taints_fail_on_a_pod_without_a_gpu_request_on_a_gpu_node():
    snapshot = cluster()
    snapshot.pods.append(pod("web-5d8f", "default", node="gpu-1", owner=("ReplicaSet", "web-5d8")))
    found = seed.gpu_taints(snapshot)
    assert found.status == "fail"
    assert found.evidence == "1 pod without a GPU request on GPU nodes, not of a DaemonSet (default/web-5d8f on gpu-1)."


def test_gpu_taints_ignore_finished_pods_and_pods_on_system_nodes():
    snapshot = cluster()
    snapshot.pods.extend([pod("done", "default", node="gpu-1", phase="Succeeded"), pod("web", "default", node="system-0")])
    assert seed.gpu_taints(snapshot).status == "pass"


def test_a_noexecute_gpu_taint_keeps_pods_off_too():
    tainted = node("gpu-0")
    tainted["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoExecute"}]
    assert seed.gpu_taints(cluster(nodes=[tainted], pods=[])).status == "pass"


def test_a_prefer_no_schedule_gpu_taint_does_not_keep_pods_off():
    tainted = node("gpu-0")
    tainted["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "PreferNoSchedule"}]
    assert seed.gpu_taints(cluster(nodes=[tainted], pods=[])).status == "fail"


# --- one-pod-per-node ----------------------------------------------------------------------------


def test_one_pod_per_node_passes_with_each_pod_on_its_own_node():
    found = seed.one_pod_per_node(cluster())
    assert (found.status, found.evidence) == ("pass", "job training/rl-training-multi: 2 running pods on 2 nodes.")


def test_one_pod_per_node_fails_when_a_second_pod_of_the_job_is_on_the_same_node():
    found = seed.one_pod_per_node(cluster(pods=training_pods("rl-training", ["gpu-0", "gpu-0"])))
    assert found.status == "fail"
    assert found.evidence == "1 training job with two or more running pods on one node (training/rl-training-multi on gpu-0)."
    assert "anti-affinity on kubernetes.io/hostname" in found.fix


def test_one_pod_per_node_skips_a_single_node_job():
    found = seed.one_pod_per_node(cluster(pods=training_pods("rl-training", ["gpu-0"])))
    assert (found.status, found.evidence) == ("skip", "no multi-node training job runs")


def test_pods_of_two_different_jobs_may_share_a_node():
    pods = training_pods("a", ["gpu-0", "gpu-1"], gpus=4) + training_pods("b", ["gpu-0", "gpu-1"], gpus=4)
    assert seed.one_pod_per_node(cluster(pods=pods)).status == "pass"


# --- topology-labels -----------------------------------------------------------------------------


def test_topology_labels_pass_on_a_three_node_pool_with_all_three_layers():
    found = seed.topology_labels(three_node_cluster())
    assert (found.status, found.evidence) == ("pass", "3 GPU nodes of 1 pools with 3+ nodes carry network-node-layer-1, -2 and -3.")


def test_topology_labels_fail_when_one_node_of_a_three_node_pool_lost_its_labels():
    found = seed.topology_labels(cluster(nodes=[node("gpu-0"), node("gpu-1"), node("gpu-2", layers=None)]))
    assert found.status == "fail"
    assert found.evidence == "1 node of pool p5-training without network-node-layer-1, -2, -3 (gpu-2)."
    assert "topology labeler" in found.fix


def test_topology_labels_skip_a_pool_of_a_type_ec2_publishes_no_topology_for():
    nodes = [node(f"g5-{i}", "g5.48xlarge", pool="g5", layers=None, efa=1) for i in range(3)]
    found = seed.topology_labels(cluster(nodes=nodes, pods=[]))
    assert found.status == "skip"
    assert found.evidence == "the pools with 3+ nodes are of types EC2 publishes no topology for: 3 nodes of type g5.48xlarge (g5-0, g5-1, g5-2)."


def test_topology_labels_count_pools_apart():
    nodes = [node("a-0", pool="a"), node("a-1", pool="a"), node("b-0", pool="b", layers=None), node("b-1", pool="b", layers=None)]
    assert seed.topology_labels(cluster(nodes=nodes, pods=[])).status == "skip"


def test_karpenter_nodes_are_a_pool_of_their_own():
    nodes = [node(f"k-{i}", pool=None, karpenter_pool="gpu-training", layers=None if i == 2 else ("x", "y", "z")) for i in range(3)]
    found = seed.topology_labels(cluster(nodes=nodes, pods=[]))
    assert found.status == "fail"
    assert found.evidence == "1 node of Karpenter pool gpu-training without network-node-layer-1, -2, -3 (k-2)."


# --- topology-aware-spread -----------------------------------------------------------------------


def test_topology_aware_spread_passes_with_a_layer_spread_and_the_pods_under_one_block():
    found = seed.topology_aware_spread(three_node_cluster())
    assert found.status == "pass"
    assert found.evidence == f"job training/rl-training-multi: 3 running pods, spread over {LAYER(2)}, under one {LAYER(3)} block (nn-c)."


def test_topology_aware_spread_passes_with_a_kueue_topology_request_instead_of_a_spread():
    snapshot = three_node_cluster(spread_keys=("kubernetes.io/hostname",), topology_request=("preferred", LAYER(3)))
    found = seed.topology_aware_spread(snapshot)
    assert found.status == "pass"
    assert f"Kueue preferred topology {LAYER(3)}" in found.evidence


def test_topology_aware_spread_fails_when_the_spread_constraint_is_stripped():
    found = seed.topology_aware_spread(three_node_cluster(spread_keys=("kubernetes.io/hostname",)))
    assert found.status == "fail"
    assert found.evidence == (
        "1 training job with pods carrying neither a topology spread constraint nor a Kueue topology request over a network-node layer "
        "(training/rl-training-multi)."
    )


def test_topology_aware_spread_fails_when_the_pods_span_two_top_level_blocks():
    nodes = [node("gpu-0", layers=("nn-a", "nn-b", "nn-c")), node("gpu-1", layers=("nn-a", "nn-b", "nn-c")), node("gpu-2", layers=("nn-z", "nn-y", "nn-x"))]
    snapshot = cluster(nodes=nodes, pods=training_pods("rl-training", ["gpu-0", "gpu-1", "gpu-2"]))
    found = seed.topology_aware_spread(snapshot)
    assert found.status == "fail"
    assert found.evidence == f"1 training job spread over {LAYER(2)}, whose pods stand under more than one {LAYER(1)} block (training/rl-training-multi: 2 blocks)."


def test_a_required_kueue_request_fails_when_the_pods_are_not_under_one_block_of_its_layer():
    nodes = [node("gpu-0", layers=("a", "b", "c1")), node("gpu-1", layers=("a", "b", "c1")), node("gpu-2", layers=("a", "b", "c2"))]
    pods = training_pods("rl-training", ["gpu-0", "gpu-1", "gpu-2"], spread_keys=(), topology_request=("required", LAYER(3)))
    found = seed.topology_aware_spread(cluster(nodes=nodes, pods=pods))
    assert found.status == "fail"
    assert found.evidence == f"1 training job with Kueue required topology {LAYER(3)}, whose pods stand under more than one {LAYER(3)} block (training/rl-training-multi: 2 blocks)."


def test_a_preferred_kueue_request_passes_under_one_wider_block():
    nodes = [node("gpu-0", layers=("a", "b", "c1")), node("gpu-1", layers=("a", "b", "c1")), node("gpu-2", layers=("a", "b", "c2"))]
    pods = training_pods("rl-training", ["gpu-0", "gpu-1", "gpu-2"], spread_keys=(), topology_request=("preferred", LAYER(3)))
    found = seed.topology_aware_spread(cluster(nodes=nodes, pods=pods))
    assert found.status == "pass"
    assert f"under one {LAYER(2)} block (b)" in found.evidence


def test_topology_aware_spread_skips_jobs_below_three_nodes():
    found = seed.topology_aware_spread(cluster(pods=training_pods("rl-training", ["gpu-0", "gpu-1"], spread_keys=())))
    assert found.status == "skip"


# --- breakages: each makes its own row fail, and only that row ------------------------------------


def _breakages():
    def taint_removed(s):
        s.nodes[1]["spec"]["taints"] = []

    def gpus_below(s):
        s.nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = "7"

    def pdb_deleted(s):
        s.pod_disruption_budgets.clear()

    def class_deleted(s):
        s.priority_classes.pop()

    def second_pod_on_node(s):
        s.pods[1]["spec"]["nodeName"] = s.pods[0]["spec"]["nodeName"]

    def labels_removed(s):
        for layer in (1, 2, 3):
            del s.nodes[3]["metadata"]["labels"][LAYER(layer)]

    def spread_stripped(s):
        for p in s.pods:
            p["spec"]["topologySpreadConstraints"] = [c for c in p["spec"].get("topologySpreadConstraints", []) if "network-node" not in c["topologyKey"]]

    return [
        ("gpu-taints", taint_removed),
        ("gpu-device-plugin", gpus_below),
        ("pod-disruption-budgets", pdb_deleted),
        ("priority-classes", class_deleted),
        ("one-pod-per-node", second_pod_on_node),
        ("topology-labels", labels_removed),
        ("topology-aware-spread", spread_stripped),
    ]


@pytest.mark.parametrize(("item", "breakage"), _breakages(), ids=[b[0] for b in _breakages()])
def test_each_breakage_fails_its_own_row_and_only_that_row(item, breakage):
    healthy = three_node_cluster()
    assert set(statuses(healthy).values()) == {"pass"}
    broken = copy.deepcopy(healthy)
    breakage(broken)
    assert {i for i, status in statuses(broken).items() if status != "pass"} == {item}
    assert statuses(broken)[item] == "fail"


def test_a_fleets_failures_are_counted_per_reason_naming_the_first_three_in_the_order_people_count():
    nodes = [node(f"gpu-{i}", gpus=7) for i in (10, *range(10))] + [node("gpu-11", gpus=6)]
    found = seed.gpu_device_plugin(cluster(nodes=nodes, pods=[]))
    assert found.evidence == (
        "12 of 12 GPU nodes: 11 nodes of type p5.48xlarge offering 7 nvidia.com/gpu of the type's 8 (gpu-0, gpu-1, gpu-2 and 8 more); "
        "1 node of type p5.48xlarge offering 6 nvidia.com/gpu of the type's 8 (gpu-11)."
    )
