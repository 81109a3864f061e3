"""What the EKS node monitoring agent and node auto repair are, as plain data: the add-on's namespace
and DaemonSets, and how long each condition stays False before repair acts. The add-on's resource
(``aws.node_monitoring_agent``), the condition table (``offline.node_conditions``), ``verify`` and the
local cluster's simulations read them from here, so the simulations start without the Pulumi SDKs."""

AGENT_NAMESPACE = "kube-system"
"""Namespace EKS installs the add-on's objects in."""
AGENT_DAEMONSETS = ("eks-node-monitoring-agent", "dcgm-server")
"""The add-on's DaemonSets: the agent (the chart's ``fullnameOverride``) and its DCGM host engine
(eks-node-monitoring-agent 1.7.0 chart, ``templates/daemonset.yaml`` and ``templates/dcgm-daemonset.yaml``)."""

REPAIR_AFTER_MINUTES = {
    "AcceleratedHardwareReady": 10,
    "ContainerRuntimeReady": 30,
    "KernelReady": 30,
    "NetworkingReady": 30,
    "StorageReady": 30,
}
"""How long a condition stays False before EKS node auto repair (and Karpenter's NodeRepair) acts
(docs.aws.amazon.com/eks/latest/userguide/node-repair.html; Karpenter 1.14 docs-disruption.md)."""
