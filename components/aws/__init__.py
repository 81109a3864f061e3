"""AWS infrastructure: the EKS cluster (created or adopted) and its system node group, GPU managed node
groups with their launch templates, placement groups and EFA security groups, IAM roles and the
labeler image repository, the EKS node monitoring agent add-on. Builds on ``config`` and ``facts``."""
