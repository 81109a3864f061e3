"""Kueue's configuration: the controller release, its all-or-nothing admission and the default
topology request of training jobs."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field

from .base import _Model, supported_version

KUEUE_CHART_VERSIONS = ("0.19.2",)
"""Kueue chart versions this library derives values and custom resources for: the CRDs, chart and
docs the tests check against are those of kubernetes-sigs/kueue v0.19.2."""

TOPOLOGY_MODES = ("preferred", "required")
"""How a training job asks Kueue for a network block: ``kueue.x-k8s.io/podset-preferred-topology``
(the block at the level if one has room, else the next level up, else spread) or
``kueue.x-k8s.io/podset-required-topology`` (that block or nothing)."""

BLOCK_NODES = 16
"""Nodes of the largest job that asks for one layer-3 block. EC2 publishes no block size
(DescribeInstanceTopology names each instance's network nodes, not how many share one), so this is
the fleet's to set; a job larger than any block at its level would wait for ever, so a lower value
is the safe side: the job then asks for a layer-2 block."""

PODS_READY_TIMEOUT_MINUTES = 30
"""Minutes from admission until every pod of a job must be Ready, else Kueue evicts and requeues it.
A cold GPU node takes minutes before it is Ready at all (a Karpenter p5 launch, EFA and GPU
daemons), and a training image of 10-20 GB then takes several more minutes to pull and unpack on
250 MiB/s gp3 (the pools' root volume throughput); 30 minutes covers both with room, while a job
that can never start (no capacity behind its quota) gives its quota back within the half hour."""

RECOVERY_TIMEOUT_MINUTES = 15
"""Minutes a running job may have a pod not Ready (a rank restarting, a node replaced) before Kueue
evicts and requeues it. The image is cached on the job's nodes, so a restart is quick; a replacement
node has to boot and pull the image, which the quarter of an hour allows for."""

UNREACHABLE_NODE_SECONDS = 60
"""Seconds a training pod stays on a node that stopped answering before it is evicted. The API
server's default is 300 (the DefaultTolerationSeconds admission plugin), made for services that
may ride out a short partition; a synchronous training job cannot (its collectives stall at once on
a rank that does not answer), so every second is idle GPUs on each of its nodes. A minute rides out
a kubelet restart, and is added to the node lifecycle controller's 50 s grace period and Kueue's
one minute before it fails the evicted pod (``unreachable_node_seconds``)."""


class KueueConfig(_Model):
    """Kueue: all-or-nothing, topology-aware admission of training jobs (one ClusterQueue per
    training namespace, one ResourceFlavor per GPU pool)."""

    enabled: bool = False
    """Install Kueue, its Topology, ResourceFlavors and queues, and queue the stack's training jobs through it. Default: false."""
    chart_version: Annotated[str, supported_version(KUEUE_CHART_VERSIONS)] = KUEUE_CHART_VERSIONS[0]
    """Version of the `kueue` chart (oci://registry.k8s.io/kueue/charts). Default: 0.19.2."""
    topology_mode: Literal["preferred", "required"] = "required"
    """Topology request of jobs on pools with nodes: `required` waits for one block (see `blockNodes`), `preferred` falls back to a wider block, then to several. Default: required."""
    topology_layer: int = Field(default=3, ge=1, le=3)
    """`topology.k8s.aws/network-node-layer-N` a job of at most `blockNodes` nodes asks for (3: the switch closest to the instances). Default: 3."""
    block_nodes: int = Field(default=BLOCK_NODES, ge=1, le=1000)
    """Most nodes a job may have to ask for one block at `topologyLayer`; a larger job asks for one block a layer up. Set it to what one of your layer-3 network nodes serves (docs/architecture.md). Default: 16."""
    pods_ready_timeout_minutes: int = Field(default=PODS_READY_TIMEOUT_MINUTES, ge=1, le=1440)
    """Minutes after admission until all of a job's pods must be Ready, else it is evicted and requeued (cold GPU node plus a multi-GB image pull). Default: 30."""
    block_admission: bool = False
    """Admit the next job only once every admitted job's pods are Ready (Kueue's `waitForPodsReady.blockAdmission`, fleet-wide): one admission per image pull. false: admissions run side by side, each job still whole on the nodes Kueue assigned it. Default: false."""
    recovery_timeout_minutes: Optional[int] = Field(default=RECOVERY_TIMEOUT_MINUTES, ge=1, le=1440)
    """Minutes a running job may miss a Ready pod (its node NotReady, a rank restarting) before Kueue evicts it and requeues it; `null` turns the requeue off (the job waits for its pods however long). Default: 15."""
    unreachable_node_seconds: Optional[int] = Field(default=UNREACHABLE_NODE_SECONDS, ge=0, le=3600)
    """Seconds a training pod stays on a node that stopped answering (its tolerations of `node.kubernetes.io/unreachable` and `not-ready`) before it is evicted; the pod opts in to Kueue's recovery of a pod stuck terminating on an unreachable node (`kueue.x-k8s.io/safe-to-forcefully-delete`, the alpha `FailureRecoveryPolicy` gate), which fails it one minute later so its Job makes the rank again on the node that replaces it. The evicted rank may still run on the cut-off node meanwhile: training code must write checkpoints so that a second writer cannot corrupt them (docs/health.md). `null`: the API server's 300 s, and the rank stays on an unreachable node until the node is deleted. Default: 60."""
    failed_node_replacement: bool = True
    """Let topology-aware scheduling replace a job's failed or deleted node by a free one the job's topology request allows (Kueue's `TASFailedNodeReplacement` gate), and evict and requeue the job at once when there is none (`TASFailedNodeReplacementFailFast`); false: the job should keep its lost node's place until `recoveryTimeoutMinutes`, though Kueue 0.19.2 was seen replacing the node all the same once the lost rank's pod had ended (docs/health.md). Default: true."""
