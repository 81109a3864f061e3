"""Builders the unit tests share: small valid inputs and readers of upstream references, in one
module so that no test module imports another. Those that need a fixture are fixtures in
``tests/conftest.py``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from eks_gpu_training.config import ConfigError, NetworkConfig
from eks_gpu_training.local.instance_types import parse_table
from eks_gpu_training.platform import parse_platform_args
from eks_gpu_training.workloads.training_spec import TrainingJobSpec
from tests.support.harness import Graph, Registration, stack_config

PROJECT = "eks-gpu-training"
"""The stack files' configuration namespace."""

MANAGED_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def valid_config() -> dict[str, Any]:
    """A small valid configuration, as camelCase plain data (what a stack file holds)."""
    return {
        "region": "us-west-2",
        "cluster": {"name": "research", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
        "network": {
            "vpcId": "vpc-0123456789abcdef0",
            "subnets": [
                {"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"},
                {"id": "subnet-0000000000000000b", "availabilityZone": "us-west-2b"},
            ],
        },
        "gpuNodeGroups": [{"name": "h100", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2a"}],
    }


def problems_of(mutate: Callable[[dict[str, Any]], None]) -> list[str]:
    """The problems ``valid_config`` changed by ``mutate`` is refused with, as ``path: message``."""
    config = valid_config()
    mutate(config)
    with pytest.raises(ConfigError) as error:
        parse_platform_args(config)
    return [str(p) for p in error.value.problems]


def prod_raw(**overrides: Any) -> dict[str, Any]:
    """The prod stack's settings as plain data (camelCase keys, the region among them)."""
    return {**raw_settings(stack_config("prod")), **overrides}


def raw_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A stack's settings (``stack_config``) as plain data: keys without the project's prefix, the
    region among them (what ``parse_platform_args`` takes)."""
    raw = {k.split(":", 1)[1]: v for k, v in settings.items() if k.startswith(f"{PROJECT}:")}
    raw["region"] = settings["aws:region"]
    return copy.deepcopy(raw)


def without_teams(settings: dict[str, Any]) -> dict[str, Any]:
    """A stack's settings (``stack_config``) the way the stacks were before ``scheduling.teams``: its
    first training namespace, its first training app, no teams. The namespace then has a ClusterQueue
    of its own, named after it, and a ResourceQuota of its own quota (the fleet's by default): the
    path the tests of a namespace's own quota and queues take. A copy; ``settings`` is left alone."""
    config = copy.deepcopy(settings)
    config[f"{PROJECT}:scheduling"] = scheduling_without_teams(config.get(f"{PROJECT}:scheduling", {}))
    return config


def scheduling_without_teams(scheduling: dict[str, Any]) -> dict[str, Any]:
    """A ``scheduling`` section ``without_teams`` (a copy)."""
    scheduling = {k: copy.deepcopy(v) for k, v in scheduling.items() if k != "teams"}
    if "namespaces" in scheduling:
        scheduling["namespaces"] = scheduling["namespaces"][:1]
    if "trainingApps" in scheduling:
        scheduling["trainingApps"] = scheduling["trainingApps"][:1]
    return scheduling


def without_karpenter(settings: dict[str, Any]) -> dict[str, Any]:
    """A stack's settings (``stack_config``) with Karpenter off, as a user turns it off: its GPU pools
    gone, and with them the teams' quotas on them (an app on one of them must move: the caller's
    business). A copy; ``settings`` is left alone."""
    config = copy.deepcopy(settings)
    pools = {p["name"] for p in config.get(f"{PROJECT}:karpenter", {}).get("gpuNodePools", [])}
    config[f"{PROJECT}:karpenter"] = {"enabled": False}
    for team in config.get(f"{PROJECT}:scheduling", {}).get("teams", []):
        team["quotas"] = [q for q in team.get("quotas", []) if q["pool"] not in pools]
    return config


def stack_without_teams(stack: str) -> dict[str, Any]:
    """The settings of a stack's file ``without_teams``: for prod and dev, one namespace ``training``
    and the app rl-training (an Indexed Job) in it."""
    return without_teams(stack_config(stack))


NETWORK = NetworkConfig.model_validate(
    {
        "vpcId": "vpc-0123456789abcdef0",
        "subnets": [
            {"id": "subnet-0000000000000000a", "availabilityZone": "us-west-2a"},
            {"id": "subnet-0000000000000000c", "availabilityZone": "us-west-2a"},
            {"id": "subnet-0000000000000000b", "availabilityZone": "us-west-2b"},
        ],
    }
)
"""An adopted VPC with two subnets in us-west-2a and one in us-west-2b."""

TRAINING_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2"


def p5_job(**changes) -> TrainingJobSpec:
    """The seed's job: two p5.48xlarge nodes with EFA."""
    values = dict(
        name="rl-training",
        nodes=2,
        instance_types=("p5.48xlarge",),
        priority_class="training-critical",
        namespace="training",
        efa=True,
        image=TRAINING_IMAGE,
    )
    values.update(changes)
    return TrainingJobSpec(**values)


INSTANCE_TYPES_DOC = "karpenter-1.14.1/docs-instance-types.md"
"""Karpenter's instance-type reference in the reference folder."""


def read_instance_type_docs(reference_dir: Path) -> dict[str, dict[str, str]]:
    """Karpenter's instance-type reference: labels and resources per instance type, read by the
    same parser the local cluster's fleet uses."""
    table = parse_table((reference_dir / INSTANCE_TYPES_DOC).read_text())
    return {name: {**facts.labels, **facts.allocatable} for name, facts in table.items()}


def kubernetes_objects(graph: Graph, kind: str) -> list[Registration]:
    """The Kubernetes objects of ``kind`` a program registered."""
    return [r for r in graph.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind]


HEALTH_NCCL_IMAGE = "444455556666.dkr.ecr.us-west-2.amazonaws.com/nccl-tests:efa1.47.0-ncclv2.29.3-1-testsv2.17.9"


def health_config() -> dict:
    """The prod stack with everything GPU health can add: pre-flight checks (DCGM and NCCL), the
    Prometheus operator (the DCGM dashboard) and a pinned node monitoring agent version; without its
    teams, which refuse the checks at `pulumi up` (Kueue would hold their Jobs)."""
    config = without_teams(stack_config("prod"))
    config["eks-gpu-training:nodeMonitoring"] = {"addonVersion": "v1.6.7-eksbuild.2"}
    config["eks-gpu-training:preflight"] = {"enabled": True, "nccl": {"image": HEALTH_NCCL_IMAGE}}
    config["eks-gpu-training:gpuOperator"] = {
        "chartVersion": "v26.7.0",
        "prometheusOperator": True,
        "serviceMonitorLabels": {"release": "kube-prometheus-stack"},
    }
    return config
