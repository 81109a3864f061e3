"""The local cluster's stand-in for the node monitoring agent's AcceleratedHardwareReady report:
only on GPU nodes where the agent's pod runs, False with DCGMError without the host engine's pod."""

from __future__ import annotations

import json
from types import SimpleNamespace

from eks_gpu_training.local.node_health import report_accelerated_hardware


def _node(name: str, gpus: str | None, conditions=()):
    return {"metadata": {"name": name},
            "status": {"capacity": {"nvidia.com/gpu": gpus} if gpus else {"cpu": "4"}, "conditions": list(conditions)}}


def _pod(daemonset: str, node: str, phase: str = "Running"):
    return {"metadata": {"labels": {"app": daemonset}, "ownerReferences": [{"kind": "DaemonSet", "name": daemonset}]},
            "spec": {"nodeName": node}, "status": {"phase": phase}}


class FakeApps:
    """The agent namespace's DaemonSets, each selecting its pods by their ``app`` label."""

    def list_namespaced_daemon_set(self, namespace, **_):
        assert namespace == "kube-system"
        return _listed([{"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}}}}
                        for name in ("eks-node-monitoring-agent", "dcgm-server", "kube-proxy")])


def _listed(items):
    """A list call's response read raw (``_preload_content=False``), as the API server sends it."""
    return SimpleNamespace(data=json.dumps({"items": items}).encode())


class FakeCore:
    def __init__(self, nodes, pods):
        self.nodes, self.pods, self.patched = nodes, pods, {}

    def list_namespaced_pod(self, namespace, label_selector, field_selector, **_):
        assert (namespace, field_selector) == ("kube-system", "status.phase=Running")
        # The API server's answer to those selectors.
        return _listed([pod for pod in self.pods if pod["status"]["phase"] == "Running"
                        and label_selector == f"app={pod['metadata']['labels']['app']}"])

    def list_node(self, **_):
        return _listed(self.nodes)

    def patch_node_status(self, name, body, **_):
        self.patched[name] = body["status"]["conditions"][0]


def test_reports_healthy_gpus_where_the_agent_and_its_host_engine_run_and_dcgm_error_without_the_engine():
    core = FakeCore(
        [_node("gpu-0", "8"), _node("gpu-1", "8"), _node("gpu-2", "8"), _node("system-0", None)],
        [_pod("eks-node-monitoring-agent", "gpu-0"), _pod("dcgm-server", "gpu-0"),
         _pod("eks-node-monitoring-agent", "gpu-1"),
         _pod("dcgm-server", "gpu-2"), _pod("eks-node-monitoring-agent", "gpu-2", phase="Pending"),
         _pod("eks-node-monitoring-agent", "system-0")],
    )
    assert report_accelerated_hardware(core, apps=FakeApps()) == ["gpu-0", "gpu-1"]
    assert (core.patched["gpu-0"]["type"], core.patched["gpu-0"]["status"]) == ("AcceleratedHardwareReady", "True")
    assert (core.patched["gpu-1"]["status"], core.patched["gpu-1"]["reason"]) == ("False", "DCGMError")


def test_leaves_a_condition_that_already_says_the_same_alone():
    reported = {"type": "AcceleratedHardwareReady", "status": "True", "reason": "LocalCluster"}
    core = FakeCore([_node("gpu-0", "8", [reported])],
                    [_pod("eks-node-monitoring-agent", "gpu-0"), _pod("dcgm-server", "gpu-0")])
    assert report_accelerated_hardware(core, apps=FakeApps()) == []
    assert core.patched == {}


def test_an_unpullable_check_image_is_reported_as_the_kubelet_reports_a_failed_pull():
    from eks_gpu_training.healthgate.node_check import image_pull_failure
    from eks_gpu_training.local.node_health import pull_failure_status

    ended = {"name": "efa", "state": {"terminated": {"exitCode": 0}}}
    pod = {"metadata": {"ownerReferences": [{"uid": "job-1"}]},
           "spec": {"initContainers": [{"name": "efa", "image": "gate:1"}], "containers": [{"name": "dcgm", "image": "dcgm:4"}]},
           "status": {"initContainerStatuses": [ended], "containerStatuses": [{"name": "dcgm", "state": {"running": {}}}]}}
    status = pull_failure_status(pod, "dcgm")
    assert status["phase"] == "Pending"
    assert "initContainerStatuses" not in status, "an ended init container is left as it is"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImagePull"
    said = image_pull_failure({"metadata": {"uid": "job-1"}}, [{**pod, "status": status}])
    assert said.startswith("check dcgm cannot pull dcgm:4 (ErrImagePull: failed to pull image 'dcgm:4'")
