"""What the platform installs in the cluster: the NVIDIA GPU Operator, the EFA device plugin,
Karpenter with its GPU NodePools and EC2NodeClasses, the topology labeler, and NVIDIA's DCGM Grafana
dashboard. Builds on ``aws``."""
