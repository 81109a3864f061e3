"""What the platform installs in the cluster: the NVIDIA GPU Operator, the EFA device plugin,
Karpenter with its GPU NodePools and EC2NodeClasses, and the topology labeler. Builds on ``aws``."""
