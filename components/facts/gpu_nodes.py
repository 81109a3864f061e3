"""What every GPU node and GPU pod of the platform agree on: the GPU taint and its toleration, the
node-role labels, the extended resources the device plugins advertise, and the well-known node label
keys that placement uses. Plain data, so configuration, AWS resources, add-ons and workload templates
all read the same facts."""

from __future__ import annotations

from ..healthgate.gate_settings import QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, STARTUP_TAINT_EFFECT, STARTUP_TAINT_KEY

GPU_NODE_ROLE_LABEL = ("role", "gpu-training")
"""The label every GPU node carries; training pods select on it (seed: ``role=gpu-training``)."""

SYSTEM_NODE_ROLE_LABEL = ("role", "system")
"""The label every system node carries; controllers select on it."""

GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NO_SCHEDULE"
"""The GPU taint (seed: ``nvidia.com/gpu=true:NoSchedule``): only pods that tolerate it, i.e. GPU
workloads and GPU daemons, land on GPU nodes. ``NO_SCHEDULE`` is the EKS API spelling of
``NoSchedule``."""


def gpu_taint() -> dict[str, str]:
    """The GPU taint in the EKS node group API's shape."""
    return {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}


def gpu_toleration() -> dict[str, str]:
    """The Kubernetes toleration of the GPU taint, for GPU workloads and GPU daemons (seed:
    ``operator: Exists``, so it also matches a taint whose value is not ``true``)."""
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def startup_taint() -> dict[str, str]:
    """The health gate's startup taint in the EKS node group API's shape (no value)."""
    return {"key": STARTUP_TAINT_KEY, "effect": "NO_SCHEDULE"}


def karpenter_startup_taint() -> dict[str, str]:
    """The health gate's startup taint in the Kubernetes spelling a NodePool's ``startupTaints`` take."""
    return {"key": STARTUP_TAINT_KEY, "effect": STARTUP_TAINT_EFFECT}


def gpu_daemon_tolerations() -> list[dict[str, str]]:
    """Tolerations of the daemons every GPU node runs (device plugins, the node monitoring agent's
    DCGM engine, feature discovery, the topology labeler): the GPU taint; the health gate's startup
    taint, since the gate's checks need the GPUs and EFA devices those daemons advertise before it
    lifts it; and its quarantine taint, so the agent keeps watching a quarantined node and reports
    when it recovers. Training pods tolerate neither of the gate's taints."""
    return [
        gpu_toleration(),
        {"key": STARTUP_TAINT_KEY, "operator": "Exists", "effect": STARTUP_TAINT_EFFECT},
        {"key": QUARANTINE_TAINT_KEY, "operator": "Exists", "effect": QUARANTINE_TAINT_EFFECT},
    ]


def gpu_node_selector() -> dict[str, str]:
    """Node selector that matches every GPU training node."""
    key, value = GPU_NODE_ROLE_LABEL
    return {key: value}


GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the NVIDIA device plugin advertises."""
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""The extended resource the EFA device plugin advertises, one per EFA interface."""
HUGEPAGES_RESOURCE = "hugepages-2Mi"
EFA_HUGEPAGES = "5120Mi"
"""Hugepages an EFA pod requests: nodes with the EFA driver pre-allocate 5128 2-MiB pages, and the EKS
user guide's EFA test job requests 5120Mi of ``hugepages-2Mi`` per worker
(docs.aws.amazon.com/eks/latest/userguide/node-efa.html). libfabric's EFA provider allocates its
buffers from them."""

EFA_NODE_HUGEPAGES_2MI = 5128
"""2-MiB pages the EFA driver pre-allocates on a node (EKS user guide, node-efa: 5128 pages); the
kubelet takes them out of the node's allocatable memory."""
EFA_NODE_HUGEPAGES_MIB = EFA_NODE_HUGEPAGES_2MI * 2

HOSTNAME_KEY = "kubernetes.io/hostname"
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
EKS_NODEGROUP_KEY = "eks.amazonaws.com/nodegroup"
"""Label EKS puts on every node of a managed node group, with the group's name (which carries a
generated suffix here, so selectors use ``GPU_POOL_KEY``)."""
GPU_POOL_KEY = "eks-gpu-training/pool"
"""Label on every node of a managed GPU pool with the pool's name: stable across node group
replacements, whose EKS names differ (``nodeGroupNamePrefix``)."""


def network_layer_key(layer: int) -> str:
    """Node label with the ID of the network node at ``layer`` (1 = top, 3 = closest to the instance)."""
    return f"topology.k8s.aws/network-node-layer-{layer}"


KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""Label Karpenter puts on every node it launches, with the NodePool's name (Karpenter 1.14
docs-disruption.md selects a NodePool's nodes by it: ``kubectl delete nodes -l karpenter.sh/nodepool``)."""
