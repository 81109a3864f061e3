"""Kueue's release (``addons/kueue.py``): on system nodes, all-or-nothing admission, its configuration
keys and webhooks, its CRDs for every Kueue kind the stacks make, and its settings' bounds."""

from __future__ import annotations

from typing import Any

import yaml

from eks_gpu_training.addons.kueue import KUEUE_CHART, kueue_manager_config
from eks_gpu_training.config import KueueConfig

from eks_gpu_training.offline.check.kubernetes import CustomResourceSchemas
from eks_gpu_training.platform.loading import parse_platform_args
from eks_gpu_training.workloads.kueue_queues import HELD_LOCAL_QUEUE, LOCAL_QUEUE
from tests.support.builders import kubernetes_objects
from tests.support.kueue_stacks import raw, problems, KUEUE_RELEASE


def test_kueue_runs_on_system_nodes_with_all_or_nothing_admission(prod_graph):
    [release] = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == KUEUE_CHART]
    assert (release.inputs["version"], release.inputs["atomic"]) == ("0.19.2", True)
    manager = release.inputs["values"]["controllerManager"]
    assert manager["nodeSelector"] == {"kubernetes.io/os": "linux", "role": "system"}
    assert manager["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]  # no GPU toleration
    config = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["waitForPodsReady"]["timeout"] == "30m"
    assert config["waitForPodsReady"]["recoveryTimeout"] == "15m"
    # Admissions side by side: each job still waits for its own pods, whose timeout requeues it.
    assert config["waitForPodsReady"]["blockAdmission"] is False
    # prod's rl-training is a Job and its finetune a TrainJob, which Trainer runs as a JobSet.
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]


def test_kueue_objects_wait_for_the_release_that_brings_their_crds(prod_graph):
    [release] = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == KUEUE_CHART]
    kinds = ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue")
    objects = [o for kind in kinds for o in kubernetes_objects(prod_graph, kind)]
    # the topology, a flavor per pool, a ClusterQueue per team, two LocalQueues per namespace
    assert sorted((o.inputs["kind"], o.inputs["metadata"].get("namespace", ""), o.inputs["metadata"]["name"]) for o in objects) == [
        ("ClusterQueue", "", "pretraining"), ("ClusterQueue", "", "research"),
        ("LocalQueue", "research", LOCAL_QUEUE), ("LocalQueue", "research", HELD_LOCAL_QUEUE),
        ("LocalQueue", "training", LOCAL_QUEUE), ("LocalQueue", "training", HELD_LOCAL_QUEUE),
        ("ResourceFlavor", "", "karpenter-gpu-training"), ("ResourceFlavor", "", "p5-training-tas"),
        ("Topology", "", "aws-network"),
    ]
    assert all(prod_graph.depends_on(o, release) for o in objects)
    namespaces = {n.inputs["metadata"]["name"]: n for n in kubernetes_objects(prod_graph, "Namespace")}
    assert all(prod_graph.depends_on(q, namespaces[q.inputs["metadata"]["namespace"]]) for q in kubernetes_objects(prod_graph, "LocalQueue"))
    # Every object that makes pods is created after the LocalQueues, so Kueue's webhook sees it queued.
    made_pods = [r for r in prod_graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") in ("Job", "JobSet", "TrainJob")
                 and r.inputs["metadata"].get("namespace") != "kube-system"]
    assert sorted(r.inputs["kind"] for r in made_pods) == ["Job", "TrainJob"]
    assert all(prod_graph.depends_on(job, q) for job in made_pods for q in kubernetes_objects(prod_graph, "LocalQueue"))


def test_kueue_configuration_keys_are_the_charts(reference_dir):
    """Every key of the generated Configuration appears in the chart's default one (its commented
    example lists waitForPodsReady and resources)."""
    values = yaml.safe_load((reference_dir / "charts" / "kueue-0.19.2" / "values.yaml").read_text())
    default = values["managerConfig"]["controllerManagerConfigYaml"]

    def keys(value: Any, prefix: str = "") -> list[str]:
        if not isinstance(value, dict):
            return []
        return [k for key, sub in value.items() for k in [key, *keys(sub)]]

    generated = kueue_manager_config(KueueConfig(), ["training"])
    assert [k for k in keys(generated) if f"{k}:" not in default] == []
    assert yaml.safe_load(default)["apiVersion"] == generated["apiVersion"]


