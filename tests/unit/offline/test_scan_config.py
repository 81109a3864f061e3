"""The security scan's configuration: checkov's Kubernetes checks, offline, every skip explained."""

from __future__ import annotations

import re

import pytest
import yaml

from eks_gpu_training.offline.scan import (
    CHARTS_SKIPS,
    Skip,
    all_skips,
    chart_skips,
    failed_checks,
    readme_block,
    unaccepted,
)
from eks_gpu_training.offline.scan import main as scan_main
from tests.support.harness import PROJECT_ROOT

CHECKOV_CONFIG = PROJECT_ROOT / ".checkov.yaml"
WORKLOADS_CONFIG = PROJECT_ROOT / ".checkov-workloads.yaml"
CONFIGS = pytest.mark.parametrize("config", [CHECKOV_CONFIG, WORKLOADS_CONFIG], ids=lambda p: p.name)


def skipped_checks_with_reasons(text: str) -> dict[str, str]:
    """Each ``skip-check`` entry with the comment on its line (empty when it has none)."""
    listed = yaml.safe_load(text).get("skip-check") or []
    reasons = {}
    for check in listed:
        line = next((row for row in text.splitlines() if re.match(rf"^\s*-\s*{re.escape(check)}\b", row)), "")
        reasons[check] = line.partition("#")[2].strip()
    return reasons


@CONFIGS
def test_every_skipped_check_says_why_it_does_not_apply(config):
    reasons = skipped_checks_with_reasons(config.read_text())
    assert [check for check, reason in reasons.items() if len(reason.split()) < 3] == []


def test_the_rule_catches_a_skip_without_a_reason():
    text = "skip-check:\n  - CKV_K8S_8  # a node daemon whose health the kubelet sees anyway\n  - CKV_K8S_9\n"
    assert skipped_checks_with_reasons(text) == {
        "CKV_K8S_8": "a node daemon whose health the kubelet sees anyway",
        "CKV_K8S_9": "",
    }


@CONFIGS
def test_the_scan_runs_kubernetes_checks_offline(config):
    settings = yaml.safe_load(config.read_text())
    assert settings["framework"] == ["kubernetes"]
    assert settings["skip-download"] is True


def test_training_workload_templates_are_left_to_their_own_scan():
    # The platform scan leaves out exactly the files the workload scan is given (.ci/scan-stacks: job_*.yaml).
    skipped, charts = yaml.safe_load(CHECKOV_CONFIG.read_text())["skip-path"]
    assert re.search(skipped, "out/prod/manifests/job_training_rl-training.yaml")
    assert not re.search(skipped, "out/prod/manifests/daemonset_topology-labeler_topology-labeler.yaml")
    # The charts' objects have a scan of their own, with per-object skips.
    assert re.search(charts, "out/prod/manifests/charts/gpu-operator/deployment_gpu-operator_gpu-operator.yaml")
    assert not re.search(charts, "out/prod/manifests/daemonset_topology-labeler_topology-labeler.yaml")
    assert "job_*.yaml" in (PROJECT_ROOT / ".ci" / "scan-stacks").read_text()


def test_the_scanner_version_is_pinned():
    requirements = (PROJECT_ROOT / ".ci" / "scan-requirements.txt").read_text()
    assert re.search(r"^checkov==\d+\.\d+\.\d+$", requirements, re.M)


def test_every_chart_skip_names_one_object_and_says_why():
    skips = chart_skips(PROJECT_ROOT / CHARTS_SKIPS)
    assert skips
    for skip in skips:
        assert re.fullmatch(r"CKV2?_K8S_\d+", skip.check), skip
        # Kind.namespace.name; a Deployment's pod template without a name of its own checkov names
        # after the Deployment and its labels (JobSet's and Trainer's charts).
        assert re.fullmatch(r"[A-Za-z]+\.[a-z0-9-]+\.[a-z0-9.-]+(\.[A-Za-z0-9./_-]+)?", skip.resource), skip
        assert len(skip.reason.split()) >= 8, skip
    assert len({(s.check, s.resource) for s in skips}) == len(skips), "a chart skip is listed twice"


