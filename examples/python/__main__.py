"""The in-cluster half of a GPU-training stack, as examples/yaml deploys it through the plugin
package: the GPU Operator release, priority classes and a training namespace with its quota, Kueue's
flavor and queues, and a training job queued through them. Configuration: ``kubeconfig`` (a path or
the document) and ``chartMirror`` (where the GPU Operator's chart comes from)."""

import pulumi
import pulumi_kubernetes as k8s

from eks_gpu_training import (
    ChartSource, ClusterRef, GpuOperator, GpuPoolConfig, KueueQueues, KueueQueuesArgs, NamespacePolicy, NamespaceQueues,
    PoolCapacity, PoolFlavor, ResolvedQuota, SchedulingPolicies, SchedulingPoliciesArgs, TrainingJob,
    TrainingJobArgs, TrainingJobSpec,
)

config = pulumi.Config()
cluster = k8s.Provider("cluster", kubeconfig=config.require("kubeconfig"))
on_cluster = pulumi.ResourceOptions(providers=[cluster])
# The cluster the provider reaches; nothing is read in AWS (YAML's `lookup: false`).
ref = ClusterRef(name="gpu-training-dev", region="us-west-2", partition="aws", vpc_id="", kubernetes_version="1.35",
                 cluster_security_group_id="", kubeconfig="", provider=cluster)
GpuOperator("gpu-operator", cluster=ref, charts=ChartSource(mirror=config.require("chartMirror")), opts=on_cluster)
scheduling = SchedulingPolicies(
    "scheduling",
    SchedulingPoliciesArgs(namespaces=[NamespacePolicy("training", ResolvedQuota(gpus=1, cpu="4", memory="32Gi", persistent_volume_claims=4))],
                           service_account="training"),
    opts=on_cluster,
)
pool = GpuPoolConfig(name="dev-gpu", instance_types=["g6e.xlarge"])
capacity = PoolCapacity(pool=pool, path="gpuNodeGroups[0]", bound="gpuNodeGroups[0].maxSize 1 × 1 GPU (g6e.xlarge)",
                        gpus=1, nodes=1, vcpus_per_node=4, memory_mib_per_node=32768, smallest_node_gpus=1)
queues = KueueQueues(
    "queues",
    KueueQueuesArgs(
        flavors=[PoolFlavor("dev-gpu", capacity, ("eks-gpu-training/pool", "dev-gpu"), topology_nodes=0)],
        namespaces=[NamespaceQueues("training", {"dev-gpu": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"}})],
    ),
    opts=pulumi.ResourceOptions(providers=[cluster], depends_on=[scheduling]),
)
job = TrainingJob(
    "llama-sft",
    TrainingJobArgs(job=TrainingJobSpec(
        name="llama-sft", nodes=1, instance_types=("g6e.xlarge",), priority_class="training-critical", namespace="training",
        image="public.ecr.aws/deep-learning-containers/pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2",
        command=("torchrun",), args=("train.py",), queue_name="gpu-queue",
    )),
    opts=pulumi.ResourceOptions(providers=[cluster], depends_on=[scheduling, queues]),
)
pulumi.export("namespaces", scheduling.namespace_names)
pulumi.export("clusterQueues", queues.cluster_queue_names)
pulumi.export("job", job.job_name)
