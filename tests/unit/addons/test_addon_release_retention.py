"""What removing Karpenter or a pool does to its nodes, and how every Helm release fails: the
options the program registers under the mock engine, checked against the upstream charts."""

from __future__ import annotations

import pytest
import yaml

from eks_gpu_training.addons import efa_device_plugin, gpu_operator, job_apis, karpenter, kueue
from eks_gpu_training.aws.pool_network import deletion_options
from eks_gpu_training.config import KARPENTER_CHART_VERSIONS, KarpenterConfig
from tests.support.harness import run_main, run_program, stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
KARPENTER_CONFIG = "eks-gpu-training:karpenter"

EXPECTED_TIMEOUTS = {
    "karpenter-crd": karpenter.CRD_RELEASE_TIMEOUT_SECONDS,
    "karpenter": karpenter.CONTROLLER_RELEASE_TIMEOUT_SECONDS,
    "gpu-operator": gpu_operator.RELEASE_TIMEOUT_SECONDS,
    "aws-efa-k8s-device-plugin": efa_device_plugin.RELEASE_TIMEOUT_SECONDS,
    "kueue": kueue.KUEUE_RELEASE_TIMEOUT_SECONDS,
    "jobset": job_apis.RELEASE_TIMEOUT_SECONDS,
    "kubeflow-trainer": job_apis.RELEASE_TIMEOUT_SECONDS,
}


def release(graph, name: str):
    (found,) = [r for r in graph.of_type(RELEASE) if r.inputs["name"] == name]
    return found


# --- removing Karpenter or a pool ----------------------------------------------------------------


def test_retention_is_the_default_so_removal_never_takes_gpu_nodes_unasked():
    assert KarpenterConfig().retain_on_removal is True


def test_prod_node_pools_and_node_classes_are_retained_when_removed_from_the_program(prod_graph):
    objects = [*prod_graph.of_type(NODE_POOL), *prod_graph.of_type(NODE_CLASS)]
    assert objects
    assert [r.name for r in objects if not r.retain_on_delete] == []


WHAT_RETAINED_NODES_RUN_ON = {
    "aws:iam/role:Role": "karpenter-node-role",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "gpu-training-karpenter-AmazonE",
    "aws:eks/accessEntry:AccessEntry": "karpenter-node-access-entry",
    "aws:ec2/securityGroup:SecurityGroup": "-efa",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "-efa-ingress-self",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "-efa-egress-self",
    "aws:ec2/placementGroup:PlacementGroup": "placement-group",
}
"""What a Karpenter node keeps running on after its pool is removed: its kubelet authenticates with
the node role (policies, access entry), its interfaces sit in the EFA group, it runs in the
placement group."""


def karpenter_node_dependencies(graph):
    """The Karpenter component's node role pieces and every Karpenter pool's AWS resources."""
    roots = [r for r in graph.resources if r.type in ("eks-gpu-training:index:Karpenter", "eks-gpu-training:index:GpuNodePool")]
    found = []
    for root in roots:
        for resource in graph.subtree(root).resources:
            pattern = WHAT_RETAINED_NODES_RUN_ON.get(resource.type)
            if pattern is not None and pattern in resource.name and "controller" not in resource.name:
                found.append(resource)
    return found


def test_a_removed_pool_keeps_what_its_retained_nodes_run_on(prod_graph):
    kept = karpenter_node_dependencies(prod_graph)
    assert {r.type for r in kept} == set(WHAT_RETAINED_NODES_RUN_ON)
    assert [r.name for r in kept if not r.retain_on_delete] == []


def test_no_resource_of_the_protected_prod_stack_is_both_retained_and_protected(prod_graph):
    # Pulumi refuses to delete a protected resource before it looks at retainOnDelete, so a resource
    # that is both could never leave the stack: removing a Karpenter pool would fail in prod.
    assert any(r.protect for r in prod_graph.resources)
    retained = [r for r in prod_graph.resources if r.retain_on_delete]
    assert {r.type for r in retained} >= set(WHAT_RETAINED_NODES_RUN_ON)
    assert [f"{r.type} {r.name}" for r in retained if r.protect] == []


def test_a_retained_resource_is_never_protected_and_never_inherits_protection():
    assert deletion_options(protect=True, retain_on_delete=True) == {"protect": False, "retain_on_delete": True}
    assert deletion_options(protect=True, retain_on_delete=False) == {"protect": True, "retain_on_delete": False}
    assert deletion_options(protect=False, retain_on_delete=False) == {"protect": False, "retain_on_delete": False}


