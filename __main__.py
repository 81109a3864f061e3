"""The stack program: read and check this stack's configuration, build the platform, export."""

import pulumi

from eks_gpu_training import PLATFORM_NAME, GpuTrainingInCluster, GpuTrainingPlatform, load_stack_config

config = load_stack_config()
if config.in_cluster.enabled:
    # inCluster: only the in-cluster half, through a kubeconfig; nothing in AWS.
    in_cluster = GpuTrainingInCluster(PLATFORM_NAME, config)
    pulumi.export("gpuOperatorStatus", in_cluster.gpu_operator_status)
else:
    platform = GpuTrainingPlatform(PLATFORM_NAME, config)
    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
    pulumi.export("gpuNodeGroupNames", platform.gpu_node_group_names)
    pulumi.export("placementGroupNames", platform.placement_group_names)
    pulumi.export("karpenterNodePoolNames", platform.karpenter_node_pool_names)
    pulumi.export("karpenterPlacementGroupNames", platform.karpenter_placement_group_names)
