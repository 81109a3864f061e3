"""The health gate as the stacks deploy it: the startup taint on every GPU pool, the gate's settings,
check pod, least-privilege RBAC and admission policy, and the refusals of its configuration.
Whether the taint keeps a training pod off a node is the scheduler's verdict
(``tests/cluster/test_node_faults.py``); whether the policy holds the gate to its own taints and
condition, the API server's (``tests/cluster/test_health_gate.py``)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.builders import problems_of
from eks_gpu_training.config import HealthGateConfig, validate_health_gate
from eks_gpu_training.facts.gpu_nodes import gpu_daemon_tolerations, gpu_toleration
from eks_gpu_training.healthgate.gate_loop import DEFAULT_INTERVAL_SECONDS, HEARTBEAT_MAX_AGE_SECONDS, IDLE_SECONDS
from eks_gpu_training.healthgate.node_check import check_job
from eks_gpu_training.healthgate.gate_settings import GateSettings, PoolDevices
from eks_gpu_training.workloads.health_gate import check_pod
from tests.support.harness import run_main, stack_config

COMPONENT = "eks-gpu-training:index:HealthGate"
STARTUP = {"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}


def gate_settings(graph) -> GateSettings:
    (config_map,) = [r for r in graph.subtree(graph.one(COMPONENT)).of_type("kubernetes:core/v1:ConfigMap")]
    return GateSettings.from_json(config_map.inputs["data"]["gate.json"])


def test_every_managed_and_karpenter_gpu_pool_of_prod_joins_with_the_startup_taint(prod_graph):
    (gpu_group,) = [r for r in prod_graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")]
    assert {"key": "eks-gpu-training/unverified", "effect": "NO_SCHEDULE"} in gpu_group.inputs["taints"]
    pools = [r for r in prod_graph.resources if r.inputs.get("kind") == "NodePool"]
    assert pools
    for pool in pools:
        template = pool.inputs["spec"]["template"]["spec"]
        assert template["startupTaints"] == [STARTUP]
        # The GPU taint stays a taint: only the startup taint is lifted.
        assert template["taints"][0]["key"] == "nvidia.com/gpu"


def test_without_the_gate_no_pool_carries_the_startup_taint():
    config = stack_config("prod")
    config["eks-gpu-training:healthGate"] = {"enabled": False}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    assert graph.of_type(COMPONENT) == []
    (gpu_group,) = [r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs.get("taints")]
    assert [t["key"] for t in gpu_group.inputs["taints"]] == ["nvidia.com/gpu"]
    assert all("startupTaints" not in r.inputs["spec"]["template"]["spec"] for r in graph.resources if r.inputs.get("kind") == "NodePool")


def test_prods_gate_knows_each_pools_gpus_and_efa_devices_and_hands_karpenter_nodes_back(prod_graph):
    settings = gate_settings(prod_graph)
    assert settings.pools["p5-training"] == PoolDevices(gpus=8, efa=32)
    assert set(settings.karpenter_pools) <= set(settings.pools)
    assert settings.karpenter_pools
    assert settings.check_seconds == 20 * 60
    assert settings.quarantine is True
    assert settings.quarantine_ignored_reasons == ("DCGMError",)


def test_prods_check_pod_counts_efa_devices_loops_back_over_efa_and_runs_dcgm_level_2(prod_graph):
    pod = gate_settings(prod_graph).check_pod["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["efa", "efa-loopback"]
    (dcgm,) = pod["containers"]
    assert "dcgmi diag -r 2" in dcgm["command"][-1]
    assert pod["tolerations"] == [gpu_toleration(), {"key": "eks-gpu-training/unverified", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["automountServiceAccountToken"] is False


def test_a_check_job_is_pinned_to_its_node_and_asks_for_every_gpu_and_efa_device_of_its_pool():
    pod = check_pod("registry.example/health-gate@sha256:" + "a" * 64, HealthGateConfig(enabled=True, efa_loopback_image="r.example/nccl:1"))
    job = check_job(pod, "health-gate", "p5-training-0", "uid-1", PoolDevices(gpus=8, efa=32), 1200)
    spec = job["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["p5-training-0"]}]}]
    efa, loopback = spec["initContainers"]
    assert efa["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert {"name": "EXPECTED_EFA_DEVICES", "value": "32"} in efa["env"]
    assert loopback["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 1200)


def test_a_pool_without_efa_is_checked_by_dcgm_alone(dev_graph):
    settings = gate_settings(dev_graph)
    assert all(devices.efa == 0 for devices in settings.pools.values())
    job = check_job(settings.check_pod, settings.namespace, "dev-gpu-0", "uid", PoolDevices(gpus=1, efa=0), 600)
    assert "initContainers" not in job["spec"]["template"]["spec"]
    assert [c["name"] for c in job["spec"]["template"]["spec"]["containers"]] == ["dcgm"]


def test_the_gate_may_patch_nodes_and_their_status_delete_nodeclaims_and_run_jobs_in_its_namespace_only(prod_graph):
    gate = prod_graph.subtree(prod_graph.one(COMPONENT))
    (cluster_role,) = gate.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert cluster_role.inputs["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list", "watch", "delete"]},
    ]
    (role,) = gate.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
    assert role.inputs["metadata"]["namespace"] == "health-gate"
    assert {verb for rule in role.inputs["rules"] for verb in rule["verbs"]} == {"create", "list", "watch", "delete", "get"}
    # Its settings' ConfigMap alone, by name, read and watched.
    assert {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["health-gate"], "verbs": ["get", "watch"]} in role.inputs["rules"]
    (policy,) = gate.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    assert policy.inputs["spec"]["matchConditions"] == [
        {"name": "is-the-health-gate", "expression": "request.userInfo.username == 'system:serviceaccount:health-gate:health-gate'"}]
    (deployment,) = gate.of_type("kubernetes:apps/v1:Deployment")
    assert gate.depends_on(deployment, gate.one("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"))
    container = deployment.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Bounded on the system node it shares with the other controllers (checkov CKV_K8S_11, CKV_K8S_13).
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    # A change to the template (its image, its limits) recreates the one gate: the old pod is gone
    # before the new one starts, so two gates never act on one node (kubernetes.io/docs/concepts/
    # workloads/controllers/deployment/#recreate-deployment). Running jobs are not the gate's pods.
    # Rounds come at least every IDLE_SECONDS and the interval, well inside the probe's heartbeat age.
    probe = container["livenessProbe"]["exec"]["command"][-1]
    assert f"> {HEARTBEAT_MAX_AGE_SECONDS})" in probe
    assert IDLE_SECONDS + DEFAULT_INTERVAL_SECONDS + container["livenessProbe"]["periodSeconds"] < HEARTBEAT_MAX_AGE_SECONDS
    assert deployment.inputs["spec"]["replicas"] == 1
    assert deployment.inputs["spec"]["strategy"] == {"type": "Recreate"}


def test_the_gpu_daemons_tolerate_the_gates_taints_and_training_pods_do_not(prod_graph):
    (operator,) = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "gpu-operator"]
    assert operator.inputs["values"]["daemonsets"]["tolerations"] == gpu_daemon_tolerations()
    for job in [r for r in prod_graph.resources if r.inputs.get("kind") == "Job" and r.inputs["metadata"].get("namespace") != "health-gate"]:
        keys = {t["key"] for t in job.inputs["spec"]["template"]["spec"].get("tolerations") or []}
        assert not keys & {"eks-gpu-training/unverified", "eks-gpu-training/unhealthy"}, job.name


@pytest.mark.parametrize(("level", "shortest"), [(1, 5), (2, 10), (3, 30), (4, 120)])
def test_a_check_deadline_shorter_than_the_dcgm_level_takes_is_refused(level, shortest):
    config = HealthGateConfig(enabled=True, dcgm_level=level, timeout_minutes=shortest - 1 if shortest > 5 else 5)
    problems = validate_health_gate(config)
    if shortest > 5:
        assert [p.path for p in problems] == ["healthGate.timeoutMinutes"]
        assert f"allow at least {shortest} minutes" in problems[0].message
    else:
        assert problems == []
    assert validate_health_gate(config.model_copy(update={"timeout_minutes": shortest})) == []


def test_a_dcgm_level_dcgmi_does_not_have_is_refused_with_its_key_path():
    problems = problems_of(lambda config: config.update({"healthGate": {"enabled": True, "dcgmLevel": 5}}))
    assert any(p.startswith("healthGate.dcgmLevel") for p in problems), problems


def test_the_in_cluster_half_refuses_the_gate_since_it_makes_no_node_group():
    config = stack_config("dev")
    config["eks-gpu-training:inCluster"] = {"enabled": True, "kubeconfig": "/home/ml/.kube/config"}
    graph = run_main(config)
    assert graph.resources == []
    assert "healthGate.enabled" in [p.path for p in graph.error.problems]


def test_kueue_replaces_a_failed_node_or_requeues_at_once_unless_the_stack_turns_it_off(prod_graph):
    (release,) = [r for r in prod_graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    assert release.inputs["values"]["controllerManager"]["featureGates"] == [
        {"name": "TASFailedNodeReplacement", "enabled": True}, {"name": "TASFailedNodeReplacementFailFast", "enabled": True},
        {"name": "TASReplaceNodeOnPodTermination", "enabled": True}, {"name": "FailureRecoveryPolicy", "enabled": True}]
    config = stack_config("prod")
    config["eks-gpu-training:kueue"] = {**config.get("eks-gpu-training:kueue", {}), "failedNodeReplacement": False,
                                        "recoveryTimeoutMinutes": None}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    (release,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    # Kueue refuses to start with a gate on whose dependency is off: the companions go off too.
    assert release.inputs["values"]["controllerManager"]["featureGates"][:3] == [
        {"name": "TASFailedNodeReplacement", "enabled": False}, {"name": "TASFailedNodeReplacementFailFast", "enabled": False},
        {"name": "TASReplaceNodeOnPodTermination", "enabled": False}]
    manager = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "recoveryTimeout" not in manager["waitForPodsReady"]


def _training_pod_templates(graph):
    jobs = [r.inputs["spec"]["template"] for r in graph.of_type("kubernetes:batch/v1:Job")
            if r.inputs["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "training"]
    assert jobs, "no training Job in the stack"
    return jobs


def test_a_rank_leaves_an_unreachable_node_after_a_minute_and_kueue_may_fail_it_unless_the_stack_turns_it_off(prod_graph):
    for template in _training_pod_templates(prod_graph):
        tolerations = {t["key"]: t for t in template["spec"]["tolerations"] if t.get("effect") == "NoExecute"}
        assert {k: t["tolerationSeconds"] for k, t in tolerations.items()} == {
            "node.kubernetes.io/unreachable": 60, "node.kubernetes.io/not-ready": 60}
        assert template["metadata"]["annotations"]["kueue.x-k8s.io/safe-to-forcefully-delete"] == "true"
    config = stack_config("prod")
    config["eks-gpu-training:kueue"] = {**config.get("eks-gpu-training:kueue", {}), "unreachableNodeSeconds": None}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    for template in _training_pod_templates(graph):
        assert not [t for t in template["spec"]["tolerations"] if t.get("effect") == "NoExecute"]
        assert "kueue.x-k8s.io/safe-to-forcefully-delete" not in template["metadata"].get("annotations", {})
    (release,) = [r for r in graph.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kueue"]
    assert {"name": "FailureRecoveryPolicy", "enabled": False} in release.inputs["values"]["controllerManager"]["featureGates"]


def test_settings_round_trip_through_the_config_map_as_json(prod_graph):
    settings = gate_settings(prod_graph)
    assert GateSettings.from_json(settings.to_json()) == settings
    assert json.loads(settings.to_json())["namespace"] == "health-gate"