def test_a_protected_stack_still_protects_what_it_does_not_retain(prod_graph):
    managed_group = prod_graph.one("aws:ec2/placementGroup:PlacementGroup", "gpu-training-p5-training-placement-group")
    assert (managed_group.protect, managed_group.retain_on_delete) == (True, False)
    config = stack_config("prod")
    config[KARPENTER_CONFIG] = {**config[KARPENTER_CONFIG], "retainOnRemoval": False}
    graph = run_main(config)
    assert graph.error is None, graph.error
    karpenter_group = graph.one("aws:ec2/placementGroup:PlacementGroup", "gpu-training-karpenter-gpu-training-placement-group")
    assert (karpenter_group.protect, karpenter_group.retain_on_delete) == (True, False)


def test_opting_out_of_retention_deletes_the_node_role_groups_and_placement_groups_too():
    config = stack_config("prod")
    config[KARPENTER_CONFIG] = {**config[KARPENTER_CONFIG], "retainOnRemoval": False}
    graph = run_main(config)
    assert graph.error is None, graph.error
    kept = karpenter_node_dependencies(graph)
    assert kept
    assert not any(r.retain_on_delete for r in kept)


def readded(stack: str, **settings):
    """The stack with its Karpenter pools added back after a retained removal, the documented way."""
    config = stack_config(stack)
    pools = [{**pool, "adoptRetained": True, **settings} for pool in config[KARPENTER_CONFIG]["gpuNodePools"]]
    config[KARPENTER_CONFIG] = {**config[KARPENTER_CONFIG], "gpuNodePools": pools}
    return run_main(config)


def test_a_pool_added_back_takes_over_its_retained_placement_group_node_class_and_node_pool(prod_graph):
    graph = readded("prod")
    assert graph.error is None, graph.error
    group = graph.one("aws:ec2/placementGroup:PlacementGroup", "gpu-training-karpenter-gpu-training-placement-group")
    # The retained group's fixed name, which a create would clash with (InvalidPlacementGroup.Duplicate).
    assert group.import_id == group.inputs["name"] == "gpu-training-prod-karpenter-gpu-training"
    assert (graph.one(NODE_CLASS).import_id, graph.one(NODE_POOL).import_id) == ("gpu-training", "gpu-training")
    # The same specs as before the removal: the kept nodes stay in their placement group, nothing drifts.
    for kind in (NODE_CLASS, NODE_POOL):
        assert graph.one(kind).inputs["spec"] == prod_graph.one(kind).inputs["spec"], kind


def test_a_pool_created_anew_imports_nothing(stack_graph):
    _, graph = stack_graph
    assert [r.name for r in graph.resources if r.import_id] == []


def test_a_pool_added_back_without_a_created_group_takes_over_only_its_custom_resources():
    graph = readded("dev")
    assert graph.error is None, graph.error
    assert graph.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    assert {r.type: r.import_id for r in graph.resources if r.import_id} == {NODE_CLASS: "gpu-training", NODE_POOL: "gpu-training"}


def test_adopting_a_group_needs_the_cluster_name_known_before_deployment():
    import pulumi

    from eks_gpu_training import ClusterRef, ConfigError, GpuNodePool, GpuNodePoolArgs
    from eks_gpu_training.config import KarpenterGpuNodePoolConfig
    from tests.support.harness import stand_in_ref, two_az_network

    def program():
        ref = stand_in_ref()
        ref = ClusterRef(**{**ref.__dict__, "name": pulumi.Output.from_input("research")})
        pool = KarpenterGpuNodePoolConfig.model_validate({"name": "burst", "availabilityZone": "us-west-2a", "adoptRetained": True})
        GpuNodePool("k-burst", GpuNodePoolArgs(cluster=ref, pool=pool, network=two_az_network(), node_role_name="node",
                                                karpenter_release=None))  # type: ignore[arg-type]

    graph = run_program(program)
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["GpuNodePool(k-burst).pool.adoptRetained"]
    assert graph.resources == []


