"""The mock-engine harness the tests use. It lives in ``eks_gpu_training.offline.engine`` (the render command
runs the same engine) and is re-exported here under the names the tests import."""

from eks_gpu_training.offline.engine import *  # noqa: F403
from eks_gpu_training.offline.engine import __all__  # noqa: F401


def research_cluster(network, *, system_node_group: bool = True):
    """A created cluster ``research`` in us-west-2, for tests whose program composes the components
    itself (as another Pulumi program would) instead of using the platform."""
    from eks_gpu_training import EksCluster, EksClusterArgs
    from eks_gpu_training.config import ClusterConfig, SystemNodeGroupConfig

    return EksCluster(
        "c",
        EksClusterArgs(
            cluster=ClusterConfig(name="research", endpoint_public_access_cidrs=["192.0.2.0/24"]),
            network=network,
            system_node_group=SystemNodeGroupConfig(enabled=system_node_group),
            region="us-west-2",
            partition="aws",
        ),
    )
