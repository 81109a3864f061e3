"""Training images: named by tag in the stacks (a lock pins the digest), pulled accordingly, run with the fewest capabilities."""

from __future__ import annotations

import re

import pytest

from eks_gpu_training.config.team_settings import TeamConfig, team_gid
from eks_gpu_training.workloads.templates import TRAINING_CAPABILITIES, image_pull_policy, training_pod_template
from tests.support.builders import p5_job
from tests.support.harness import run_program, stack_config

TAGGED = re.compile(r"^[^@\s]+:(?!latest$)[\w][\w.-]*$")
JOB = "kubernetes:batch/v1:Job"
RUNTIME_DEFAULT_CAPABILITIES = {
    # containerd's default set (oci.DefaultCapabilities)
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}
POD_SECURITY_BASELINE_ADDABLE = RUNTIME_DEFAULT_CAPABILITIES - {"NET_RAW"}
"""Capabilities the baseline Pod Security Standard lets a container add (kubernetes.io/docs/concepts/security/pod-security-standards/)."""


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_stacks_name_their_training_images_by_a_release_tag_and_no_digest_nobody_resolved(stack):
    """A team's images.lock pins them to the digest its registry serves (tests/unit/offline/test_lock_images.py)."""
    apps = stack_config(stack)["eks-gpu-training:scheduling"]["trainingApps"]
    assert apps
    assert all(TAGGED.match(app["job"]["image"]) for app in apps)


def test_a_digest_is_pulled_if_absent_and_a_tag_always():
    assert image_pull_policy("repo/image:1.0@sha256:" + "a" * 64) == "IfNotPresent"
    assert image_pull_policy("repo/image:1.0") == "Always"


def test_an_image_built_in_the_same_program_gets_its_pull_policy_once_its_name_is_known():
    import pulumi

    from eks_gpu_training import TrainingJob, TrainingJobArgs

    built = pulumi.Output.from_input("repo/image:1.0@sha256:" + "a" * 64)
    graph = run_program(lambda: TrainingJob("rl", TrainingJobArgs(job=p5_job(image=built))))
    assert graph.error is None, graph.error
    (job,) = graph.of_type(JOB)
    (container,) = job.inputs["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == ("repo/image:1.0@sha256:" + "a" * 64, "IfNotPresent")


def test_team_training_containers_run_as_their_team_and_hold_no_capability(stack_graph):
    stack, graph = stack_graph
    teams = {ns: team["name"] for team in stack_config(stack)["eks-gpu-training:scheduling"]["teams"] for ns in team["namespaces"]}
    jobs = [job for job in graph.of_type(JOB) if job.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "training"]
    assert jobs
    for job in jobs:
        pod = job.inputs["spec"]["template"]["spec"]
        gid = team_gid(TeamConfig(name=teams[job.inputs["metadata"]["namespace"]], namespaces=["x"]))
        assert pod["securityContext"] == {
            "seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True, "runAsUser": gid, "runAsGroup": gid, "fsGroup": gid}
        for container in pod["containers"]:
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_training_containers_outside_teams_drop_every_capability_but_file_and_process_handling():
    pod = training_pod_template(p5_job())["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": list(TRAINING_CAPABILITIES)}


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