def test_kueues_webhooks_see_only_the_training_namespaces_and_fail_closed_only_for_jobs(reference_dir):
    """The chart gives every Kueue webhook the configuration's managedJobsNamespaceSelector, and
    fails closed only for the frameworks that are on."""
    template = (reference_dir / "charts" / "kueue-0.19.2" / "templates" / "webhook" / "manifests.yaml").read_text()
    assert template.count("toYaml $managerConfig.managedJobsNamespaceSelector") >= 2
    assert '{{- if has "pod" $integrationsConfig.frameworks }}\n    failurePolicy: Fail\n    {{- else }}\n    failurePolicy: Ignore' in template
    config = kueue_manager_config(KueueConfig(), ["training", "research"])
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["training", "research"]}]
    }
    assert config["integrations"]["frameworks"] == ["batch/job"]


def test_admissions_can_wait_in_single_file_and_a_changed_setting_rolls_kueues_manager(reference_dir):
    """``kueue.blockAdmission: true`` reaches Kueue's configuration; the chart stamps the
    manager's pods with a checksum of that configuration, so ``pulumi up`` of the change restarts
    Kueue's manager with it (a Helm upgrade in place) rather than leaving the old setting running."""
    values = raw()
    values["kueue"]["blockAdmission"] = True
    args = parse_platform_args(values)
    assert args.kueue.block_admission is True
    assert kueue_manager_config(args.kueue, ["training"])["waitForPodsReady"]["blockAdmission"] is True
    assert kueue_manager_config(KueueConfig(), ["training"])["waitForPodsReady"]["blockAdmission"] is False
    manager = (reference_dir / "charts" / "kueue-0.19.2" / "templates" / "manager" / "manager.yaml").read_text()
    assert 'config-checksum: {{ include (print .Template.BasePath "/manager/manager-config.yaml") . | sha256sum }}' in manager


def test_without_training_namespaces_kueue_manages_no_jobs():
    values = raw()
    values["scheduling"]["namespaces"] = []
    values["scheduling"]["trainingApps"] = []
    parse_platform_args(values)
    assert kueue_manager_config(KueueConfig(), [])["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]
    }


def test_every_kueue_kind_the_stacks_make_has_its_crd_in_the_kueue_chart(chart_sources):
    """The stacks' Kueue objects are validated against the CRDs Kueue's chart installs, not skipped:
    the check of each rendered stack (tests/unit/offline/test_check.py) then reports no failure and no skip."""
    from eks_gpu_training.offline.render.charts import locate_release_chart, render_release

    crds = CustomResourceSchemas()
    for path, obj in render_release(KUEUE_RELEASE, *locate_release_chart(KUEUE_RELEASE, chart_sources)).objects:
        if obj["kind"] == "CustomResourceDefinition":
            crds.add(obj, path)
    assert all(crds.knows("kueue.x-k8s.io", kind) for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"))


def test_kueue_settings_are_bounded():
    values = raw()
    values["kueue"].update(topologyLayer=4, podsReadyTimeoutMinutes=0, chartVersion="0.14.0")
    assert sorted(p.split(":")[0] for p in problems(values)) == ["kueue.chartVersion", "kueue.podsReadyTimeoutMinutes", "kueue.topologyLayer"]


def test_rejects_a_training_namespace_named_like_kueues():
    values = raw()
    values["scheduling"]["namespaces"].append({"name": "kueue-system"})
    assert "scheduling.namespaces[1].name: 'kueue-system' is the namespace Kueue creates; choose another name" in problems(values)


def test_kueues_namespace_enforces_the_restricted_pod_security_standard(prod_graph):
    namespace = prod_graph.one("kubernetes:core/v1:Namespace", "gpu-training-kueue-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
