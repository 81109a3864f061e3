"""Faults injected into a local cluster: conditions only as the node monitoring agent reports them
(its own reasons, Fatal ones turning the condition False), the record the simulated agent and check
runner read, and the check pods' end as a kubelet reports it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from eks_gpu_training.local.__main__ import main
from eks_gpu_training.local.faults import (
    FaultError, condition_fault, node_key, pool_key, recorded_condition, simulated_check_failure,
)
from eks_gpu_training.local.node_health import check_pod_status, report_accelerated_hardware, run_checks


def test_a_gpu_fault_is_the_agents_condition_with_its_reason_and_description():
    fault = condition_fault("AcceleratedHardwareReady=False", "NvidiaXID79Error", None)
    assert (fault.type, fault.status, fault.reason) == ("AcceleratedHardwareReady", "False", "NvidiaXID79Error")
    assert fault.message.startswith("A critical GPU error occurred.")


@pytest.mark.parametrize(("condition", "reason", "says"), [
    ("GpuHealthy=False", "NvidiaXID79Error", "is not a condition the node monitoring agent"),
    ("AcceleratedHardwareReady=Maybe", None, "True or False"),
    ("AcceleratedHardwareReady=False", None, "--reason is required"),
    ("AcceleratedHardwareReady=False", "NvidiaXid79Error", "is not a reason"),
    ("AcceleratedHardwareReady=False", "NvidiaXID79Warning", "as a Warning"),
    ("NetworkingReady=False", "NvidiaXID79Error", "is not a reason"),
])
def test_a_condition_the_agent_would_never_report_so_is_refused_saying_why(condition, reason, says):
    with pytest.raises(FaultError, match=says):
        condition_fault(condition, reason, None)


def test_a_nodes_own_check_fault_comes_before_its_pools():
    recorded = {node_key("a"): {"checks": "efa"}, pool_key("p5"): {"checks": "dcgm"}}
    assert simulated_check_failure(recorded, "a", "p5") == "efa"
    assert simulated_check_failure(recorded, "b", "p5") == "dcgm"
    assert simulated_check_failure(recorded, "c", "other") is None
    assert simulated_check_failure({}, "c", None) is None


def _container(name):
    return {"name": name, "image": f"{name}:1"}


def _check_pod(name="check-1", node="a", phase="Running"):
    return {"metadata": {"name": name, "namespace": "health-gate"},
            "spec": {"nodeName": node, "initContainers": [_container("efa")], "containers": [_container("dcgm")]},
            "status": {"phase": phase, "startTime": "2026-01-01T00:00:00Z"}}


def _listed(items):
    """A list call's response read raw (``_preload_content=False``), as the API server sends it."""
    return SimpleNamespace(data=json.dumps({"items": items}).encode())


def _running(pods, field_selector):
    """What the API server answers to the reporter's phase field selector."""
    assert field_selector == "status.phase=Running"
    return [pod for pod in pods if pod["status"]["phase"] == "Running"]


def _states(status, key):
    return {c["name"]: c["state"] for c in status.get(key, [])}


def test_a_passing_check_pod_ends_succeeded_with_every_container_exited_zero():
    status = check_pod_status(_check_pod(), None, "2026-01-01T00:00:00Z")
    assert status["phase"] == "Succeeded"
    assert _states(status, "initContainerStatuses")["efa"]["terminated"]["exitCode"] == 0
    assert _states(status, "containerStatuses")["dcgm"]["terminated"]["exitCode"] == 0


def test_a_failing_init_check_ends_the_pod_failed_and_the_later_containers_never_ran():
    status = check_pod_status(_check_pod(), "efa", "2026-01-01T00:00:00Z")
    assert status["phase"] == "Failed"
    efa = _states(status, "initContainerStatuses")["efa"]["terminated"]
    assert (efa["exitCode"], "simulated" in efa["message"]) == (1, True)
    assert _states(status, "containerStatuses")["dcgm"] == {"waiting": {"reason": "PodInitializing"}}


class FakeCore:
    def __init__(self, pods, nodes=(), agent_nodes=()):
        self.pods, self.nodes, self.agent_nodes, self.patched = list(pods), list(nodes), agent_nodes, {}

    def list_pod_for_all_namespaces(self, label_selector, field_selector, **_):
        assert "health-check" in label_selector
        return _listed(_running(self.pods, field_selector))

    def list_namespaced_pod(self, namespace, label_selector, field_selector, **_):
        pods = [{"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": owner}]}, "spec": {"nodeName": node},
                 "status": {"phase": "Running"}}
                for node in self.agent_nodes for owner in ("eks-node-monitoring-agent", "dcgm-server")
                if label_selector == f"app={owner}"]
        return _listed(_running(pods, field_selector))

    def list_namespaced_daemon_set(self, namespace, **_):
        return _listed([{"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}}}
                        for name in ("eks-node-monitoring-agent", "dcgm-server")])

    def list_node(self, **_):
        return _listed(self.nodes)

    def patch_namespaced_pod_status(self, name, namespace, body, **_):
        self.patched[name] = body["status"]

    def patch_node_status(self, name, body, **_):
        self.patched[name] = body["status"]["conditions"]


def _node(name, pool="p5", conditions=()):
    return {"metadata": {"name": name, "labels": {"eks-gpu-training/pool": pool}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "conditions": list(conditions)}}


def test_the_check_runner_ends_running_check_pods_once_they_ran_long_enough_as_the_faults_say():
    core = FakeCore([_check_pod("early", node="a"), _check_pod("due", node="a"), _check_pod("pending", phase="Pending")], [_node("a")])
    checks = run_checks(core, {pool_key("p5"): {"checks": "dcgm"}}, elapsed=lambda pod: 0 if pod["metadata"]["name"] == "early" else 10)
    assert checks.ended == ["health-gate/due on a: failed dcgm"]
    assert checks.running == 1  # "early": ended by a later round
    assert core.patched["due"]["phase"] == "Failed"


def test_the_simulated_agent_keeps_reporting_an_injected_fault_and_the_healthy_condition_where_there_is_none():
    fault = condition_fault("AcceleratedHardwareReady=False", "NvidiaXID79Error", None)
    recorded = {node_key("a"): {"condition": fault.__dict__}}
    assert recorded_condition(recorded, "a") == fault
    core = FakeCore([], [_node("a"), _node("b")], agent_nodes=("a", "b"))
    assert report_accelerated_hardware(core, recorded, apps=core) == ["a", "b"]
    assert [(c["status"], c["reason"]) for c in core.patched["a"]] == [("False", "NvidiaXID79Error")]
    assert [(c["status"], c["reason"]) for c in core.patched["b"]] == [("True", "LocalCluster")]


@pytest.mark.parametrize("argv", [
    ["fault", "dev", "--condition", "AcceleratedHardwareReady=False"],
    ["fault", "dev", "gpu-0", "--pool", "p5", "--fail-checks", "dcgm"],
    ["fault", "dev", "--pool", "p5", "--not-ready"],
    ["fault", "dev", "gpu-0", "--delete", "--reason", "NvidiaXID79Error"],
])
def test_the_fault_command_refuses_a_node_and_a_pool_together_or_a_reason_without_a_condition(argv, capsys, tmp_path):
    assert main([*argv, "--state-dir", str(tmp_path)]) == 1
    assert "local fault failed:" in capsys.readouterr().err


def test_the_fault_command_needs_a_running_cluster(capsys, tmp_path):
    assert main(["fault", "dev", "gpu-0", "--delete", "--state-dir", str(tmp_path)]) == 1
    assert "no local cluster of dev runs" in capsys.readouterr().err
