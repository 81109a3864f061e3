"""The stack program: read and check this stack's configuration, build the platform, export."""

import pulumi

from eks_gpu_training import PLATFORM_NAME, GpuTrainingPlatform, load_stack_config

platform = GpuTrainingPlatform(PLATFORM_NAME, load_stack_config())

pulumi.export("clusterName", platform.cluster_name)
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("gpuNodeGroupNames", platform.gpu_node_group_names)
pulumi.export("placementGroupNames", platform.placement_group_names)
pulumi.export("karpenterNodePoolNames", platform.karpenter_node_pool_names)
pulumi.export("karpenterPlacementGroupNames", platform.karpenter_placement_group_names)
