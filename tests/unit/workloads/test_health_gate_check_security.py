"""What the health gate's check containers may do: every capability dropped and none added, no
privilege escalation, seccomp RuntimeDefault, non-root with a read-only root filesystem for the EFA
checks and root (without capabilities) for DCGM alone. Whether the namespace's ``baseline`` level
admits the pod is the API server's verdict: the cluster tier's gate tests run these pods."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from eks_gpu_training.config import HealthGateConfig
from eks_gpu_training.healthgate.node_check import check_job
from eks_gpu_training.healthgate.gate_settings import GateSettings, PoolDevices
from eks_gpu_training.workloads.health_gate import CHECK_PRIORITY_CLASS, RUN_AS_USER, check_pod
from tests.support.harness import run_main, stack_config

COMPONENT = "eks-gpu-training:index:HealthGate"
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                         "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
"""The capabilities Pod Security's ``baseline`` level lets a container add (kubernetes.io/docs/concepts/security/pod-security-standards)."""


def _check_containers(graph):
    (config_map,) = graph.subtree(graph.one(COMPONENT)).of_type("kubernetes:core/v1:ConfigMap")
    spec = GateSettings.from_json(config_map.inputs["data"]["gate.json"]).check_pod["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}, spec


def test_prods_check_containers_drop_every_capability_and_only_dcgm_runs_as_root(prod_graph):
    containers, spec = _check_containers(prod_graph)
    assert set(containers) == {"efa", "efa-loopback", "dcgm"}
    for name, container in containers.items():
        security = container["securityContext"]
        assert security["capabilities"] == {"drop": ["ALL"]}, name
        assert set(security["capabilities"].get("add", [])) <= BASELINE_CAPABILITIES
        assert (security["allowPrivilegeEscalation"], security["privileged"]) == (False, False), name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
    for name in ("efa", "efa-loopback"):
        security = containers[name]["securityContext"]
        assert (security["runAsNonRoot"], security["runAsUser"], security["runAsGroup"]) == (True, RUN_AS_USER, RUN_AS_USER)
        assert security["readOnlyRootFilesystem"] is True
    dcgm = containers["dcgm"]["securityContext"]
    assert (dcgm["runAsUser"], dcgm["runAsNonRoot"], dcgm["readOnlyRootFilesystem"]) == (0, False, False)
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert "hostNetwork" not in spec
    assert "volumes" not in spec


def test_every_check_container_requests_cpu_and_memory_as_the_namespaces_quota_requires(dev_graph, prod_graph):
    """A ResourceQuota on requests.cpu and requests.memory refuses a pod with a container that
    requests neither (Kubernetes, "Resource Quotas")."""
    for graph in (dev_graph, prod_graph):
        containers, _ = _check_containers(graph)
        for name, container in containers.items():
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_check_job_and_its_pod_are_strictly_valid_kubernetes_objects(stack):
    config = HealthGateConfig(enabled=True, efa_loopback_image="r.example/nccl:1")
    pod = json.loads(json.dumps(check_pod("registry.example/health-gate@sha256:" + "a" * 64, config)))
    devices = PoolDevices(gpus=8, efa=32) if stack == "prod" else PoolDevices(gpus=1, efa=0)
    job = check_job(pod, "health-gate", "node-0", "uid-1", devices, 1200)
    version = stack_config(stack)["eks-gpu-training:cluster"]["kubernetesVersion"]
    kubernetes_validate.validate(job, version, strict=True)
    template = job["spec"]["template"]
    kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check-0", "namespace": "health-gate",
                                                                                  **template["metadata"]},
                                  "spec": template["spec"]}, version, strict=True)


def test_check_pods_never_preempt_through_a_priority_class_of_their_own(prod_graph):
    """The API server refuses a pod whose preemptionPolicy differs from its PriorityClass's, and
    computes PreemptLowerPriority for a pod without a class: the check's ``Never`` needs its own
    class (the cluster tier creates such a pod: ``test_health_gate_check_pods``)."""
    _, spec = _check_containers(prod_graph)
    (priority_class,) = [r for r in prod_graph.subtree(prod_graph.one(COMPONENT)).of_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")]
    assert spec["priorityClassName"] == priority_class.inputs["metadata"]["name"] == CHECK_PRIORITY_CLASS
    assert (priority_class.inputs["preemptionPolicy"], priority_class.inputs["value"], priority_class.inputs["globalDefault"]) == (
        "Never", 0, False)
    # The Job's pod may say Never itself too, never anything else.
    job = check_job({"spec": spec}, "health-gate", "node-0", "uid-1", PoolDevices(gpus=8, efa=32), 60)
    assert job["spec"]["template"]["spec"].get("preemptionPolicy", "Never") == "Never"


def test_a_stack_priority_class_named_like_the_checks_is_refused_with_its_key():
    config = stack_config("prod")
    scheduling = config["eks-gpu-training:scheduling"]
    scheduling["priorityClasses"] = [{"name": CHECK_PRIORITY_CLASS, "value": 10}]
    graph = run_main(config)
    assert graph.resources == []
    assert [(p.path, p.message) for p in graph.error.problems if p.path.startswith("scheduling.priorityClasses")] == [
        ("scheduling.priorityClasses[0].name",
         f"'{CHECK_PRIORITY_CLASS}' is the PriorityClass the health gate creates for its checks; choose another name")]
