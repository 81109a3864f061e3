"""The local cluster's stand-in for the node monitoring agent's AcceleratedHardwareReady report:
only on GPU nodes where the agent's pod runs, False with DCGMError without the host engine's pod."""

from __future__ import annotations

from types import SimpleNamespace

from eks_gpu_training.local.node_health import report_accelerated_hardware


def _node(name: str, gpus: str | None, conditions=()):
    return SimpleNamespace(metadata=SimpleNamespace(name=name),
                           status=SimpleNamespace(capacity={"nvidia.com/gpu": gpus} if gpus else {"cpu": "4"},
                                                  conditions=list(conditions)))


def _pod(daemonset: str, node: str, phase: str = "Running"):
    return SimpleNamespace(metadata=SimpleNamespace(owner_references=[SimpleNamespace(kind="DaemonSet", name=daemonset)]),
                           spec=SimpleNamespace(node_name=node), status=SimpleNamespace(phase=phase))


class FakeCore:
    def __init__(self, nodes, pods):
        self.nodes, self.pods, self.patched = nodes, pods, {}

    def list_namespaced_pod(self, namespace):
        assert namespace == "kube-system"
        return SimpleNamespace(items=self.pods)

    def list_node(self):
        return SimpleNamespace(items=self.nodes)

    def patch_node_status(self, name, body):
        self.patched[name] = body["status"]["conditions"][0]


def test_reports_healthy_gpus_where_the_agent_and_its_host_engine_run_and_dcgm_error_without_the_engine():
    core = FakeCore(
        [_node("gpu-0", "8"), _node("gpu-1", "8"), _node("gpu-2", "8"), _node("system-0", None)],
        [_pod("eks-node-monitoring-agent", "gpu-0"), _pod("dcgm-server", "gpu-0"),
         _pod("eks-node-monitoring-agent", "gpu-1"),
         _pod("dcgm-server", "gpu-2"), _pod("eks-node-monitoring-agent", "gpu-2", phase="Pending"),
         _pod("eks-node-monitoring-agent", "system-0")],
    )
    assert report_accelerated_hardware(core) == ["gpu-0", "gpu-1"]
    assert (core.patched["gpu-0"]["type"], core.patched["gpu-0"]["status"]) == ("AcceleratedHardwareReady", "True")
    assert (core.patched["gpu-1"]["status"], core.patched["gpu-1"]["reason"]) == ("False", "DCGMError")


def test_leaves_a_condition_that_already_says_the_same_alone():
    reported = SimpleNamespace(type="AcceleratedHardwareReady", status="True", reason="LocalCluster")
    core = FakeCore([_node("gpu-0", "8", [reported])],
                    [_pod("eks-node-monitoring-agent", "gpu-0"), _pod("dcgm-server", "gpu-0")])
    assert report_accelerated_hardware(core) == []
    assert core.patched == {}
