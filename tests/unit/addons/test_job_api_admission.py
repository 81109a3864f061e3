"""The admission policies that fence the JobSet and Kubeflow Trainer controllers: their manifests
against the Kubernetes OpenAPI schema, the names they fence against the charts' own, and the
stacks' training namespaces in them. What they allow and deny is the API server's verdict, in the
cluster tier (``tests/cluster/test_controller_fences.py``)."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from eks_gpu_training.facts import yaml_io
from eks_gpu_training.addons import job_apis
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS
from eks_gpu_training.verify.stack import load_stack_args

NAMESPACES = ["training", "research"]


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_fences_and_their_bindings_pass_the_kubernetes_schema(version):
    for manifest in (*job_apis.jobset_fence_manifests(NAMESPACES), *job_apis.trainer_fence_manifests(NAMESPACES)):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version


def test_each_fence_judges_only_its_controllers_service_account_and_denies():
    for (policy, binding), user in (
        (job_apis.jobset_fence_manifests(NAMESPACES), "system:serviceaccount:jobset-system:jobset-controller"),
        (job_apis.trainer_fence_manifests(NAMESPACES),
         "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"),
    ):
        assert policy["spec"]["matchConditions"] == [{"name": "is-the-controller",
                                                      "expression": f"request.userInfo.username == '{user}'"}]
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_fences_name_the_training_namespaces_sorted():
    policy, _ = job_apis.jobset_fence_manifests(NAMESPACES)
    assert '["research", "training"]' in policy["spec"]["validations"][0]["expression"]
    assert policy["spec"]["validations"][0]["message"].endswith("training namespaces (research, training)")


def _chart_objects(out: Path, chart: str) -> list[dict]:
    return [yaml_io.load(path.read_text()) for path in sorted((out / "manifests" / "charts" / chart).glob("*.yaml"))]


def test_the_fenced_names_are_the_charts_own(rendered_stack):
    """The ServiceAccount each controller's Deployment runs as and its webhook configurations, as the
    pinned charts render them, are those the fences name."""
    stack, out, _ = rendered_stack
    for chart, namespace, account, webhooks in (
        ("jobset", job_apis.JOBSET_NAMESPACE, job_apis.JOBSET_SERVICE_ACCOUNT, job_apis.JOBSET_WEBHOOK_CONFIGURATIONS),
        ("kubeflow-trainer", job_apis.TRAINER_NAMESPACE, job_apis.TRAINER_SERVICE_ACCOUNT, job_apis.TRAINER_WEBHOOK_CONFIGURATIONS),
    ):
        if not (out / "manifests" / "charts" / chart).is_dir():
            continue
        objects = _chart_objects(out, chart)
        [deployment] = [o for o in objects if o["kind"] == "Deployment"]
        assert deployment["metadata"]["namespace"] == namespace
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account, (stack, chart)
        assert sorted(o["metadata"]["name"] for o in objects if o["kind"].endswith("WebhookConfiguration")) == sorted(webhooks)


def test_each_stack_fences_the_controllers_it_installs_with_its_training_namespaces(rendered_stack):
    stack, out, _ = rendered_stack
    namespaces = sorted(ns.name for ns in load_stack_args(stack).scheduling.namespaces)
    for chart, fence in (("jobset", job_apis.JOBSET_FENCE), ("kubeflow-trainer", job_apis.TRAINER_FENCE)):
        installed = (out / "manifests" / "charts" / chart).is_dir()
        # Server-side applies (retained, taken over when a kind comes back): in patches/.
        policy_file = out / "patches" / f"validatingadmissionpolicy_{fence}.yaml"
        assert policy_file.is_file() == installed, (stack, chart)
        assert (out / "patches" / f"validatingadmissionpolicybinding_{fence}.yaml").is_file() == installed
        if installed:
            policy = yaml_io.load(policy_file.read_text())
            rule = next(v for v in policy["spec"]["validations"] if "training namespaces" in v["message"])
            assert rule["message"].endswith(f"training namespaces ({', '.join(namespaces)})"), (stack, rule)
