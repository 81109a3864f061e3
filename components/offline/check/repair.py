"""Node repair overrides against the reasons the EKS node monitoring agent reports.

A managed node group's ``nodeRepairConfigOverrides`` names a condition and a reason; EKS applies the
override only when the agent reports exactly that reason, so a misspelt reason (``NvidiaXid79Error``)
is accepted by EKS and silently never matches. The agent's reasons are its ``reasons.yaml``
(``%d`` in a template stands for a number, e.g. ``NvidiaXID%dError`` for ``NvidiaXID79Error``), which
the package ships (``offline.agent_data``).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator

from ...facts.aws_enums import suggestion
from ..agent_data import AGENT_VERSION, reasons
from ..render.markers import is_placeholder

NODE_GROUP_TYPES = ("aws:eks/nodeGroup:NodeGroup", "eks:index:ManagedNodeGroup")


@functools.cache
def _reasons() -> dict[str, list[str]]:
    """Condition -> reason templates."""
    return {condition: [entry["Template"] for entry in entries.values()] for condition, entries in reasons().items()}


def _matches(template: str, reason: str) -> bool:
    pattern = re.escape(template).replace("%d", r"\d+").replace("%s", r"\S+")
    return re.fullmatch(pattern, reason) is not None


def check_repair_reasons(resource: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """("fail" | "skip", line) for each repair override of a node group whose reason the agent never reports."""
    if resource["type"] not in NODE_GROUP_TYPES:
        return
    overrides = ((resource.get("inputs") or {}).get("nodeRepairConfig") or {}).get("nodeRepairConfigOverrides") or []
    if not isinstance(overrides, list) or not overrides:
        return
    where = f"{resource['type']} {resource['name']}: nodeRepairConfig.nodeRepairConfigOverrides"
    known = _reasons()
    for i, override in enumerate(overrides):
        condition, reason = override.get("nodeMonitoringCondition"), override.get("nodeUnhealthyReason")
        if not isinstance(condition, str) or not isinstance(reason, str) or is_placeholder(condition) or is_placeholder(reason):
            continue
        if condition not in known:
            yield "fail", f"{where}[{i}].nodeMonitoringCondition: '{condition}' is not a condition the {AGENT_VERSION} agent sets{suggestion(condition, frozenset(known))}"
        elif not any(_matches(template, reason) for template in known[condition]):
            hint = suggestion(reason, frozenset(t for t in known[condition] if "%" not in t))
            yield "fail", (
                f"{where}[{i}].nodeUnhealthyReason: '{reason}' is not a reason the {AGENT_VERSION} agent reports for {condition}, "
                f"so the override would never apply{hint}"
            )
