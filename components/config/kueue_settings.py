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
"""Default of ``kueue.blockNodes``: the most nodes a job may have and still ask for one layer-3
block; a larger job asks for a layer-2 block. EC2 publishes no block size, so the fleet sets it; err
low, as a job larger than every block at its level waits for ever."""

PODS_READY_TIMEOUT_MINUTES = 30
"""Default of ``kueue.podsReadyTimeoutMinutes``: minutes from admission until every pod of a job
must be Ready, else Kueue evicts and requeues it. Room for a cold GPU node's boot and a 10-20 GB
image pull, while a job that can never start gives its quota back within the half hour."""

RECOVERY_TIMEOUT_MINUTES = 15
"""Minutes a running job may have a pod not Ready (a rank restarting, a node replaced) before Kueue
evicts and requeues it. The image is cached on the job's nodes, so a restart is quick; a replacement
node has to boot and pull the image, which the quarter of an hour allows for."""

UNREACHABLE_NODE_SECONDS = 60
"""Default of ``kueue.unreachableNodeSeconds``. The API server's 300 s (DefaultTolerationSeconds)
suits services riding out a partition; a training job's collectives stall at once on a silent
rank, idling every GPU of the job. A minute still rides out a kubelet restart."""


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
    """Seconds a training pod stays on an unreachable or not-ready node before eviction; still terminating a minute later, Kueue fails it (`FailureRecoveryPolicy`) so its Job remakes the rank. Checkpoints must survive a second writer (docs/health.md). `null`: 300 s, and no forced failure. Default: 60."""
    failed_node_replacement: bool = True
    """Replace a job's failed node by a free one its topology request allows (`TASFailedNodeReplacement`), else evict and requeue the job at once (`...FailFast`). false: it keeps the lost node's place until `recoveryTimeoutMinutes`, though Kueue 0.19.2 may still replace it (docs/health.md). Default: true."""
