"""The check of a render: schemas, CRDs, chart values and AWS enumerations, one line per failure."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.check.__main__ import main as check_main
from eks_gpu_training.offline.check.helm import unknown_keys
from eks_gpu_training.offline.check.crd import apply_defaults, strict_schema
from eks_gpu_training.offline.check.kubernetes import CustomResourceSchemas
from tests.support.harness import REFERENCE

LABELER = {
    "selector": {"matchLabels": {"app": "labeler"}},
    "template": {
        "metadata": {"labels": {"app": "labeler"}},
        "spec": {"containers": [{"name": "labeler", "image": "labeler:1"}]},
    },
}


def daemonset(name="labeler", spec=None):
    return lambda: k8s.apps.v1.DaemonSet(name, metadata={"name": name, "namespace": "kube-system"}, spec=spec or LABELER)


def with_karpenter_crds(program):
    """``program`` beside Karpenter's CRD chart, whose CRDs the check reads from the render, as the
    API server gets them from that chart."""
    def both():
        k8s.helm.v3.Release("crds", name="karpenter-crd", chart="oci://public.ecr.aws/karpenter/karpenter-crd",
                            version="1.14.1", namespace="kube-system")
        program()

    return both


def node_pool(spec):
    return with_karpenter_crds(lambda: k8s.apiextensions.CustomResource(
        "pool", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "gpu"}, spec=spec
    ))


GOOD_NODE_POOL = {
    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
    "template": {
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}],
        }
    },
}


def test_every_stack_renders_and_passes_the_check(rendered_stack, reference_dir):
    stack, out, _ = rendered_stack
    report = check_render(out)
    assert report.failures == [], stack
    assert report.skipped == [], stack
    # Every object the charts render is checked too (none is skipped, see above).
    chart_files = list((out / "manifests" / "charts").rglob("*.yaml"))
    assert report.checked["chart objects"] == len(chart_files) > 0


def test_a_daemonset_with_an_unknown_field_fails_and_is_named(render_program):
    spec = json.loads(json.dumps(LABELER))
    spec["template"]["spec"]["containers"][0]["imagePullPolciy"] = "Always"
    report = check_render(render_program(daemonset(spec=spec)))
    assert report.failures == [
        "manifests/daemonset_kube-system_labeler.yaml: DaemonSet kube-system/labeler: "
        "spec.template.spec.containers[0]: Additional properties are not allowed ('imagePullPolciy' was unexpected)"
    ]


def test_a_well_formed_daemonset_passes(render_program):
    report = check_render(render_program(daemonset()))
    assert report.ok
    assert report.checked["Kubernetes objects"] == 1


def test_an_object_is_checked_against_the_stacks_kubernetes_version(render_program):
    # ResourceClaim reached resource.k8s.io/v1 in Kubernetes 1.34; 1.33 does not serve it.
    claim = lambda: k8s.apiextensions.CustomResource(  # noqa: E731 - a one-object program
        "claim", api_version="resource.k8s.io/v1", kind="ResourceClaim", metadata={"name": "gpu", "namespace": "ml"},
        spec={"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    )
    assert check_render(render_program(claim, kubernetes_version="1.34")).ok
    failures = check_render(render_program(claim, kubernetes_version="1.33")).failures
    assert failures == ["manifests/resourceclaim_ml_gpu.yaml: ResourceClaim ml/gpu: resource.k8s.io/v1 ResourceClaim is not a kind of Kubernetes 1.33"]


def test_an_unknown_built_in_api_version_fails(render_program):
    program = lambda: k8s.apiextensions.CustomResource(  # noqa: E731 - a one-object program
        "labeler", api_version="apps/v2", kind="DaemonSet", metadata={"name": "labeler", "namespace": "kube-system"},
        spec=LABELER,
    )
    report = check_render(render_program(program))
    assert report.failures == [
        "manifests/daemonset_kube-system_labeler.yaml: DaemonSet kube-system/labeler: apps/v2 DaemonSet is not a kind of Kubernetes 1.34"
    ]


def test_a_nodepool_with_a_bad_enum_fails_and_is_named(render_program):
    spec = json.loads(json.dumps(GOOD_NODE_POOL))
    spec["disruption"]["consolidationPolicy"] = "WhenIdle"
    report = check_render(render_program(node_pool(spec)))
    assert report.failures == [
        "manifests/nodepool_gpu.yaml: NodePool gpu: spec.disruption.consolidationPolicy: "
        "'WhenIdle' is not one of ['WhenEmpty', 'WhenEmptyOrUnderutilized', 'Balanced']"
    ]


def test_a_well_formed_nodepool_passes_its_crd(render_program):
    assert check_render(render_program(node_pool(GOOD_NODE_POOL))).ok


def test_a_nodepool_field_the_crd_does_not_declare_fails(render_program):
    spec = {**GOOD_NODE_POOL, "weigth": 10}
    failures = check_render(render_program(node_pool(spec))).failures
    assert failures == [
        "manifests/nodepool_gpu.yaml: NodePool gpu: spec: Additional properties are not allowed ('weigth' was unexpected)"
    ]


def test_a_namespaced_cluster_scoped_custom_resource_fails(render_program):
    program = with_karpenter_crds(lambda: k8s.apiextensions.CustomResource(
        "pool", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "gpu", "namespace": "karpenter"},
        spec=GOOD_NODE_POOL,
    ))
    assert check_render(render_program(program)).failures == [
        "manifests/nodepool_karpenter_gpu.yaml: NodePool karpenter/gpu: metadata.namespace: NodePool is cluster-scoped; it takes no namespace"
    ]


def test_a_nodepool_selecting_an_instance_type_ec2_lacks_fails(render_program):
    spec = json.loads(json.dumps(GOOD_NODE_POOL))
    spec["template"]["spec"]["requirements"][0]["values"] = ["p5.48xl"]
    assert check_render(render_program(node_pool(spec))).failures == [
        "manifests/nodepool_gpu.yaml: NodePool gpu: spec.template.spec.requirements[0] (node.kubernetes.io/instance-type): "
        "'p5.48xl' is not an EC2 instance type (botocore ec2 InstanceType); did you mean 'p5.48xlarge'?"
    ]


def node_class(spec):
    return with_karpenter_crds(lambda: k8s.apiextensions.CustomResource(
        "class", api_version="karpenter.k8s.aws/v1", kind="EC2NodeClass", metadata={"name": "gpu"}, spec=spec
    ))


GOOD_NODE_CLASS = {
    "role": "KarpenterNodeRole",
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"id": "subnet-0123456789abcdef0"}],
    "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef0"}],
}


def test_a_well_formed_ec2nodeclass_passes_its_crd_and_cel_rules(render_program):
    assert check_render(render_program(node_class(GOOD_NODE_CLASS))).ok


def test_an_ec2nodeclass_breaking_a_cel_rule_fails_and_is_named(render_program):
    spec = {**GOOD_NODE_CLASS, "placementGroupSelector": {"name": "pg", "id": "pg-0123456789abcdef0"}}
    assert check_render(render_program(node_class(spec))).failures == [
        "manifests/ec2nodeclass_gpu.yaml: EC2NodeClass gpu: CEL rule at /spec/placementGroupSelector: "
        "'name' and 'id' are mutually exclusive (BoolType(False))"
    ]


def test_a_cel_rule_cannot_fail_on_a_placeholder(render_program):
    def program():
        group = aws.ec2.SecurityGroup("sg")
        spec = {**GOOD_NODE_CLASS, "securityGroupSelectorTerms": [{"id": group.id}], "amiSelectorTerms": [{"alias": group.id}]}
        node_class(spec)()

    assert check_render(render_program(program)).ok


def test_custom_resources_without_a_crd_are_skipped_and_said_so(render_program):
    program = lambda: k8s.apiextensions.CustomResource(  # noqa: E731 - a one-object program
        "pool", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "gpu"}, spec={"weigth": 1})
    report = check_render(render_program(program))
    assert report.ok
    assert report.skipped == [
        "manifests/nodepool_gpu.yaml: NodePool gpu: no CRD schema for karpenter.sh/v1 NodePool "
        "(not among the CRDs the render holds (its charts' and its own))",
    ]


def test_a_crd_in_the_render_checks_its_own_custom_resources(render_program):
    def program():
        k8s.apiextensions.v1.CustomResourceDefinition(
            "crd",
            metadata={"name": "widgets.example.com"},
            spec={
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "maximum": 3}}}
                                },
                            }
                        },
                    }
                ],
            },
        )
        k8s.apiextensions.CustomResource(
            "widget", api_version="example.com/v1", kind="Widget", metadata={"name": "w", "namespace": "a"}, spec={"size": 4}
        )

    assert check_render(render_program(program)).failures == [
        "manifests/widget_a_w.yaml: Widget a/w: spec.size: 4 is greater than the maximum of 3"
    ]


def test_a_placeholder_is_never_a_type_error(render_program):
    def program():
        group = aws.ec2.PlacementGroup("pg", strategy="cluster")
        spec = json.loads(json.dumps(LABELER))
        container = spec["template"]["spec"]["containers"][0]
        container["ports"] = [{"containerPort": group.id}]
        k8s.apps.v1.DaemonSet("labeler", metadata={"name": "labeler", "namespace": "kube-system"}, spec=spec)

    out = render_program(program)
    assert check_render(out).ok
    assert "<unknown: id of aws:ec2/placementGroup:PlacementGroup pg>" in (
        out / "manifests" / "daemonset_kube-system_labeler.yaml"
    ).read_text()


def release(values, chart="gpu-operator", version="v26.7.0"):
    return lambda: k8s.helm.v3.Release(
        "operator", name="gpu-operator", chart=chart, version=version, namespace="gpu-operator", values=values
    )


def test_a_helm_values_key_the_chart_lacks_fails_and_is_named(render_program):
    report = check_render(render_program(release({"driver": {"enabeld": False}})))
    assert report.failures == [
        "values/operator.yaml: Helm release gpu-operator (chart gpu-operator v26.7.0): driver.enabeld: not declared in "
        "the chart's values.yaml; did you mean 'enabled'? (gpu-operator v26.7.0 values.yaml)"
    ]


def test_subchart_values_are_checked_against_the_subchart(render_program):
    values = {"node-feature-discovery": {"worker": {"tolerations": []}, "wurker": {}}}
    failures = check_render(render_program(release(values))).failures
    assert len(failures) == 1
    assert "node-feature-discovery.wurker: not declared" in failures[0]


def test_helm_values_are_not_checked_when_the_charts_were_not_rendered_and_said_so(render_program):
    report = check_render(render_program(release({"x": 1}, chart="cert-manager", version="v1.18.0"), charts=False))
    assert report.ok
    assert report.skipped == [
        "values/operator.yaml: Helm release gpu-operator (chart cert-manager v1.18.0): the chart's objects were not "
        "rendered, nor its values checked: chart rendering was turned off (--no-charts)",
    ]


def test_an_unpinned_chart_fails(render_program):
    report = check_render(render_program(release({}, version=None)))
    assert report.failures == ["values/operator.yaml: Helm release gpu-operator (chart gpu-operator): the chart version is not pinned"]


def test_the_values_walk_allows_pass_through_keys_and_catches_kind_changes():
    chart = {
        "driver": {"enabled": True},
        "operator": {"affinity": {"nodeAffinity": {"preferred": []}}},
        "podAnnotations": {},
        "daemonsets": {"tolerations": []},
        "mig": {"strategy": "single"},
    }
    fine = {
        "global": {"anything": 1},
        "operator": {"affinity": {"nodeAffinity": {"required": {}}}},
        "podAnnotations": {"a": "b"},
        "daemonsets": {"tolerations": [{"key": "a"}]},
    }
    assert list(unknown_keys(fine, chart)) == []
    assert list(unknown_keys({"driver": {"enabled": "false"}}, chart)) == [
        "driver.enabled: 'false' is a str; the chart's default True is a bool"
    ]
    assert len(list(unknown_keys({"mig": "none"}, chart))) == 1
    assert len(list(unknown_keys({"daemonsets": {"tolerations": {"key": "a"}}}, chart))) == 1


def test_an_aws_enumeration_input_botocore_lacks_fails_and_is_named(render_program):
    def program():
        aws.ec2.PlacementGroup("pg", strategy="clustr")
        aws.ec2.LaunchTemplate("lt", instance_type="p5.48xl", metadata_options={"http_tokens": "requried"})

    failures = check_render(render_program(program)).failures
    assert failures == [
        "resources.json: aws:ec2/launchTemplate:LaunchTemplate lt: instanceType: 'p5.48xl' is not a value of botocore "
        "ec2 InstanceType; did you mean 'p5.48xlarge'?",
        "resources.json: aws:ec2/launchTemplate:LaunchTemplate lt: metadataOptions.httpTokens: 'requried' is not a "
        "value of botocore ec2 LaunchTemplateHttpTokensState; did you mean 'required'?",
        "resources.json: aws:ec2/placementGroup:PlacementGroup pg: strategy: 'clustr' is not a value of botocore "
        "ec2 PlacementStrategy; did you mean 'cluster'?",
    ]


def test_aws_enumerations_are_found_at_any_depth(render_program):
    def program():
        aws.eks.NodeGroup(
            "ng", cluster_name="c", node_role_arn="arn", subnet_ids=["s"], scaling_config={"min_size": 0, "max_size": 1, "desired_size": 0},
            capacity_type="SPOTT", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
        )

    failures = check_render(render_program(program)).failures
    assert [f.split(": ", 2)[2].split(":")[0] for f in failures] == ["capacityType", "taints[0].effect"]


def test_check_command_prints_one_line_per_failure_and_exits_1(render_program, capsys):
    spec = json.loads(json.dumps(LABELER))
    spec["template"]["spec"]["containers"][0]["imagePullPolciy"] = "Always"
    spec["template"]["spec"]["hostNetwrok"] = True

    def program():
        daemonset(spec=spec)()
        aws.ec2.PlacementGroup("pg", strategy="clustr")

    out = render_program(program)
    assert check_main([str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    failures = [line for line in lines if line.startswith("FAIL: ")]
    assert [f.split(": ")[1] for f in failures] == [
        "manifests/daemonset_kube-system_labeler.yaml",
        "manifests/daemonset_kube-system_labeler.yaml",
        "resources.json",
    ]
    assert any("'hostNetwrok' was unexpected" in f for f in failures)
    assert any("'imagePullPolciy' was unexpected" in f for f in failures)
    assert lines[-1] == f"{out}: check: 1 Kubernetes objects, 0 chart objects, 0 Helm releases, 1 AWS resources; 3 failure(s), 0 skipped"


def test_check_command_passes_a_good_render(render_program, capsys):
    out = render_program(daemonset())
    assert check_main([str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    if REFERENCE.is_dir():
        assert lines[-1].endswith("0 failure(s), 0 skipped")
    else:  # a plain clone: the check says what it could not check, and still passes
        assert lines[-1].endswith("0 failure(s), 1 skipped")
        assert lines[0] == (
            "skipped: upstream reference folder absent: custom resources (Karpenter, Kueue) and Helm values keys are not checked"
        )


def test_a_folder_that_is_no_render_fails(tmp_path):
    assert check_render(tmp_path).failures == [f"{tmp_path}: not a render (resources.json missing)"]


def test_strict_crd_schema_refuses_undeclared_fields_unless_it_preserves_them():
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"b": {}}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "size": {"x-kubernetes-int-or-string": True},
            "maybe": {"type": "string", "nullable": True},
        },
    }
    strict = strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["spec"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["free"]
    assert strict["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert strict["properties"]["size"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert strict["properties"]["maybe"]["type"] == ["string", "null"]


def test_crd_defaults_are_applied_before_validation_like_the_api_server():
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "default": {},
                "properties": {"policy": {"type": "string", "default": "WhenEmpty"}, "items": {
                    "type": "array", "items": {"type": "object", "properties": {"n": {"default": 1}}}}},
            }
        },
    }
    assert apply_defaults(schema, {}) == {"spec": {"policy": "WhenEmpty"}}
    assert apply_defaults(schema, {"spec": {"items": [{}]}}) == {"spec": {"items": [{"n": 1}], "policy": "WhenEmpty"}}


def test_reference_crds_are_found_by_group_and_kind(reference_dir):
    crds = CustomResourceSchemas()
    crds.add_files(sorted(reference_dir.glob("*/*.yaml")))
    assert crds.knows("karpenter.sh", "NodePool")
    assert crds.knows("karpenter.k8s.aws", "EC2NodeClass")
    assert not crds.knows("karpenter.sh", "NodeClass")


def test_secret_values_are_not_type_checked_either(render_program):
    def program():
        spec = json.loads(json.dumps(LABELER))
        spec["template"]["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": pulumi.Output.secret("x")}]
        k8s.apps.v1.DaemonSet("labeler", metadata={"name": "labeler", "namespace": "kube-system"}, spec=spec)

    assert check_render(render_program(program)).ok


def test_node_group_update_strategy_and_repair_actions_are_checked_against_botocore(render_program):
    def program():
        aws.eks.NodeGroup(
            "ng", cluster_name="c", node_role_arn="arn", subnet_ids=["s"], scaling_config={"min_size": 0, "max_size": 1, "desired_size": 0},
            update_config={"max_unavailable": 1, "update_strategy": "MINIMUM"},
            node_repair_config={"enabled": True, "node_repair_config_overrides": [{
                "node_monitoring_condition": "AcceleratedHardwareReady", "node_unhealthy_reason": "r",
                "min_repair_wait_time_mins": 5, "repair_action": "Restart",
            }]},
        )

    failures = check_render(render_program(program)).failures
    # The reason "r" is no reason the agent reports either (its reasons ship with the package).
    assert [f.split(": ", 2)[2].split(":")[0] for f in failures] == [
        "nodeRepairConfig.nodeRepairConfigOverrides[0].nodeUnhealthyReason",
        "nodeRepairConfig.nodeRepairConfigOverrides[0].repairAction",
        "updateConfig.updateStrategy",
    ]
