"""A local Kubernetes cluster for a stack file: upstream etcd, kube-apiserver,
kube-controller-manager and kube-scheduler built from their Go modules, KWOK-simulated nodes for the
stack's fleet, Kueue and Karpenter's KWOK provider, and the platform applied as the stack renders it.

``eks-gpu-training-local up STACK`` (``python -m eks_gpu_training.local``; ``--dry-run`` prints what it
would do); see ``cluster.LocalCluster``, and ``stages`` for its order.
It is the top layer: it runs the offline render and applies what it produced.
"""
