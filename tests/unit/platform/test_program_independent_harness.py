"""Both stack files under the SDK's mock monitor with naive mocks, not this project's harness.

The mocks here echo inputs back as outputs and answer every invoke with nothing, as a minimal
harness of someone else's would; the program must still build its whole graph. The only change to
the SDK's stock monitor is that it declines resource references: the stock monitor rehydrates them
on its worker thread's event loop, which races the program's loop ("attached to a different loop")
whenever an input holds a reference, such as the pulumi-eks cluster a managed node group joins.
"""

from __future__ import annotations

import contextvars
import json
import runpy

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from tests.support.harness import PROJECT_ROOT, stack_config


class UrnOnlyMonitor(MockMonitor):
    """The stock mock monitor, with resource references passed as plain URNs and IDs."""

    def SupportsFeature(self, request):
        supported = request.id not in ("outputValues", "resourceReferences")
        return type("SupportsFeatureResponse", (object,), {"hasSupport": supported})

    def GetDeploymentInfo(self, request):
        features = [
            f
            for f in super().GetDeploymentInfo(request).supportedFeatures
            if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)


class EchoMocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.created: list[tuple[str, str, dict]] = []

    def new_resource(self, args):
        self.created.append((args.typ, args.name, args.inputs))
        return f"{args.name}_id", args.inputs

    def call(self, args):
        return {}


def run_with_stock_monitor(stack: str) -> EchoMocks:
    def body():
        config = stack_config(stack)
        pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
        mocks = EchoMocks()
        pulumi.runtime.set_mocks(
            mocks, project="eks-gpu-training", stack=stack, preview=False, monitor=UrnOnlyMonitor(mocks)
        )
        _sync_await(run_pulumi_func(lambda: runpy.run_path(str(PROJECT_ROOT / "__main__.py"), run_name="__main__")))
        return mocks

    return contextvars.Context().run(body)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_builds_under_echo_mocks(stack):
    created = run_with_stock_monitor(stack).created
    types = [typ for typ, _, _ in created]
    assert types.count("eks:index:Cluster") == 1
    gpu_groups = [inputs for typ, _, inputs in created if typ == "aws:eks/nodeGroup:NodeGroup" and inputs.get("taints")]
    assert len(gpu_groups) == len(stack_config(stack)["eks-gpu-training:gpuNodeGroups"])
    assert all(g["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
                               {"key": "eks-gpu-training/unverified", "effect": "NO_SCHEDULE"}] for g in gpu_groups)
