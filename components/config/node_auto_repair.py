"""Node auto repair of GPU managed node groups (EKS ``nodeRepairConfig``).

EKS replaces (or reboots) a node whose node monitoring agent reports it unhealthy: accelerated
hardware conditions after 10 minutes, the others after 30, and it halts when too much of the
group is unhealthy at once (docs.aws.amazon.com/eks/latest/userguide/node-health.html). Field
limits and enumerations come from botocore's EKS model (shapes ``NodeRepairConfig``,
``NodeRepairConfigOverrides``, ``RepairAction``).
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..facts import aws_enums
from .base import _enum_error, _Model
from .problems import ProblemSink

NODE_MONITORING_CONDITIONS = (
    "AcceleratedHardwareReady",
    "ContainerRuntimeReady",
    "KernelReady",
    "NetworkingReady",
    "StorageReady",
)
"""The NodeConditions the EKS node monitoring agent sets, one per category of issue
(docs.aws.amazon.com/eks/latest/userguide/node-health.html; github.com/aws/eks-node-monitoring-agent).
botocore types ``nodeMonitoringCondition`` as a plain string, so the list is kept here."""

DEFAULT_MAX_PARALLEL_NODES_REPAIRED = 1
"""Repair one GPU node at a time: a replacement p5 must be found in scarce capacity (often the same
reservation), and a fault that hits several nodes at once (a driver or AMI regression) should not
cycle the whole pool."""

DEFAULT_MAX_UNHEALTHY_PERCENTAGE = 50
"""Halt repair when more than half the pool is unhealthy: then the fleet (AMI, driver, AZ) is the
cause. EKS's default, 20% of a group over five nodes
(docs.aws.amazon.com/eks/latest/userguide/node-repair.html), would refuse a six- to nine-node pool's
second repair."""


class NodeRepairOverrideConfig(_Model):
    """What EKS does, and after how long, for one unhealthy condition and reason."""

    node_monitoring_condition: str
    """NodeCondition the override applies to, e.g. AcceleratedHardwareReady (required)."""
    node_unhealthy_reason: str = Field(min_length=1)
    """Reason reported by the node monitoring agent, e.g. `NvidiaXID79Error` (docs/health.md lists them; `check` refuses one the agent never reports) (required)."""
    min_repair_wait_time_mins: int = Field(ge=1)
    """Minutes to wait before repairing (required)."""
    repair_action: str
    """Replace, Reboot or NoAction (required)."""

    @field_validator("node_monitoring_condition")
    @classmethod
    def _condition(cls, value: str) -> str:
        if value not in NODE_MONITORING_CONDITIONS:
            raise PydanticCustomError(
                "condition",
                f"'{value}' is not a node monitoring agent condition; allowed: {', '.join(NODE_MONITORING_CONDITIONS)}",
            )
        return value

    @field_validator("repair_action")
    @classmethod
    def _action(cls, value: str) -> str:
        allowed = aws_enums.eks_repair_actions()
        if value not in allowed:
            raise _enum_error(value, allowed, "an EKS repair action", "botocore eks RepairAction")
        return value


class NodeRepairConfig(_Model):
    """EKS node auto repair of a managed node group; set a limit as a count or as a percentage, not both."""

    enabled: bool = True
    """Let EKS repair unhealthy nodes. Default: true."""
    max_unhealthy_node_threshold_count: Optional[int] = Field(default=None, ge=1)
    """Repair halts above this many unhealthy nodes. Default: none (the percentage applies)."""
    max_unhealthy_node_threshold_percentage: Optional[int] = Field(default=None, ge=1, le=100)
    """Repair halts above this percentage of unhealthy nodes. Default: 50 when no count is set (EKS's default halts above 20% of a group of more than five nodes)."""
    max_parallel_nodes_repaired_count: Optional[int] = Field(default=None, ge=1)
    """Nodes repaired at once. Default: 1 when no percentage is set (one scarce GPU node at a time)."""
    max_parallel_nodes_repaired_percentage: Optional[int] = Field(default=None, ge=1, le=100)
    """Percentage of unhealthy nodes repaired at once. Default: none (the count applies)."""
    node_repair_config_overrides: list[NodeRepairOverrideConfig] = []
    """Per condition and reason: the action (e.g. Reboot before Replace for AcceleratedHardwareReady) and wait. Default: none (EKS's actions)."""


def check_node_repair(repair: NodeRepairConfig, problem: ProblemSink, path: str = "nodeRepair") -> None:
    """A limit is a count or a percentage; EKS refuses both (botocore eks NodeRepairConfig)."""
    pairs = (
        ("maxUnhealthyNodeThresholdCount", repair.max_unhealthy_node_threshold_count, "maxUnhealthyNodeThresholdPercentage", repair.max_unhealthy_node_threshold_percentage),
        ("maxParallelNodesRepairedCount", repair.max_parallel_nodes_repaired_count, "maxParallelNodesRepairedPercentage", repair.max_parallel_nodes_repaired_percentage),
    )
    for count_key, count, percentage_key, percentage in pairs:
        if count is not None and percentage is not None:
            problem(f"{path}.{count_key}", f"set either {count_key} or {percentage_key}, not both (EKS refuses both)")
    seen: set[tuple[str, str]] = set()
    for i, override in enumerate(repair.node_repair_config_overrides):
        key = (override.node_monitoring_condition, override.node_unhealthy_reason)
        if key in seen:
            problem(f"{path}.nodeRepairConfigOverrides[{i}]", f"repeats condition {key[0]} with reason {key[1]}")
        seen.add(key)


def node_repair_settings(repair: NodeRepairConfig) -> dict[str, Any]:
    """The ``nodeRepairConfig`` sent to EKS, with this library's defaults filled in where the
    configuration names neither the count nor the percentage of a limit."""
    if not repair.enabled:
        return {"enabled": False}
    settings: dict[str, Any] = {"enabled": True}
    if repair.max_unhealthy_node_threshold_count is not None:
        settings["max_unhealthy_node_threshold_count"] = repair.max_unhealthy_node_threshold_count
    else:
        settings["max_unhealthy_node_threshold_percentage"] = (
            DEFAULT_MAX_UNHEALTHY_PERCENTAGE
            if repair.max_unhealthy_node_threshold_percentage is None
            else repair.max_unhealthy_node_threshold_percentage
        )
    if repair.max_parallel_nodes_repaired_percentage is not None:
        settings["max_parallel_nodes_repaired_percentage"] = repair.max_parallel_nodes_repaired_percentage
    else:
        settings["max_parallel_nodes_repaired_count"] = (
            DEFAULT_MAX_PARALLEL_NODES_REPAIRED
            if repair.max_parallel_nodes_repaired_count is None
            else repair.max_parallel_nodes_repaired_count
        )
    if repair.node_repair_config_overrides:
        settings["node_repair_config_overrides"] = [
            {
                "node_monitoring_condition": o.node_monitoring_condition,
                "node_unhealthy_reason": o.node_unhealthy_reason,
                "min_repair_wait_time_mins": o.min_repair_wait_time_mins,
                "repair_action": o.repair_action,
            }
            for o in repair.node_repair_config_overrides
        ]
    return settings
