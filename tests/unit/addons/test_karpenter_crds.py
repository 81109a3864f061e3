"""Every generated EC2NodeClass and NodePool against the real Karpenter CRDs of each supported
chart version (1.14.1 from the reference folder, 1.14.3 from its module: ``module_charts``), and the
Helm values against that chart's values.yaml.

Each object is defaulted and validated like the API server does on create: the CRD's
``openAPIV3Schema`` with jsonschema (types, enums, patterns, min/max, required), then every
``x-kubernetes-validations`` CEL rule evaluated with cel-python (see ``crd_check``). The only rules
not evaluated are the three NodePool transition rules that compare with ``oldSelf``
(``nodeClassRef.group`` / ``nodeClassRef.kind`` immutability and the static/dynamic switch): the API
server evaluates them only on update. No CEL rule is checked by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from eks_gpu_training.config import KARPENTER_CHART_VERSIONS, KarpenterGpuNodePoolConfig
from eks_gpu_training.addons.gpu_node_pool import (
    EC2_NODE_CLASS_API_VERSION,
    NODE_POOL_API_VERSION,
    ec2_node_class_spec,
    node_pool_spec,
)
from eks_gpu_training.addons.karpenter import karpenter_values
from eks_gpu_training.offline.check.helm import unknown_keys
from tests.support.crd_check import CrdChecker, crd_schema, plain_numbers
from tests.support.module_charts import KARPENTER_REFERENCE_VERSIONS, karpenter_chart_folder, proxy_or_skip

TRANSITION_RULES = {
    "/spec/template/spec/nodeClassRef: self.group == oldSelf.group",
    "/spec/template/spec/nodeClassRef: self.kind == oldSelf.kind",
    "/spec: has(self.replicas) == has(oldSelf.replicas)",
}


@pytest.fixture(scope="module", params=KARPENTER_CHART_VERSIONS)
def karpenter_chart(request, reference_dir):
    """(version, folder) of the ``karpenter`` chart at each supported version."""
    with proxy_or_skip():
        return request.param, karpenter_chart_folder(reference_dir, "karpenter", request.param)


@pytest.fixture(scope="module")
def node_class_crd(karpenter_chart) -> CrdChecker:
    return CrdChecker(crd_schema(karpenter_chart[1] / "crds" / "karpenter.k8s.aws_ec2nodeclasses.yaml"))


@pytest.fixture(scope="module")
def node_pool_crd(karpenter_chart) -> CrdChecker:
    return CrdChecker(crd_schema(karpenter_chart[1] / "crds" / "karpenter.sh_nodepools.yaml"))


def karpenter_pool(**settings) -> KarpenterGpuNodePoolConfig:
    return KarpenterGpuNodePoolConfig.model_validate({"name": "train", "availabilityZone": "us-west-2a", **settings})


POOLS = {
    "defaults (p5, 32 EFA, created placement group)": (karpenter_pool(), "research-karpenter-train"),
    "p5 only, 32 EFA": (karpenter_pool(instanceTypes=["p5.48xlarge"]), "research-karpenter-train"),
    "reserved capacity in an existing group": (
        karpenter_pool(
            instanceTypes=["p5e.48xlarge"],
            capacityTypes=["on-demand", "reserved"],
            capacityReservationIds=["cr-0123456789abcdef0", "cr-0123456789abcdef1"],
            placementGroup={"mode": "existing", "name": "odcr-pg"},
        ),
        "odcr-pg",
    ),
    "no EFA, no placement group, custom disruption": (
        karpenter_pool(
            instanceTypes=["g6e.xlarge", "g6e.2xlarge"],
            gpuLimit=4,
            placementGroup={"mode": "none"},
            labels={"team": "vision", "example.com/tier": "dev"},
            disruption={
                "consolidateAfter": "1h30m",
                "expireAfter": "720h",
                "budgets": [
                    {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"},
                    {"nodes": "50%", "reasons": ["Empty", "Drifted"]},
                ],
            },
        ),
        None,
    ),
}


def node_class(pool: KarpenterGpuNodePoolConfig, placement_group: str | None) -> dict[str, Any]:
    spec = ec2_node_class_spec(
        pool,
        node_role_name="research-karpenter-node-role-1a2b3c",
        subnet_ids=["subnet-0000000000000000a", "subnet-0000000000000000c"],
        security_group_ids=["sg-0c1a55e7c1a55e7c1"] + (["sg-0efa0efa0efa0efa0"] if pool.efa_enabled else []),
        placement_group_name=placement_group,
        tags={"team": "ml", "Name": "research-gpu"},
    )
    return {"apiVersion": EC2_NODE_CLASS_API_VERSION, "kind": "EC2NodeClass", "metadata": {"name": pool.name}, "spec": spec}


def node_pool(pool: KarpenterGpuNodePoolConfig) -> dict[str, Any]:
    spec = node_pool_spec(pool, node_class_name=pool.name, zones=["us-west-2a"])
    return {"apiVersion": NODE_POOL_API_VERSION, "kind": "NodePool", "metadata": {"name": pool.name}, "spec": spec}


def stack_objects(graph, kind: str) -> list[dict[str, Any]]:
    return [
        {key: r.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}
        for r in graph.resources
        if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind
    ]


def assert_conforms(checker: CrdChecker, obj: dict[str, Any]) -> None:
    report = checker.check(obj)
    assert report.problems == [], report.problems
    assert report.cel_evaluated, "no CEL rule was evaluated"
    assert set(report.cel_skipped) <= TRANSITION_RULES, report.cel_skipped


@pytest.mark.parametrize(("pool", "placement_group"), POOLS.values(), ids=POOLS.keys())
def test_generated_ec2_node_class_conforms_to_the_crd(node_class_crd, pool, placement_group):
    assert_conforms(node_class_crd, node_class(pool, placement_group))


@pytest.mark.parametrize("pool", [p for p, _ in POOLS.values()], ids=POOLS.keys())
def test_generated_node_pool_conforms_to_the_crd(node_pool_crd, pool):
    assert_conforms(node_pool_crd, node_pool(pool))


def test_every_custom_resource_of_both_stacks_conforms(node_class_crd, node_pool_crd, stack_graph):
    stack, graph = stack_graph
    node_classes, node_pools = stack_objects(graph, "EC2NodeClass"), stack_objects(graph, "NodePool")
    assert node_classes, stack
    assert len(node_classes) == len(node_pools), stack
    for obj in node_classes:
        assert_conforms(node_class_crd, obj)
    for obj in node_pools:
        assert_conforms(node_pool_crd, obj)


def test_only_the_update_time_transition_rules_go_unevaluated(node_pool_crd, node_class_crd):
    pool = karpenter_pool()
    assert set(node_pool_crd.check(node_pool(pool)).cel_skipped) == TRANSITION_RULES
    assert node_class_crd.check(node_class(pool, "pg")).cel_skipped == []


BROKEN_NODE_CLASSES = {
    "EFA without a primary interface": (
        lambda spec: spec.update(networkInterfaces=[{"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}]),
        "networkInterfaces must include a primary interface",
    ),
    "two efa-only devices on one card": (
        lambda spec: spec["networkInterfaces"].append({"networkCardIndex": 1, "deviceIndex": 2, "interfaceType": "efa-only"}),
        "at most one efa device per network card",
    ),
    "role and instance profile": (lambda spec: spec.update(instanceProfile="p"), "exactly one of ['role', 'instanceProfile']"),
    "alias without a version": (lambda spec: spec.update(amiSelectorTerms=[{"alias": "al2023"}]), "'alias' is improperly formatted"),
    "placement group by name and id": (
        lambda spec: spec.update(placementGroupSelector={"name": "pg", "id": "pg-0123"}),
        "'name' and 'id' are mutually exclusive",
    ),
    "restricted tag": (lambda spec: spec["tags"].update({"kubernetes.io/cluster/x": "owned"}), "restricted tag matching kubernetes.io/cluster/"),
    "volume size without unit": (lambda spec: spec["blockDeviceMappings"][0]["ebs"].update(volumeSize="500"), "does not match"),
    "unknown volume type": (lambda spec: spec["blockDeviceMappings"][0]["ebs"].update(volumeType="gp4"), "is not one of"),
    "no security group": (lambda spec: spec.pop("securityGroupSelectorTerms"), "'securityGroupSelectorTerms' is a required property"),
}


@pytest.mark.parametrize(("breakage", "expected"), BROKEN_NODE_CLASSES.values(), ids=BROKEN_NODE_CLASSES.keys())
def test_checker_catches_a_broken_ec2_node_class(node_class_crd, breakage, expected):
    obj = node_class(karpenter_pool(), "pg")
    breakage(obj["spec"])
    problems = node_class_crd.check(obj).problems
    assert any(expected in p for p in problems), problems


BROKEN_NODE_POOLS = {
    "consolidateAfter in words": (lambda spec: spec["disruption"].update(consolidateAfter="30 minutes"), "does not match"),
    "unknown consolidation policy": (lambda spec: spec["disruption"].update(consolidationPolicy="Never"), "is not one of"),
    "schedule without duration": (lambda spec: spec["disruption"].update(budgets=[{"nodes": "0", "schedule": "@daily"}]), "'schedule' must be set with 'duration'"),
    "restricted label domain": (lambda spec: spec["template"]["metadata"]["labels"].update({"karpenter.sh/team": "a"}), 'label domain "karpenter.sh" is restricted'),
    "In without values": (lambda spec: spec["template"]["spec"]["requirements"].append({"key": "a", "operator": "In", "values": []}), "must have a value defined"),
    "taint effect in EKS spelling": (lambda spec: spec["template"]["spec"]["taints"][0].update(effect="NO_SCHEDULE"), "is not one of"),
    "no node class": (lambda spec: spec["template"]["spec"].pop("nodeClassRef"), "'nodeClassRef' is a required property"),
}


@pytest.mark.parametrize(("breakage", "expected"), BROKEN_NODE_POOLS.values(), ids=BROKEN_NODE_POOLS.keys())
def test_checker_catches_a_broken_node_pool(node_pool_crd, breakage, expected):
    obj = node_pool(karpenter_pool())
    breakage(obj["spec"])
    problems = node_pool_crd.check(obj).problems
    assert any(expected in p for p in problems), problems


# --- Helm values ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chart_defaults(karpenter_chart) -> dict[str, Any]:
    return yaml.safe_load((karpenter_chart[1] / "values.yaml").read_text())


def test_helm_values_use_only_keys_of_the_charts_values_yaml(chart_defaults):
    values = karpenter_values("research", "https://example.eks.amazonaws.com", "research-queue", {"role": "system"}, region="us-west-2", node_repair=True)
    # Every key is the chart's own, holding the same kind of value as the chart's default (the
    # feature gate a boolean like the chart's): the render check's own walk.
    assert list(unknown_keys(values, chart_defaults)) == []


def test_helm_values_of_both_stacks_use_only_keys_of_the_chart(chart_defaults, stack_graph):
    _, graph = stack_graph
    (release,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "karpenter"]
    values = plain_numbers(release.inputs["values"])
    assert list(unknown_keys(values, chart_defaults)) == []
    assert set(values["settings"]) == {"clusterName", "clusterEndpoint", "interruptionQueue", "featureGates"}


def test_values_check_reports_a_misspelt_key(chart_defaults):
    values = {"settings": {"clusterName": "x", "interruptionQueueName": "q"}, "nodeSelectors": {}}
    assert [line.split(":")[0] for line in unknown_keys(values, chart_defaults)] == ["settings.interruptionQueueName", "nodeSelectors"]


def test_each_supported_chart_runs_the_controller_of_its_own_version(karpenter_chart, chart_defaults):
    version, folder = karpenter_chart
    assert yaml.safe_load((folder / "Chart.yaml").read_text())["version"] == version
    assert chart_defaults["controller"]["image"]["tag"] == version


# --- the charts prepared from the module ---------------------------------------------------------


def _files(folder) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize("name", ["karpenter", "karpenter-crd"])
@pytest.mark.parametrize("version", [v for v in KARPENTER_CHART_VERSIONS if v not in KARPENTER_REFERENCE_VERSIONS])
def test_a_chart_from_the_module_has_the_published_charts_files(reference_dir, name, version):
    # The module zip leaves out charts/karpenter/crds (a link to pkg/apis/crds): filled in from
    # there, the chart holds what the reference's published chart holds, CRDs included.
    reference = reference_dir / "charts" / f"{name}-{KARPENTER_REFERENCE_VERSIONS[0]}"
    with proxy_or_skip():
        prepared = karpenter_chart_folder(reference_dir, name, version)
        crd_chart = karpenter_chart_folder(reference_dir, "karpenter-crd", version)
    assert _files(prepared) == _files(reference)
    if name == "karpenter":
        # The same CRDs as the CRD chart's templates, which are copies of them with annotations added.
        assert {path.name for path in (prepared / "crds").iterdir()} == {path.name for path in (crd_chart / "templates").iterdir()}


@pytest.mark.parametrize("version", [v for v in KARPENTER_CHART_VERSIONS if v not in KARPENTER_REFERENCE_VERSIONS])
def test_a_chart_from_the_module_names_its_release_image_by_tag_not_the_tags_old_digest(reference_dir, version):
    # The tag's values.yaml holds the previous release's image (1.13.0 and its digest); the release
    # sets the pushed image's, whose digest no source records, so the prepared chart names the tag.
    with proxy_or_skip():
        karpenter_chart_folder(reference_dir, "karpenter-crd", version)
        values = yaml.safe_load((karpenter_chart_folder(reference_dir, "karpenter", version) / "values.yaml").read_text())
    assert values["controller"]["image"] == {"repository": "public.ecr.aws/karpenter/controller", "tag": version, "digest": ""}
