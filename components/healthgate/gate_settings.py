"""What the health gate and the platform agree on: the taints it lifts and sets, the node condition
it writes, the labels of its check Jobs, and the settings it reads from its ConfigMap. Standard
library only, so the Pulumi side imports it without the program's dependencies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional

STARTUP_TAINT_KEY = "eks-gpu-training/unverified"
STARTUP_TAINT_EFFECT = "NoSchedule"
"""Every GPU node joins with this taint (a managed node group's taints, a NodePool's
``startupTaints``); only the gate's check pods and the node's DaemonSets tolerate it, so no training
pod lands there, and Kueue's topology-aware scheduling skips the node, until the gate lifts it."""

QUARANTINE_TAINT_KEY = "eks-gpu-training/unhealthy"
QUARANTINE_TAINT_EFFECT = "NoExecute"
"""Set by the gate on a node whose monitoring agent reports ``AcceleratedHardwareReady`` False: its
training pods are evicted, so the job's controller and Kueue move the job off the failed GPUs at
once, not when the node is repaired. Its value is the agent's reason."""

GATE_TAINT_KEYS = (STARTUP_TAINT_KEY, QUARANTINE_TAINT_KEY)

CONDITION_TYPE = "HealthChecksPassed"
"""The node condition the gate writes: True once the node passed its checks, False with the
failed check's reason (``REASONS``) and its message."""

PASSED_REASON = "ChecksPassed"
IN_USE_REASON = "AdmittedInUse"
"""``HealthChecksPassed`` True without a check: the node got the startup taint while pods placed
before it held its GPUs (EKS applies a node group's new taints to its running nodes), so it ran
work before the gate was on and is left to it."""
CONFIGURATION_REASONS = {
    "image": "CheckImageUnavailable",
    "device-plugin": "DevicePluginMissing",
    "pool": "PoolWideCheckFailure",
}
"""``HealthChecksPassed`` False for a cause no node fixes: a check image the kubelet cannot pull, a
node lacking a device of its pool (no device plugin), or one check failing alike on most of the
pool. No node is quarantined for these; the gate retries once its settings change or the Job's TTL
passes."""
REASONS = {
    "gpus": "GPUCountMismatch",
    "efa": "EFADeviceCountMismatch",
    "efa-loopback": "EFALoopbackFailed",
    "dcgm": "DCGMDiagnosticFailed",
    "deadline": "CheckTimedOut",
    "unknown": "CheckFailed",
}
"""The condition's reason by what failed: a check container by its name, the devices the node
never advertised, the check's deadline."""

HARDWARE_CONDITION = "AcceleratedHardwareReady"
"""The node monitoring agent's GPU condition (aws/eks-node-monitoring-agent reasons.yaml)."""

NODE_LABEL = "eks-gpu-training/checked-node"
"""The label of a check Job and its pod: the node it checks."""
CHECK_LABELS = {"app.kubernetes.io/name": "health-check", "app.kubernetes.io/part-of": "eks-gpu-training"}
"""Labels of every check Job and pod (the local cluster finds the pods whose verdict it writes by them)."""

GPU_POOL_LABEL = "eks-gpu-training/pool"
KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
"""The labels a GPU node's pool is named by: a managed pool's (set by the stack), a Karpenter pool's."""

CONFIG_KEY = "gate.json"
"""The key of the gate's ConfigMap that holds ``GateSettings`` as JSON."""


class SettingsError(ValueError):
    """The ConfigMap does not say what the gate needs."""


@dataclass(frozen=True)
class PoolDevices:
    """What every node of one pool must advertise before it is checked, and its check requests."""

    gpus: int
    efa: int


@dataclass(frozen=True)
class GateSettings:
    """The gate's settings (the stack writes them into its ConfigMap)."""

    namespace: str
    """Where the check Jobs run (the gate's own namespace)."""
    pools: Mapping[str, PoolDevices]
    """Each GPU pool's devices, by pool name."""
    check_pod: Mapping[str, Any]
    """The check pod's template (metadata and spec) without its node, GPU and EFA requests."""
    check_seconds: int
    """How long a check may take from its Job's creation, waiting for the node's devices and pull included."""
    quarantine: bool = True
    """Taint a node out of its jobs when its agent reports AcceleratedHardwareReady False."""
    quarantine_ignored_reasons: tuple[str, ...] = ()
    """Agent reasons that are no GPU fault (DCGMError: the agent lost its DCGM host engine)."""
    karpenter_pools: tuple[str, ...] = ()
    """Karpenter NodePools whose failing nodes the gate hands back to Karpenter (deletes their NodeClaim)."""
    replacements_per_hour: int = 2
    """NodeClaims the gate deletes per Karpenter pool in any hour, each after a growing wait (``replacements``)."""

    @classmethod
    def from_json(cls, text: str) -> "GateSettings":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise SettingsError(f"{CONFIG_KEY} is not JSON: {error}") from None
        try:
            pools = {name: PoolDevices(int(p["gpus"]), int(p["efa"])) for name, p in data["pools"].items()}
            check_seconds = int(data["checkSeconds"])
            settings = cls(
                namespace=str(data["namespace"]),
                pools=pools,
                check_pod=dict(data["checkPod"]),
                check_seconds=check_seconds,
                quarantine=bool(data.get("quarantine", True)),
                quarantine_ignored_reasons=tuple(data.get("quarantineIgnoredReasons", ())),
                karpenter_pools=tuple(data.get("karpenterPools", ())),
                replacements_per_hour=int(data.get("replacementsPerHour", 2)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise SettingsError(f"{CONFIG_KEY} lacks or mistypes {error}") from None
        if check_seconds <= 0:
            raise SettingsError(f"checkSeconds must be a positive number of seconds, not {check_seconds}")
        if settings.replacements_per_hour < 0:
            raise SettingsError(f"replacementsPerHour must be 0 or more, not {settings.replacements_per_hour}")
        return settings

    def to_json(self) -> str:
        return json.dumps({
            "namespace": self.namespace,
            "pools": {name: {"gpus": p.gpus, "efa": p.efa} for name, p in sorted(self.pools.items())},
            "checkPod": self.check_pod,
            "checkSeconds": self.check_seconds,
            "quarantine": self.quarantine,
            "quarantineIgnoredReasons": list(self.quarantine_ignored_reasons),
            "karpenterPools": list(self.karpenter_pools),
            "replacementsPerHour": self.replacements_per_hour,
        }, sort_keys=True)


def pool_of(labels: Optional[Mapping[str, str]]) -> Optional[str]:
    """The GPU pool a node belongs to, from its labels (a managed pool's, else a Karpenter pool's)."""
    labels = labels or {}
    return labels.get(GPU_POOL_LABEL) or labels.get(KARPENTER_POOL_LABEL)