def test_karpenter_launches_nodes_only_once_their_role_can_join(prod_graph):
    node_class = prod_graph.one(NODE_CLASS)
    role_pieces = [r for r in karpenter_node_dependencies(prod_graph) if r.type in (
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:eks/accessEntry:AccessEntry")]
    assert role_pieces
    assert all(prod_graph.depends_on(node_class, r) for r in role_pieces)


def test_karpenter_crds_carry_helms_keep_policy_so_uninstalling_the_release_keeps_them(prod_graph):
    assert release(prod_graph, "karpenter-crd").inputs["values"] == {"additionalAnnotations": {"helm.sh/resource-policy": "keep"}}


@pytest.mark.parametrize("version", KARPENTER_CHART_VERSIONS)
def test_the_crd_charts_templates_put_additional_annotations_on_the_nodepool_and_nodeclaim_crds(reference_dir, version):
    from tests.support.module_charts import karpenter_chart_folder, proxy_or_skip

    with proxy_or_skip():
        chart = karpenter_chart_folder(reference_dir, "karpenter-crd", version)
    assert yaml.safe_load((chart / "values.yaml").read_text()) == {"additionalAnnotations": {}}
    for crd in ("karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"):
        assert "{{- with .Values.additionalAnnotations }}" in (chart / "templates" / crd).read_text(), crd


def test_dev_ships_without_retention_so_removal_deletes_the_pools_and_the_crds(dev_graph):
    assert stack_config("dev")[KARPENTER_CONFIG]["retainOnRemoval"] is False
    pools = [*dev_graph.of_type(NODE_POOL), *dev_graph.of_type(NODE_CLASS)]
    assert pools
    assert not any(r.retain_on_delete for r in pools)
    assert release(dev_graph, "karpenter-crd").inputs.get("values", {}) == {}


def test_destroy_deletes_the_node_pools_before_the_controller_and_the_network_they_need(dev_graph):
    # Pulumi deletes a resource before what it depends on, so the NodePool and its EC2NodeClass go
    # while the controller runs (Karpenter drains and terminates their nodes, and the Kubernetes
    # provider waits for the objects to be gone), before the release, the CRDs and the subnets.
    controller = release(dev_graph, "karpenter")
    node_class, node_pool = dev_graph.one(NODE_CLASS), dev_graph.one(NODE_POOL)
    assert dev_graph.depends_on(node_pool, controller)
    assert dev_graph.depends_on(node_pool, node_class)
    assert dev_graph.depends_on(node_class, controller)
    assert dev_graph.depends_on(controller, release(dev_graph, "karpenter-crd"))
    private_subnets = [r for r in dev_graph.of_type("aws:ec2/subnet:Subnet") if "private" in r.name]
    assert private_subnets
    assert all(dev_graph.depends_on(node_class, subnet) for subnet in private_subnets)


# --- every Helm release --------------------------------------------------------------------------


def test_every_release_is_atomic_cleans_up_on_failure_and_has_its_own_timeout(stack_graph):
    _, graph = stack_graph
    releases = graph.of_type(RELEASE)
    assert {r.inputs["name"] for r in releases} <= set(EXPECTED_TIMEOUTS)
    for found in releases:
        name = found.inputs["name"]
        assert (found.inputs.get("atomic"), found.inputs.get("cleanupOnFail")) == (True, True), name
        assert found.inputs.get("timeout") == EXPECTED_TIMEOUTS[name], name


def test_release_timeouts_fit_what_each_release_waits_for():
    # CRDs are established in seconds; the controller waits for system nodes only; the EFA plugin
    # and the GPU Operator's NFD worker wait for GPU nodes that join while Helm waits.
    assert karpenter.CRD_RELEASE_TIMEOUT_SECONDS < karpenter.CONTROLLER_RELEASE_TIMEOUT_SECONDS
    assert karpenter.CONTROLLER_RELEASE_TIMEOUT_SECONDS < efa_device_plugin.RELEASE_TIMEOUT_SECONDS
    assert efa_device_plugin.RELEASE_TIMEOUT_SECONDS <= gpu_operator.RELEASE_TIMEOUT_SECONDS
    # Kueue's controllers, like Karpenter's, wait for system nodes only.
    assert kueue.KUEUE_RELEASE_TIMEOUT_SECONDS == karpenter.CONTROLLER_RELEASE_TIMEOUT_SECONDS
    # So do JobSet's and Trainer's.
    assert job_apis.RELEASE_TIMEOUT_SECONDS == karpenter.CONTROLLER_RELEASE_TIMEOUT_SECONDS
