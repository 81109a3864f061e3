"""Training images: named by digest in the stacks, pulled accordingly, run with the fewest capabilities."""

from __future__ import annotations

import re

import pytest

from eks_gpu_training.workloads.templates import TRAINING_CAPABILITIES, image_pull_policy
from harness import stack_config

DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
JOB = "kubernetes:batch/v1:Job"
RUNTIME_DEFAULT_CAPABILITIES = {
    # containerd's default set (oci.DefaultCapabilities)
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}
POD_SECURITY_BASELINE_ADDABLE = RUNTIME_DEFAULT_CAPABILITIES - {"NET_RAW"}
"""Capabilities the baseline Pod Security Standard lets a container add (kubernetes.io/docs/concepts/security/pod-security-standards/)."""


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_stacks_name_their_training_images_by_digest(stack):
    apps = stack_config(stack)["eks-gpu-training:scheduling"]["trainingApps"]
    assert apps
    assert all(DIGEST.match(app["job"]["image"]) for app in apps)


def test_a_digest_is_pulled_if_absent_and_a_tag_always():
    assert image_pull_policy("repo/image:1.0@sha256:" + "a" * 64) == "IfNotPresent"
    assert image_pull_policy("repo/image:1.0") == "Always"


def test_training_containers_drop_every_capability_but_file_and_process_handling(stack_graph):
    _, graph = stack_graph
    jobs = graph.of_type(JOB)
    assert jobs
    for job in jobs:
        pod = job.inputs["spec"]["template"]["spec"]
        for container in pod["containers"]:
            capabilities = container["securityContext"]["capabilities"]
            assert capabilities["drop"] == ["ALL"]
            assert set(capabilities["add"]) == set(TRAINING_CAPABILITIES)
            assert container["imagePullPolicy"] == "IfNotPresent"


def test_no_network_capability_is_kept_and_baseline_admits_the_rest():
    assert not {c for c in TRAINING_CAPABILITIES if c.startswith("NET_")}
    assert set(TRAINING_CAPABILITIES) <= POD_SECURITY_BASELINE_ADDABLE


def test_training_namespaces_admit_connections_from_their_own_pods_only(stack_graph):
    _, graph = stack_graph
    policies = {p.inputs["metadata"]["namespace"]: p for p in graph.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    for namespace in graph.of_type("kubernetes:core/v1:Namespace"):
        labels = namespace.inputs["metadata"].get("labels") or {}
        if labels.get("pod-security.kubernetes.io/enforce") in ("baseline", "privileged") \
                and labels.get("app.kubernetes.io/part-of") == "eks-gpu-training":
            spec = policies[namespace.inputs["metadata"]["name"]].inputs["spec"]
            if labels.get("app.kubernetes.io/name") == "health-gate":
                # The gate and its check pods listen on nothing: no connection in at all.
                assert spec == {"podSelector": {}, "policyTypes": ["Ingress"]}
            else:
                assert spec == {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}


def test_a_created_cluster_enforces_network_policies(prod_graph):
    cluster = prod_graph.one("eks:index:Cluster")
    assert cluster.inputs["vpcCniOptions"]["enableNetworkPolicy"] is True
