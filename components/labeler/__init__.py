"""The topology labeler: a small program that runs in one pod per GPU node and fills in the node's
missing ``topology.k8s.aws/network-node-layer-N`` labels from EC2's ``DescribeInstanceTopology``.

It never overwrites a label that is already set. Its own dependencies are boto3 and the Kubernetes
client only: this package imports nothing from the rest of ``components`` (which needs Pulumi), so
the image copies this folder alone and runs it as the top-level package ``labeler``
(``python -m labeler``); in this repository the same modules are ``eks_gpu_training.labeler``.
"""