def test_the_chart_scan_fails_a_finding_no_skip_names():
    skips = [Skip("charts", "CKV_K8S_16", "DaemonSet.kube-system.efa", "privileged by design, see the chart")]
    report = {"results": {"failed_checks": [
        {"check_id": "CKV_K8S_16", "resource": "DaemonSet.kube-system.efa", "file_path": "a.yaml"},
        {"check_id": "CKV_K8S_16", "resource": "DaemonSet.kube-system.other", "file_path": "b.yaml"},
        {"check_id": "CKV_K8S_20", "resource": "DaemonSet.kube-system.efa", "file_path": "a.yaml"},
    ]}}
    assert unaccepted(failed_checks(report), skips) == [
        "CKV_K8S_16 DaemonSet.kube-system.other (b.yaml)",
        "CKV_K8S_20 DaemonSet.kube-system.efa (a.yaml)",
    ]
    assert unaccepted(failed_checks(report), [Skip("charts", "CKV_K8S_16", "DaemonSet.kube-system.efa", "")])[0].startswith("CKV_K8S_16")


def test_the_operations_guide_lists_every_skip_with_its_reason():
    guide = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    assert readme_block() in guide, "docs/operations.md scan skips are stale: python -m eks_gpu_training.offline.scan --readme --write"
    assert len(all_skips()) == len(chart_skips(PROJECT_ROOT / CHARTS_SKIPS)) + len(
        skipped_checks_with_reasons(CHECKOV_CONFIG.read_text())) + len(skipped_checks_with_reasons(WORKLOADS_CONFIG.read_text()))


def test_the_ci_scans_the_charts_objects():
    ci = (PROJECT_ROOT / ".ci" / "scan-stacks").read_text()
    assert "--config-file ../../.checkov-charts.yaml -d manifests/charts" in ci
    assert "eks_gpu_training.offline.scan" in ci
    charts_config = yaml.safe_load((PROJECT_ROOT / ".checkov-charts.yaml").read_text())
    assert "skip-check" not in charts_config
    assert "skip-path" not in charts_config
    assert charts_config["output"] == "json"
    assert charts_config["framework"] == ["kubernetes"]


def test_a_graph_checks_pod_is_named_without_its_labels():
    skips = [Skip("charts", "CKV2_K8S_6", "Pod.kube-system.efa", "host network: no NetworkPolicy applies")]
    labelled = {"results": {"failed_checks": [
        {"check_id": "CKV2_K8S_6", "resource": "Pod.kube-system.efa.name-efa.helm.sh/chart-efa-1.0", "file_path": "a"},
        {"check_id": "CKV2_K8S_6", "resource": "Pod.kube-system.efa-other.name-x", "file_path": "b"},
    ]}}
    assert unaccepted(failed_checks(labelled), skips) == ["CKV2_K8S_6 Pod.kube-system.efa-other.name-x (b)"]


def _write(folder, name, document):
    (folder / name).write_text(yaml.safe_dump(document))


def _replicated(name, image):
    return {"name": name, "template": {"metadata": {"labels": {"job": name}}, "spec": {
        "template": {"spec": {"containers": [{"name": name, "image": image}]}}}}}


def test_the_jobs_of_jobsets_and_trainer_runtimes_are_written_for_the_workload_scan(tmp_path):
    manifests, out = tmp_path / "manifests", tmp_path / "workload-jobs"
    manifests.mkdir()
    _write(manifests, "jobset_a_run.yaml", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                            "metadata": {"name": "run", "namespace": "a"},
                                            "spec": {"replicatedJobs": [_replicated("workers", "train:1")]}})
    _write(manifests, "trainingruntime_b_tune.yaml", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "tune", "namespace": "b"},
        "spec": {"template": {"spec": {"replicatedJobs": [_replicated("node", "tune:1")]}}}})
    _write(manifests, "clustertrainingruntime_torch.yaml", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch"},
        "spec": {"template": {"spec": {"replicatedJobs": [_replicated("node", "torch:1")]}}}})
    _write(manifests, "trainjob_c_x.yaml", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                            "metadata": {"name": "x", "namespace": "c"},
                                            "spec": {"runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "torch"}}})
    _write(manifests, "deployment_a_web.yaml", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}})
    (out).mkdir()
    (out / "job_jobset_a_gone.yaml").write_text("stale")

    assert scan_main(["--workload-jobs", str(manifests), str(out)]) == 0
    written = {path.name: yaml.safe_load(path.read_text()) for path in out.iterdir()}
    assert sorted(written) == ["job_clustertrainingruntime_c_torch-node.yaml", "job_jobset_a_run-workers.yaml",
                               "job_trainingruntime_b_tune-node.yaml"]
    job = written["job_jobset_a_run-workers.yaml"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["metadata"] == {"labels": {"job": "workers"}, "name": "run-workers", "namespace": "a"}
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "train:1"
    assert written["job_clustertrainingruntime_c_torch-node.yaml"]["metadata"]["namespace"] == "c"
    assert "--workload-jobs" in (PROJECT_ROOT / ".ci" / "scan-stacks").read_text()
