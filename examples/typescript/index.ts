// The in-cluster half of a GPU-training stack from TypeScript: the same components and arguments
// as examples/yaml and examples/python.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as gpu from "@pulumi/eks-gpu-training";

const config = new pulumi.Config();
const cluster = new k8s.Provider("cluster", { kubeconfig: config.require("kubeconfig") });

new gpu.GpuOperator("gpu-operator", {
    // The cluster the provider reaches; nothing is read in AWS.
    cluster: { name: "gpu-training-dev", region: "us-west-2", lookup: false },
    charts: { mirror: config.require("chartMirror") },
}, { providers: [cluster] });

const scheduling = new gpu.SchedulingPolicies("scheduling", {
    namespaces: [{ name: "training", quota: { gpus: 1, cpu: "4", memory: "32Gi", persistentVolumeClaims: 4 } }],
    serviceAccount: "training",
}, { providers: [cluster] });

const queues = new gpu.KueueQueues("queues", {
    flavors: [{
        name: "dev-gpu",
        nodeLabel: ["eks-gpu-training/pool", "dev-gpu"],
        topologyNodes: 0,
        capacity: {
            pool: { name: "dev-gpu", instanceTypes: ["g6e.xlarge"] },
            path: "gpuNodeGroups[0]",
            bound: "gpuNodeGroups[0].maxSize 1 × 1 GPU (g6e.xlarge)",
            gpus: 1, nodes: 1, vcpusPerNode: 4, memoryMibPerNode: 32768, smallestNodeGpus: 1,
        },
    }],
    namespaces: [{ namespace: "training", quotas: { "dev-gpu": { "nvidia.com/gpu": "1", cpu: "4", memory: "32Gi" } } }],
}, { providers: [cluster], dependsOn: [scheduling] });

const job = new gpu.TrainingJob("llama-sft", {
    job: {
        name: "llama-sft", nodes: 1, instanceTypes: ["g6e.xlarge"], priorityClass: "training-critical",
        namespace: "training", queueName: "gpu-queue", command: ["torchrun"], args: ["train.py"],
        image: "public.ecr.aws/deep-learning-containers/pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2",
    },
}, { providers: [cluster], dependsOn: [scheduling, queues] });

export const namespaces = scheduling.namespaceNames;
export const clusterQueues = queues.clusterQueueNames;
export const jobName = job.jobName;
