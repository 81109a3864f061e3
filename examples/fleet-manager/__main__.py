"""A MultiKueue manager of your own: the in-cluster half of a stack on a cluster made elsewhere, whose
ClusterQueues dispatch every training job, whole, to one of the worker stacks it reads by stack
reference (each exports the secret output ``multiKueueKubeconfig``; docs/fleet.md). Configuration:
``kubeconfig`` (the manager cluster's: a path or the document) and ``workers`` (``[{name, stack}]``,
most preferred first)."""

import pulumi

from eks_gpu_training import GpuTrainingInCluster, parse_platform_args

config = pulumi.Config()
args = parse_platform_args({
    "region": "us-west-2",
    "cluster": {"name": "gpu-training-fleet", "create": False},
    "network": {
        "create": False,
        "vpcId": "vpc-0123456789abcdef0",
        "subnets": [{"id": "subnet-0123456789abcdef0", "availabilityZone": "us-west-2a"}],
    },
    # The quota the manager admits jobs on: its workers' GPUs added up. Its own pool has no node;
    # each job runs on a worker, on that worker's pools.
    "gpuNodeGroups": [
        {"name": "dev-gpu", "instanceTypes": ["g6e.xlarge"], "placementGroup": {"mode": "none"},
         "minSize": 0, "desiredSize": 0, "maxSize": 6},
    ],
    "kueue": {"enabled": True},
    # The workers' training namespaces, each in the same team: a job runs there in its own namespace
    # and LocalQueue, under the worker's quota for that team.
    "scheduling": {
        "namespaces": [{"name": "training"}, {"name": "evaluation"}],
        "teams": [
            {"name": "research", "namespaces": ["training"], "quotas": [{"pool": "dev-gpu", "gpus": 4}]},
            {"name": "evaluation", "namespaces": ["evaluation"], "quotas": [{"pool": "dev-gpu", "gpus": 2}]},
        ],
    },
    "inCluster": {"enabled": True, "kubeconfig": config.require("kubeconfig")},
    "multiKueue": {"manager": True, "workers": config.require_object("workers")},
})
fleet = GpuTrainingInCluster("fleet", args)
pulumi.export("admissionCheck", fleet.multikueue_manager.admission_check if fleet.multikueue_manager else None)
