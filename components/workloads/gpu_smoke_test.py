"""The nvidia-smi smoke test: one Job per GPU pool that checks each of the pool's nodes shows all its GPUs.

``smoke_test_job`` is a plain function returning the Job; ``GpuSmokeTest`` creates one per pool,
and `pulumi up` waits for them, so a node whose GPUs the device plugin does not advertise fails
the update.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..config import ConfigError, Problem, image_reference_problem
from ..facts.gpu_nodes import GPU_POOL_KEY
from ..facts.gpu_nodes import GPU_RESOURCE
from .placement import label_in, whole_node_pod
from .training_spec import COMPONENT_LABEL, PART_OF
from ..aws.eks_cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider

SMOKE_TEST_COMPONENT = "gpu-smoke-test"
"""``app.kubernetes.io/component`` of the smoke test's pods (they request GPUs but are not training)."""


def smoke_test_name(pool: str) -> str:
    """``gpu-smoke-test-<pool>``, shortened with a hash of the pool name where that passes 63 characters."""
    name = f"gpu-smoke-test-{pool}"
    if len(name) <= 63:
        return name
    return f"{name[:54]}-{hashlib.sha256(pool.encode()).hexdigest()[:8]}"


def smoke_test_job(pool: str, nodes: int, gpus: int, image: pulumi.Input[str], namespace: str) -> dict[str, Any]:
    """A Job that runs nvidia-smi once on each of a pool's ``nodes`` nodes and fails unless it sees ``gpus`` GPUs.

    Each pod requests every GPU of its node (nvidia-smi shows only the GPUs allocated to the
    container), so a pass also proves the device plugin advertises them all.
    """
    name = smoke_test_name(pool)
    labels = {
        "app": name,
        "app.kubernetes.io/name": "gpu-smoke-test",
        "app.kubernetes.io/instance": name,
        COMPONENT_LABEL: SMOKE_TEST_COMPONENT,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }
    selector = {"matchExpressions": [label_in("app", [name])]}
    container = {
        "name": "nvidia-smi",
        "image": image,
        "command": ["/bin/sh", "-c", f'nvidia-smi && test "$(nvidia-smi -L | wc -l)" -eq {gpus}'],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi", GPU_RESOURCE: str(gpus)},
            "limits": {GPU_RESOURCE: str(gpus)},
        },
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    pod = whole_node_pod(container, (GPU_POOL_KEY, pool), selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "completions": nodes,
            "parallelism": nodes,
            "backoffLimit": nodes,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


@dataclass(frozen=True)
class SmokeTestPool:
    """A GPU pool the smoke test checks."""

    name: str
    """Pool (EKS node group) name."""
    nodes: int
    """Nodes to check: the pool's size at creation."""
    gpus: int
    """GPUs each node must show."""


@documented_args
@dataclass
class GpuSmokeTestArgs:
    """Arguments of ``GpuSmokeTest``."""

    pools: Sequence[SmokeTestPool]
    """Pools to check."""
    namespace: str
    """Namespace of the Jobs."""
    image: pulumi.Input[str]
    """Image with nvidia-smi (an Output of an image built in the same program will do)."""
    timeout_minutes: int
    """How long `pulumi up` waits for each Job to complete."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(GpuSmokeTestArgs)
class GpuSmokeTest(pulumi.ComponentResource):
    """One Job per GPU pool that runs nvidia-smi on each of its nodes; `pulumi up` waits for them
    and fails if a node does not show all its GPUs. Make it depend on the node groups and the GPU
    device plugin, and give it the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    def __init__(self, name: str, args: Optional[GpuSmokeTestArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(GpuSmokeTestArgs, "GpuSmokeTest", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"GpuSmokeTest({name})")
        image_problem = image_reference_problem(args.image)
        if image_problem is not None:
            raise ConfigError([Problem(f"GpuSmokeTest({name}).image", image_problem)])
        super().__init__("eks-gpu-training:index:GpuSmokeTest", name, None, opts)
        for pool in args.pools:
            job = smoke_test_job(pool.name, pool.nodes, pool.gpus, args.image, args.namespace)
            k8s.batch.v1.Job(
                f"{name}-{pool.name}",
                metadata=job["metadata"],
                spec=job["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    delete_before_replace=True,
                    custom_timeouts=pulumi.CustomTimeouts(create=f"{args.timeout_minutes}m", update=f"{args.timeout_minutes}m"),
                ),
            )
        self.register_outputs({})
