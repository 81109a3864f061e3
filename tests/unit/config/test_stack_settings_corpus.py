"""A corpus of stack configurations a new user might write: each invalid one is a small mutation of
the prod stack, refused before anything is registered with its key path and no traceback; each valid
variant is accepted. Prod's namespaces belong to teams, whose quotas name its pools: a mutation that
renames a pool or a namespace renames it in the teams too (``renamed_pool``, ``renamed_namespace``),
and the cases about a namespace's own quota start from prod without teams (``NO_TEAMS``), whose one
namespace has a quota of its own.

Most cases run through ``platform_args_from_settings``, the function ``__main__.py`` calls (through
``load_stack_config``) before it constructs anything, so a refusal there registers nothing. A few
cases run the whole ``__main__.py`` under the mock engine to show exactly that.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Callable

import pytest

from eks_gpu_training.config import ConfigError
from eks_gpu_training.platform.loading import platform_args_from_settings
from tests.support.builders import scheduling_without_teams
from tests.support.harness import run_main, stack_config
from tests.support.harness import refusal_text

PREFIX = "eks-gpu-training:"
Config = dict[str, Any]
Mutation = Callable[[Config], None]


def prod() -> Config:
    """The prod stack's settings as plain data keyed without the project prefix, region included."""
    settings = stack_config("prod")
    raw = {key[len(PREFIX):]: value for key, value in settings.items() if key.startswith(PREFIX)}
    return copy.deepcopy({**raw, "region": settings["aws:region"]})


def to_settings(raw: Config) -> Config:
    return {"aws:region": raw["region"], **{PREFIX + k: v for k, v in raw.items() if k != "region"}}


def _walk(config: Config, path: str) -> tuple[Any, Any]:
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]
    node = config
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    return node, parts[-1]


def S(path: str, value: Any) -> Mutation:
    """Set the key at ``path`` (``gpuNodeGroups[0].labels``) to ``value``."""

    def mutate(config: Config) -> None:
        node, key = _walk(config, path)
        node[key] = copy.deepcopy(value)

    return mutate


def D(path: str) -> Mutation:
    """Delete the key at ``path``."""

    def mutate(config: Config) -> None:
        node, key = _walk(config, path)
        del node[key]

    return mutate


def L(path: str, key: str, value: Any) -> Mutation:
    """Add ``key: value`` to the map at ``path`` (labels, tags)."""

    def mutate(config: Config) -> None:
        node, last = _walk(config, path)
        node.setdefault(last, {})[key] = value

    return mutate


def A(path: str, value: Any) -> Mutation:
    """Append ``value`` to the list at ``path``."""

    def mutate(config: Config) -> None:
        node, last = _walk(config, path)
        node.setdefault(last, []).append(copy.deepcopy(value))

    return mutate


def all_of(*mutations: Mutation) -> Mutation:
    def mutate(config: Config) -> None:
        for mutation in mutations:
            mutation(config)

    return mutate


def NO_TEAMS(config: Config) -> None:
    """Prod as it was before teams (``builders.without_teams``): its namespace ``training`` with a
    quota and a ClusterQueue of its own, its app rl-training, no teams."""
    config["scheduling"] = scheduling_without_teams(config["scheduling"])


def renamed_pool(old: str, new: str) -> Mutation:
    """Rename a GPU pool wherever the stack names it: the pool, the apps on it, the teams' quotas."""

    def mutate(config: Config) -> None:
        for pool in [*config.get("gpuNodeGroups", []), *config.get("karpenter", {}).get("gpuNodePools", [])]:
            if pool["name"] == old:
                pool["name"] = new
        for item in [*config["scheduling"].get("trainingApps", []),
                     *(q for t in config["scheduling"].get("teams", []) for q in t.get("quotas", []))]:
            if item.get("pool") == old:
                item["pool"] = new

    return mutate


def renamed_namespace(old: str, new: str) -> Mutation:
    """Rename a training namespace wherever the stack names it: the namespace, its apps, its team."""

    def mutate(config: Config) -> None:
        scheduling = config["scheduling"]
        for namespace in scheduling.get("namespaces", []):
            if namespace["name"] == old:
                namespace["name"] = new
        for app in scheduling.get("trainingApps", []):
            if app.get("namespace") == old:
                app["namespace"] = new
        for team in scheduling.get("teams", []):
            team["namespaces"] = [new if n == old else n for n in team.get("namespaces", [])]

    return mutate


def team_share(pool: str, gpus: int) -> Mutation:
    """Give every team ``gpus`` of ``pool`` (prod's teams hold half of each pool each)."""

    def mutate(config: Config) -> None:
        for team in config["scheduling"]["teams"]:
            for quota in team["quotas"]:
                if quota["pool"] == pool:
                    quota["gpus"] = gpus

    return mutate


def without_team_quotas(pool: str) -> Mutation:
    """Drop the teams' quotas on ``pool`` (a pool the mutation removes)."""

    def mutate(config: Config) -> None:
        for team in config["scheduling"]["teams"]:
            team["quotas"] = [q for q in team["quotas"] if q["pool"] != pool]

    return mutate


G = "gpuNodeGroups[0]"
K = "karpenter.gpuNodePools[0]"
APP = "scheduling.trainingApps[0]"
TRAIN_JOB = "scheduling.trainingApps[1]"
"""Prod's finetune, a TrainJob of team research."""
TEAM = "scheduling.teams[0]"
"""Prod's team pretraining: 8 GPUs of each pool, namespace training."""
ADMIN = "arn:aws:iam::444455556666:role/platform-admin"
POOL = {"name": "p5-training", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b", "maxSize": 2}
KPOOL = {"name": "gpu-training", "instanceTypes": ["p5.48xlarge"], "availabilityZone": "us-west-2b", "gpuLimit": 16}
DIGEST = "sha256:" + "0" * 64

INVALID: list[tuple[str, Mutation, str]] = [
    # region and top-level keys
    ("unknown region", S("region", "us-west-9"), "region"),
    ("unknown top-level key", S("gpuPools", []), "gpuPools"),
    ("top-level section of the wrong type", S("network", "vpc-0f1e2d3c4b5a69788"), "network"),
    # cluster
    ("cluster name starting with a dash", S("cluster.name", "-prod"), "cluster.name"),
    ("cluster name over 100 characters", S("cluster.name", "c" * 101), "cluster.name"),
    ("cluster name with a dot", S("cluster.name", "gpu.prod"), "cluster.name"),
    ("missing cluster name", D("cluster.name"), "cluster.name"),
    ("unquoted kubernetes version 1.30", S("cluster.kubernetesVersion", 1.3), "cluster.kubernetesVersion"),
    ("unquoted kubernetes version 1.34", S("cluster.kubernetesVersion", 1.34), "cluster.kubernetesVersion"),
    ("kubernetes version out of support", S("cluster.kubernetesVersion", "1.29"), "cluster.kubernetesVersion"),
    ("kubernetes version with a v", S("cluster.kubernetesVersion", "v1.34"), "cluster.kubernetesVersion"),
    ("same admin principal twice", S("cluster.adminPrincipalArns", [ADMIN, ADMIN]), "cluster.adminPrincipalArns[1]"),
    ("admin principal that is not an ARN", S("cluster.adminPrincipalArns", ["platform-admin"]), "cluster.adminPrincipalArns[0]"),
    ("admin principal that is a group", S("cluster.adminPrincipalArns", ["arn:aws:iam::444455556666:group/admins"]), "cluster.adminPrincipalArns[0]"),
    ("same admin principal under another path", S("cluster.adminPrincipalArns", [ADMIN, ADMIN.replace("role/", "role/team/")]), "cluster.adminPrincipalArns[1]"),
    ("same admin principal in another case", S("cluster.adminPrincipalArns", [ADMIN, ADMIN.upper().replace("ARN:AWS:IAM::", "arn:aws:iam::").replace(":ROLE/", ":role/")]), "cluster.adminPrincipalArns[1]"),
    ("creator principal that is not an ARN", S("cluster.creatorPrincipalArn", "ci-deployer"), "cluster.creatorPrincipalArn"),
    ("creator principal that is an assumed-role session", S("cluster.creatorPrincipalArn", "arn:aws:sts::444455556666:assumed-role/ci/run-1"), "cluster.creatorPrincipalArn"),
    ("unknown log type", S("cluster.enabledLogTypes", ["api", "kubelet"]), "cluster.enabledLogTypes"),
    ("no API endpoint at all", S("cluster.endpointPrivateAccess", False), "cluster.endpointPrivateAccess"),
    ("create that is not a boolean", S("cluster.create", "sometimes"), "cluster.create"),
    ("unknown cluster key", S("cluster.version", "1.34"), "cluster.version"),
    # network
    ("malformed VPC id", S("network.vpcId", "vpc-123"), "network.vpcId"),
    ("no subnets", S("network.subnets", []), "network.subnets"),
    ("malformed subnet id", S("network.subnets[0].id", "subnet-xyz"), "network.subnets[0].id"),
    ("subnet in another region", S("network.subnets[0].availabilityZone", "us-east-1a"), "network.subnets[0].availabilityZone"),
    ("malformed availability zone", S("network.subnets[0].availabilityZone", "us-west-2"), "network.subnets[0].availabilityZone"),
    ("same subnet twice", A("network.subnets", {"id": "subnet-0f1e2d3c4b5a60001", "availabilityZone": "us-west-2a"}), "network.subnets[3].id"),
    ("every subnet in one AZ", S("network.subnets", [{"id": "subnet-0f1e2d3c4b5a60002", "availabilityZone": "us-west-2b"}]), "network.subnets"),
    ("subnet without AZ", D("network.subnets[0].availabilityZone"), "network.subnets[0].availabilityZone"),
    # system node group
    ("system node group off on a created cluster", S("systemNodeGroup.enabled", False), "systemNodeGroup.enabled"),
    ("system instance type misspelt", S("systemNodeGroup.instanceTypes", ["m7i.xl"]), "systemNodeGroup.instanceTypes[0]"),
    ("system instance types empty", S("systemNodeGroup.instanceTypes", []), "systemNodeGroup.instanceTypes"),
    ("system group on an NVIDIA AMI", S("systemNodeGroup.amiType", "AL2023_x86_64_NVIDIA"), "systemNodeGroup.amiType"),
    ("system type whose allocatable is unknown", S("systemNodeGroup.instanceTypes", ["t3.large"]), "systemNodeGroup.instanceTypes[0]"),
    ("add-on pin that is not an EKS build", S("cluster.corednsVersion", "1.11.4"), "cluster.corednsVersion"),
    ("system group on an end-of-life AMI", S("systemNodeGroup.amiType", "AL2_x86_64"), "systemNodeGroup.amiType"),
    ("system AMI type unknown", S("systemNodeGroup.amiType", "UBUNTU"), "systemNodeGroup.amiType"),
    ("system minSize above maxSize", S("systemNodeGroup.minSize", 5), "systemNodeGroup.minSize"),
    ("system desiredSize above maxSize", S("systemNodeGroup.desiredSize", 9), "systemNodeGroup.desiredSize"),
    ("system disk too small", S("systemNodeGroup.diskSizeGib", 10), "systemNodeGroup.diskSizeGib"),
    ("system size negative", S("systemNodeGroup.minSize", -1), "systemNodeGroup.minSize"),
    # managed GPU pools
    ("pool name in upper case", S(f"{G}.name", "P5-Training"), f"{G}.name"),
    ("38-character pool name breaks its node role", S(f"{G}.name", "p5-training-" + "x" * 26), f"{G}.name"),
    ("pool name over 63 characters", S(f"{G}.name", "p" * 64), f"{G}.name"),
    ("pool without name", D(f"{G}.name"), f"{G}.name"),
    ("CPU instance type in a GPU pool", S(f"{G}.instanceTypes", ["m7i.48xlarge"]), f"{G}.instanceTypes[0]"),
    ("misspelt instance type", S(f"{G}.instanceTypes", ["p5.48xl"]), f"{G}.instanceTypes[0]"),
    ("fractional GPU type", S(f"{G}.instanceTypes", ["g6f.4xlarge"]), f"{G}.instanceTypes[0]"),
    ("ARM GPU type", S(f"{G}.instanceTypes", ["g5g.16xlarge"]), f"{G}.instanceTypes[0]"),
    ("instance type twice", S(f"{G}.instanceTypes", ["p5.48xlarge", "p5.48xlarge"]), f"{G}.instanceTypes"),
    ("no instance types", S(f"{G}.instanceTypes", []), f"{G}.instanceTypes"),
    ("ARM NVIDIA AMI on x86 types", S(f"{G}.amiType", "AL2023_ARM_64_NVIDIA"), f"{G}.amiType"),
    ("Bottlerocket ARM AMI on x86 types", S(f"{G}.amiType", "BOTTLEROCKET_ARM_64_NVIDIA"), f"{G}.amiType"),
    ("standard AMI on a GPU pool", S(f"{G}.amiType", "AL2023_x86_64_STANDARD"), f"{G}.amiType"),
    ("end-of-life GPU AMI", S(f"{G}.amiType", "AL2_x86_64_GPU"), f"{G}.amiType"),
    ("spot GPU pool", S(f"{G}.capacityType", "SPOT"), f"{G}.capacityType"),
    ("unknown capacity type", S(f"{G}.capacityType", "RESERVED"), f"{G}.capacityType"),
    ("capacity block without reservation", all_of(S(f"{G}.capacityType", "CAPACITY_BLOCK"), S(f"{G}.placementGroup.mode", "none")), f"{G}.capacityReservationId"),
    ("malformed reservation id", S(f"{G}.capacityReservationId", "cr-123"), f"{G}.capacityReservationId"),
    ("capacity block of two types", all_of(S(f"{G}.capacityType", "CAPACITY_BLOCK"), S(f"{G}.capacityReservationId", "cr-0123456789abcdef0"), S(f"{G}.placementGroup.mode", "none"), S(f"{G}.instanceTypes", ["p5.48xlarge", "p5e.48xlarge"])), f"{G}.instanceTypes"),
    ("reservation forced into a new placement group", S(f"{G}.capacityReservationId", "cr-0123456789abcdef0"), f"{G}.placementGroup.mode"),
    ("pool minSize above maxSize", S(f"{G}.minSize", 3), f"{G}.minSize"),
    ("pool desiredSize above maxSize", S(f"{G}.desiredSize", 3), f"{G}.desiredSize"),
    ("pool maxSize zero", S(f"{G}.maxSize", 0), f"{G}.maxSize"),
    ("pool desiredSize negative", S(f"{G}.desiredSize", -1), f"{G}.desiredSize"),
    ("pool AZ without a subnet", S(f"{G}.availabilityZone", "us-west-2d"), f"{G}.availabilityZone"),
    ("pool AZ malformed", S(f"{G}.availabilityZone", "west-2b"), f"{G}.availabilityZone"),
    ("pool subnet not in the network", S(f"{G}.subnetIds", ["subnet-0f1e2d3c4b5a69999"]), f"{G}.subnetIds[0]"),
    ("pool subnet twice", S(f"{G}.subnetIds", ["subnet-0f1e2d3c4b5a60002", "subnet-0f1e2d3c4b5a60002"]), f"{G}.subnetIds[1]"),
    ("pool subnets empty", S(f"{G}.subnetIds", []), f"{G}.subnetIds"),
    ("pool subnet in another AZ", S(f"{G}.subnetIds", ["subnet-0f1e2d3c4b5a60001"]), f"{G}.subnetIds[0]"),
    ("placement group without AZ", D(f"{G}.availabilityZone"), f"{G}.availabilityZone"),
    ("existing placement group without name", S(f"{G}.placementGroup", {"mode": "existing"}), f"{G}.placementGroup.name"),
    ("placement group name with mode create", S(f"{G}.placementGroup.name", "pg"), f"{G}.placementGroup.name"),
    ("spread placement strategy", S(f"{G}.placementGroup.strategy", "spread"), f"{G}.placementGroup.strategy"),
    ("unknown placement mode", S(f"{G}.placementGroup.mode", "auto"), f"{G}.placementGroup.mode"),
    ("EFA on a type without EFA", all_of(S(f"{G}.instanceTypes", ["g6e.xlarge"]), S(f"{G}.efa", "enabled")), f"{G}.efa"),
    ("EFA setting misspelt", S(f"{G}.efa", "on"), f"{G}.efa"),
    ("root volume too small", S(f"{G}.rootVolumeSizeGib", 50), f"{G}.rootVolumeSizeGib"),
    ("node-role label the kubelet refuses", L(f"{G}.labels", "node-role.kubernetes.io/gpu", ""), f"{G}.labels.node-role.kubernetes.io/gpu"),
    ("kubernetes.io label the kubelet refuses", L(f"{G}.labels", "kubernetes.io/role", "gpu"), f"{G}.labels.kubernetes.io/role"),
    ("k8s.io label the kubelet refuses", L(f"{G}.labels", "k8s.io/team", "ml"), f"{G}.labels.k8s.io/team"),
    ("k8s.io subdomain label", L(f"{G}.labels", "team.k8s.io/name", "ml"), f"{G}.labels.team.k8s.io/name"),
    ("node-restriction label", L(f"{G}.labels", "node-restriction.kubernetes.io/pool", "p5"), f"{G}.labels.node-restriction.kubernetes.io/pool"),
    ("role label overridden", L(f"{G}.labels", "role", "training"), f"{G}.labels.role"),
    ("MIG through a label", L(f"{G}.labels", "nvidia.com/mig.config", "all-1g.10gb"), f"{G}.labels.nvidia.com/mig.config"),
    ("time-slicing through a label", L(f"{G}.labels", "nvidia.com/device-plugin.config", "shared"), f"{G}.labels.nvidia.com/device-plugin.config"),
    ("label value with a space", L(f"{G}.labels", "team", "ml platform"), f"{G}.labels.team"),
    ("label key starting with a dash", L(f"{G}.labels", "-team", "ml"), f"{G}.labels.-team"),
    ("label value over 63 characters", L(f"{G}.labels", "team", "t" * 64), f"{G}.labels.team"),
    ("empty label value EKS refuses", L(f"{G}.labels", "example.com/spare", ""), f"{G}.labels.example.com/spare"),
    ("label key over EKS's 63 characters", L(f"{G}.labels", "research.example.com/" + "k" * 43, "v"), f"{G}.labels.research.example.com/" + "k" * 43),
    ("update maxUnavailable zero", S(f"{G}.updateMaxUnavailable", 0), f"{G}.updateMaxUnavailable"),
    ("pool name used twice", A("gpuNodeGroups", {**POOL, "minSize": 0}), "gpuNodeGroups[1].name"),
    ("unknown pool key", S(f"{G}.spot", False), f"{G}.spot"),
    # GPU Operator
    ("GPU Operator chart not tested", S("gpuOperator.chartVersion", "v23.9.0"), "gpuOperator.chartVersion"),
    ("GPU Operator chart without v", S("gpuOperator.chartVersion", "26.7.0"), "gpuOperator.chartVersion"),
    ("MIG strategy single", S("gpuOperator.migStrategy", "single"), "gpuOperator.migStrategy"),
    ("time-slicing replicas", S("gpuOperator.timeSlicingReplicas", 4), "gpuOperator.timeSlicingReplicas"),
    ("ServiceMonitor labels without Prometheus", S("gpuOperator.serviceMonitorLabels", {"release": "kps"}), "gpuOperator.serviceMonitorLabels"),
    ("ServiceMonitor label invalid", all_of(S("gpuOperator.prometheusOperator", True), S("gpuOperator.serviceMonitorLabels", {"release": "kube prometheus"})), "gpuOperator.serviceMonitorLabels.release"),
    # topology labeler
    ("labeler image with upper-case path", S("topologyLabeler.image", f"123456789012.dkr.ecr.us-west-2.amazonaws.com/Topology@{DIGEST}"), "topologyLabeler.image"),
    ("labeler image on latest", S("topologyLabeler.image", "ghcr.io/acme/labeler:latest"), "topologyLabeler.image"),
    ("labeler image with a truncated digest", S("topologyLabeler.image", "ghcr.io/acme/labeler@sha256:abc123"), "topologyLabeler.image"),
    ("labeler interval too short", S("topologyLabeler.intervalSeconds", 10), "topologyLabeler.intervalSeconds"),
    ("labeler CPU request above limit", S("topologyLabeler.resources", {"cpuRequest": "2", "cpuLimit": "250m"}), "topologyLabeler.resources.cpuRequest"),
    ("labeler memory not a quantity", S("topologyLabeler.resources", {"memoryLimit": "256 MB"}), "topologyLabeler.resources.memoryLimit"),
    # Karpenter
    ("Karpenter chart before v1", S("karpenter.chartVersion", "0.37.0"), "karpenter.chartVersion"),
    ("Karpenter chart not tested", S("karpenter.chartVersion", "1.0.0"), "karpenter.chartVersion"),
    ("Karpenter chart with v", S("karpenter.chartVersion", "v1.14.1"), "karpenter.chartVersion"),
    ("Karpenter pools while disabled", S("karpenter.enabled", False), "karpenter.enabled"),
    ("Karpenter pool name in upper case", S(f"{K}.name", "GPU"), f"{K}.name"),
    ("Karpenter pool name twice", A("karpenter.gpuNodePools", KPOOL), "karpenter.gpuNodePools[1].name"),
    ("Karpenter pool whose placement group name a managed pool has", S(f"{G}.name", "karpenter-gpu-training"), f"{K}.name"),
    ("Karpenter spot", S(f"{K}.capacityTypes", ["spot"]), f"{K}.capacityTypes[0]"),
    ("Karpenter capacity type misspelt", S(f"{K}.capacityTypes", ["ondemand"]), f"{K}.capacityTypes[0]"),
    ("Karpenter capacity type twice", S(f"{K}.capacityTypes", ["on-demand", "on-demand"]), f"{K}.capacityTypes"),
    ("Karpenter reserved without reservations", S(f"{K}.capacityTypes", ["reserved"]), f"{K}.capacityTypes"),
    ("Karpenter reservations without reserved", all_of(S(f"{K}.capacityReservationIds", ["cr-0123456789abcdef0"]), S(f"{K}.placementGroup.mode", "none")), f"{K}.capacityReservationIds"),
    ("Karpenter reservation id malformed", S(f"{K}.capacityReservationIds", ["cr-1"]), f"{K}.capacityReservationIds"),
    ("Karpenter gpuLimit below one node", S(f"{K}.gpuLimit", 4), f"{K}.gpuLimit"),
    ("Karpenter gpuLimit zero", S(f"{K}.gpuLimit", 0), f"{K}.gpuLimit"),
    ("Karpenter-restricted label", L(f"{K}.labels", "karpenter.sh/capacity-type", "on-demand"), f"{K}.labels.karpenter.sh/capacity-type"),
    ("kubelet-refused label on a Karpenter pool", L(f"{K}.labels", "node-role.kubernetes.io/gpu", "true"), f"{K}.labels.node-role.kubernetes.io/gpu"),
    ("Karpenter consolidateAfter in words", S(f"{K}.disruption", {"consolidateAfter": "10 minutes"}), f"{K}.disruption.consolidateAfter"),
    ("Karpenter budget schedule without duration", S(f"{K}.disruption", {"budgets": [{"nodes": "1", "schedule": "@daily"}]}), f"{K}.disruption.budgets[0]"),
    ("Karpenter budget nodes not a count", S(f"{K}.disruption", {"budgets": [{"nodes": "some"}]}), f"{K}.disruption.budgets[0].nodes"),
    ("Karpenter expireAfter in days", S(f"{K}.disruption", {"expireAfter": "7d"}), f"{K}.disruption.expireAfter"),
    ("Karpenter pool of CPU types", S(f"{K}.instanceTypes", ["c7i.48xlarge"]), f"{K}.instanceTypes[0]"),
    ("Karpenter EFA on a type without EFA", S(f"{K}.instanceTypes", ["g6e.xlarge"]), f"{K}.efa"),
    ("Karpenter placement group without AZ", D(f"{K}.availabilityZone"), f"{K}.availabilityZone"),
    # tags
    ("comma in a tag value", L("tags", "team", "ml,platform"), "tags.team"),
    ("reserved aws: tag", L("tags", "aws:owner", "me"), "tags.aws:owner"),
    ("tag key over 128 characters", L("tags", "k" * 129, "v"), "tags." + "k" * 129),
    ("tag value over 256 characters", L("tags", "note", "v" * 257), "tags.note"),
    ("tag key with a hash", L("tags", "cost#center", "42"), "tags.cost#center"),
    ("tag value with an asterisk", L("tags", "scope", "ml*"), "tags.scope"),
    ("tag keys differing only in case", L("tags", "Owner", "ml"), "tags.Owner"),
    ("tag Karpenter sets itself", L("tags", "karpenter.sh/nodepool", "x"), "tags.karpenter.sh/nodepool"),
    ("tag value that is a list", L("tags", "teams", ["a", "b"]), "tags.teams"),
    # scheduling
    ("training app without namespaces", all_of(NO_TEAMS, S("scheduling.namespaces", [])), f"{APP}.namespace"),
    ("kube-system as a training namespace", renamed_namespace("training", "kube-system"), "scheduling.namespaces[0].name"),
    ("the GPU Operator's namespace as a training namespace", renamed_namespace("training", "gpu-operator"), "scheduling.namespaces[0].name"),
    ("the labeler's namespace as a training namespace", renamed_namespace("training", "topology-labeler"), "scheduling.namespaces[0].name"),
    ("namespace twice", A("scheduling.namespaces", {"name": "training"}), "scheduling.namespaces[2].name"),
    ("namespace name with upper case", S("scheduling.namespaces[0].name", "Training"), "scheduling.namespaces[0].name"),
    ("quota beyond the fleet", all_of(NO_TEAMS, S("scheduling.namespaces[0].quota.gpus", 1000)), "scheduling.namespaces[0].quota.gpus"),
    ("quota below one node", all_of(NO_TEAMS, S("scheduling.namespaces[0].quota.gpus", 4)), "scheduling.namespaces[0].quota.gpus"),
    ("priority class twice", S("scheduling.priorityClasses", [{"name": "a", "value": 1}, {"name": "a", "value": 2}]), "scheduling.priorityClasses[1].name"),
    ("system- priority class", S("scheduling.priorityClasses", [{"name": "system-train", "value": 1}]), "scheduling.priorityClasses[0].name"),
    ("priority value reserved for the system", S("scheduling.priorityClasses", [{"name": "top", "value": 2_000_000_000}]), "scheduling.priorityClasses[0].value"),
    ("app on an unknown pool", S(f"{APP}.pool", "h100"), f"{APP}.pool"),
    ("app in an unknown namespace", S(f"{APP}.namespace", "evaluation"), f"{APP}.namespace"),
    ("app image with upper-case path", S(f"{APP}.job.image", "public.ecr.aws/Acme/Train:1.0"), f"{APP}.job.image"),
    ("app image with a truncated digest", S(f"{APP}.job.image", "public.ecr.aws/acme/train@sha256:0123"), f"{APP}.job.image"),
    ("app image with a space", S(f"{APP}.job.image", "acme/train 1.0"), f"{APP}.job.image"),
    ("app image empty", S(f"{APP}.job.image", ""), f"{APP}.job.image"),
    ("app on zero nodes", S(f"{APP}.nodes", 0), f"{APP}.nodes"),
    ("app on more nodes than the pool has", S(f"{APP}.nodes", 5), f"{APP}.nodes"),
    ("app with an unknown priority class", S(f"{APP}.priorityClass", "urgent"), f"{APP}.priorityClass"),
    ("host network in a baseline namespace", S(f"{APP}.hostNetwork", True), f"{APP}.hostNetwork"),
    ("app name too long", S(f"{APP}.name", "a" * 51), f"{APP}.name"),
    ("app twice", A("scheduling.trainingApps", {"name": "rl-training", "nodes": 1, "pool": "p5-training"}), "scheduling.trainingApps[2].name"),
    ("rendezvous port zero", S(f"{APP}.job.rendezvousPort", 0), f"{APP}.job.rendezvousPort"),
    ("app instance type outside its pool", S(f"{APP}.instanceTypes", ["p4d.24xlarge"]), f"{APP}.instanceTypes[0]"),
    ("pool name shared by a managed and a Karpenter pool", all_of(NO_TEAMS, S(f"{K}.name", "p5-training")), f"{APP}.pool"),
    # With teams, a team's quota on the shared name could not say which pool it is for.
    ("team quota on a pool name two pools share", all_of(S(f"{K}.name", "p5-training"), without_team_quotas("gpu-training")),
     f"{TEAM}.quotas[0].pool"),
    # job kinds
    ("unknown job kind", S(f"{APP}.kind", "PyTorchJob"), f"{APP}.kind"),
    ("group restarts on a Job", S(f"{APP}.job.maxRestarts", 2), f"{APP}.job.maxRestarts"),
    ("group restarts beyond the limit", S(f"{TRAIN_JOB}.job.maxRestarts", 101), f"{TRAIN_JOB}.job.maxRestarts"),
    ("job kind without a job", all_of(S(f"{APP}.kind", "JobSet"), D(f"{APP}.job")), f"{APP}.kind"),
    ("TrainJob with Trainer turned off", S("trainer", {"enabled": False}), f"{TRAIN_JOB}.kind"),
    ("TrainJob with JobSet turned off", S("jobSet", {"enabled": False}), f"{TRAIN_JOB}.kind"),
    ("JobSet chart not tested", S("jobSet.chartVersion", "0.8.0"), "jobSet.chartVersion"),
    ("Trainer chart not tested", S("trainer.chartVersion", "2.0.0"), "trainer.chartVersion"),
    # teams
    ("teams without Kueue", S("kueue.enabled", False), "scheduling.teams"),
    ("team namespace with a GPU quota of its own", S("scheduling.namespaces[0].quota.gpus", 16), "scheduling.namespaces[0].quota.gpus"),
    ("team namespace with a CPU quota of its own", S("scheduling.namespaces[1].quota", {"cpu": "384"}), "scheduling.namespaces[1].quota.cpu"),
    ("namespace in no team", A("scheduling.namespaces", {"name": "evaluation"}), "scheduling.namespaces[2].name"),
    ("team namespaces missing from the namespaces", S("scheduling.namespaces", []), f"{TEAM}.namespaces[0]"),
    ("namespace of two teams", A("scheduling.teams[1].namespaces", "training"), "scheduling.teams[1].namespaces[1]"),
    ("team without namespaces", S("scheduling.teams[1].namespaces", []), "scheduling.teams[1].namespaces"),
    ("team name twice", S("scheduling.teams[1].name", "pretraining"), "scheduling.teams[1].name"),
    ("team name with upper case", S(f"{TEAM}.name", "PreTraining"), f"{TEAM}.name"),
    ("team quota on an unknown pool", S(f"{TEAM}.quotas[0].pool", "h100"), f"{TEAM}.quotas[0].pool"),
    ("team quota on a pool twice", A(f"{TEAM}.quotas", {"pool": "p5-training", "gpus": 0}), f"{TEAM}.quotas[2].pool"),
    ("teams' quotas beyond the pool", S("scheduling.teams[1].quotas[0].gpus", 16), "scheduling.teams[1].quotas[0].gpus"),
    ("team quota of negative GPUs", S(f"{TEAM}.quotas[0].gpus", -8), f"{TEAM}.quotas[0].gpus"),
    ("lending limit above the team's quota", S(f"{TEAM}.quotas[0].lendingLimit", 9), f"{TEAM}.quotas[0].lendingLimit"),
    ("borrowing limit beyond what the other teams hold", S(f"{TEAM}.quotas[0].borrowingLimit", 9), f"{TEAM}.quotas[0].borrowingLimit"),
    ("app beyond what its team reaches", S(f"{TEAM}.quotas[0].borrowingLimit", 4), f"{APP}.nodes"),
    ("team weight negative", S(f"{TEAM}.weight", -1), f"{TEAM}.weight"),
    # training pods' AWS access
    ("S3 bucket name in upper case", S("s3Buckets[0].name", "Datasets"), "s3Buckets[0].name"),
    ("S3 bucket access misspelt", S("s3Buckets[1].access", "write"), "s3Buckets[1].access"),
    ("S3 bucket twice", A("s3Buckets", {"name": "gpu-training-prod-datasets"}), "s3Buckets"),
    ("training policy that is not a policy ARN", S("scheduling.serviceAccount", {"policyArns": ["arn:aws:iam::444455556666:role/x"]}), "scheduling.serviceAccount.policyArns[0]"),
    # smoke test
    ("smoke test image with upper case", S("smokeTest", {"enabled": True, "image": "nvcr.io/NVIDIA/cuda:12.8.1-base-ubuntu24.04"}), "smokeTest.image"),
    ("smoke test in an unknown namespace", S("smokeTest", {"enabled": True, "namespace": "smoke"}), "smokeTest.namespace"),
    # With teams every namespace is a team's, where Kueue holds the smoke test's unlabelled Job.
    ("smoke test with teams", S("smokeTest", {"enabled": True}), "smokeTest.enabled"),
    ("smoke test without namespaces", all_of(NO_TEAMS, S("scheduling.namespaces", []), S("scheduling.trainingApps", []), S("smokeTest", {"enabled": True})), "smokeTest.namespace"),
    ("smoke test timeout zero", S("smokeTest", {"enabled": True, "timeoutMinutes": 0}), "smokeTest.timeoutMinutes"),
    ("smoke test with no node to check", all_of(S(f"{G}.minSize", 0), S(f"{G}.desiredSize", 0), S("smokeTest", {"enabled": True})), "smokeTest.enabled"),
]


def refusal(mutate: Mutation) -> ConfigError:
    config = prod()
    mutate(config)
    with pytest.raises(ConfigError) as error:
        platform_args_from_settings(to_settings(config))
    return error.value


def test_the_corpus_is_large_and_its_cases_distinct():
    assert len(INVALID) >= 120
    assert len({case for case, _, _ in INVALID}) == len(INVALID)


@pytest.mark.parametrize(("mutate", "path"), [(m, p) for _, m, p in INVALID], ids=[c for c, _, _ in INVALID])
def test_invalid_configuration_is_refused_with_its_key_path_and_no_traceback(mutate, path):
    error = refusal(mutate)
    assert any(problem.path == path for problem in error.problems), [str(p) for p in error.problems]
    shown = refusal_text(error)
    assert f"  - {path}: " in shown
    assert "Traceback" not in shown


THROUGH_THE_ENGINE = [
    "38-character pool name breaks its node role",
    "comma in a tag value",
    "Karpenter chart before v1",
    "unquoted kubernetes version 1.30",
    "system node group off on a created cluster",
    "kubelet-refused label on a Karpenter pool",
    "same admin principal twice",
]


@pytest.mark.parametrize("case", THROUGH_THE_ENGINE)
def test_pulumi_up_of_an_invalid_stack_registers_nothing_and_shows_no_traceback(case):
    mutate, path = next((m, p) for c, m, p in INVALID if c == case)
    config = prod()
    mutate(config)
    graph = run_main(to_settings(config))
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    shown = refusal_text(graph.error)
    assert f"  - {path}: " in shown
    assert "Traceback" not in shown


VALID: list[tuple[str, Mutation]] = [
    ("the prod stack as it is", lambda c: None),
    # a pool of fewer GPUs is shared between the teams as prod's is: half each
    ("T4 pool without EFA or placement group", all_of(S("gpuNodeGroups", [{"name": "p5-training", "instanceTypes": ["g4dn.xlarge"], "placementGroup": {"mode": "none"}, "maxSize": 2}]), team_share("p5-training", 1))),
    ("g4dn.metal with EFA", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["g4dn.metal"], "minSize": 0}])),
    ("A10G eight-GPU pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["g5.48xlarge"]}])),
    ("L4 four-GPU pool", all_of(S("gpuNodeGroups", [{**POOL, "instanceTypes": ["g6.12xlarge"]}]), team_share("p5-training", 4))),
    ("gr6 one-GPU pool without EFA", all_of(S("gpuNodeGroups", [{**POOL, "instanceTypes": ["gr6.4xlarge"], "placementGroup": {"mode": "none"}}]), team_share("p5-training", 1))),
    ("RTX PRO 6000 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["g7e.48xlarge"]}])),
    ("RTX PRO 4500 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["g7.48xlarge"]}])),
    ("V100 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["p3dn.24xlarge"]}])),
    ("A100 40 GB pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["p4d.24xlarge"]}])),
    ("H200 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["p5en.48xlarge"]}])),
    ("B200 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["p6-b200.48xlarge"]}])),
    ("B300 pool", S("gpuNodeGroups", [{**POOL, "instanceTypes": ["p6-b300.48xlarge"]}])),
    ("Karpenter off", all_of(S("karpenter", {"enabled": False}), without_team_quotas("gpu-training"))),
    ("topology labeler off", S("topologyLabeler", {"enabled": False})),
    ("prebuilt labeler image by digest", S("topologyLabeler", {"image": f"123456789012.dkr.ecr.us-west-2.amazonaws.com/topology-labeler@{DIGEST}"})),
    ("GPU Operator v24.9.2", S("gpuOperator.chartVersion", "v24.9.2")),
    ("pools at size 0", all_of(S(f"{G}.minSize", 0), S(f"{G}.desiredSize", 0), S(f"{APP}.job.suspend", True))),
    ("Capacity Block pool", all_of(S(f"{G}.capacityType", "CAPACITY_BLOCK"), S(f"{G}.capacityReservationId", "cr-0123456789abcdef0"), S(f"{G}.placementGroup.mode", "none"))),
    ("Karpenter pool on reserved capacity", all_of(S(f"{K}.capacityTypes", ["reserved", "on-demand"]), S(f"{K}.capacityReservationIds", ["cr-0123456789abcdef0"]), S(f"{K}.placementGroup.mode", "none"))),
    ("adopted cluster without a system node group", all_of(S("cluster.create", False), S("systemNodeGroup.enabled", False))),
    ("adopted cluster with a system node group", S("cluster.create", False)),
    # fastImagePull is nodeadm's (AL2023), and without the instance-store array it would slow pulls
    ("Bottlerocket NVIDIA pool", all_of(S(f"{G}.amiType", "BOTTLEROCKET_x86_64_NVIDIA"), S(f"{G}.fastImagePull", False), S("karpenter", {"enabled": False}), without_team_quotas("gpu-training"))),
    ("empty label value on a Karpenter pool", L(f"{K}.labels", "example.com/spare", "")),
    ("labels the kubelet may set", all_of(L(f"{G}.labels", "node.kubernetes.io/pool", "p5"), L(f"{G}.labels", "example.com/team", "ml"), L(f"{K}.labels", "kubelet.kubernetes.io/zone-group", "b"))),
    ("tags with spaces, unicode and IAM's punctuation", all_of(L("tags", "Cost Center", "ML Research: Zürich"), L("tags", "contact", "ml-platform@example.com"), L("tags", "path", "a/b=c+d_e.f"))),
    ("quoted Kubernetes version 1.35", S("cluster.kubernetesVersion", "1.35")),
    ("the longest pool name the node role allows", renamed_pool("p5-training", "p" * 33)),
    ("training image pinned by digest", S(f"{APP}.job.image", f"public.ecr.aws/acme/train@{DIGEST}")),
    ("training image by tag and digest", S(f"{APP}.job.image", f"localhost:5000/acme/train:2.7-cu128@{DIGEST}")),
    # prod's FSx data repository names a bucket of s3Buckets, so it goes with them
    ("no S3 buckets", all_of(S("s3Buckets", []), S("storage.fsx.dataRepository", None))),
    ("no FSx for Lustre", S("storage.fsx.enabled", False)),
    ("file system in the pools' AZ, named", S("storage.fsx.availabilityZone", "us-west-2b")),
    ("instance store left alone", all_of(S("storage.instanceStore", "none"), S(f"{G}.fastImagePull", False), S(f"{K}.fastImagePull", False))),
    ("two training namespaces without teams", all_of(NO_TEAMS, A("scheduling.namespaces", {"name": "evaluation"}))),
    ("a second namespace of a team", all_of(A("scheduling.namespaces", {"name": "evaluation"}), A("scheduling.teams[1].namespaces", "evaluation"))),
    ("a third team with no quota of its own (it borrows only)", all_of(A("scheduling.namespaces", {"name": "evaluation"}), A("scheduling.teams", {"name": "evaluation", "namespaces": ["evaluation"]}))),
    ("teams with borrowing and lending limits and a fractional weight", all_of(S(f"{TEAM}.quotas[0].borrowingLimit", 8), S(f"{TEAM}.quotas[1].lendingLimit", 4), S(f"{TEAM}.weight", 1.5))),
    ("prod without teams", NO_TEAMS),
    ("every app a Job", all_of(D(f"{TRAIN_JOB}.kind"), S("trainer", {}), S("jobSet", {}))),
    ("a JobSet with its own restarts", all_of(S(f"{APP}.kind", "JobSet"), S(f"{APP}.job.maxRestarts", 0))),
    ("GPU pool named like the system node group (EKS names are prefixes with a unique suffix)", renamed_pool("p5-training", "system")),
    ("GPU pool named system on an adopted cluster without a system group", all_of(S("cluster.create", False), S("systemNodeGroup.enabled", False), renamed_pool("p5-training", "system"))),
    ("the labeler's namespace name once the labeler is off", all_of(S("topologyLabeler", {"enabled": False}), A("scheduling.namespaces", {"name": "topology-labeler"}), A("scheduling.teams[1].namespaces", "topology-labeler"))),
    ("no scheduling apps, namespaces or teams", all_of(S("scheduling.namespaces", []), S("scheduling.trainingApps", []), S("scheduling.teams", []))),
]


def test_the_valid_corpus_is_large_enough():
    assert len(VALID) >= 25


@pytest.mark.parametrize("mutate", [m for _, m in VALID], ids=[c for c, _ in VALID])
def test_valid_variant_is_accepted(mutate):
    config = prod()
    mutate(config)
    platform_args_from_settings(to_settings(config))


def problem_text(case: str) -> str:
    mutate, path = next((m, p) for c, m, p in INVALID if c == case)
    return next(p.message for p in refusal(mutate).problems if p.path == path)


def test_an_unquoted_kubernetes_version_says_to_quote_it():
    assert problem_text("unquoted kubernetes version 1.30").startswith(
        "1.3 was read as a number (YAML reads an unquoted 1.30 as 1.3); quote the version, e.g. kubernetesVersion: \"1.36\""
    )


def test_an_arm_ami_on_x86_types_says_so():
    assert problem_text("ARM NVIDIA AMI on x86 types").startswith(
        "'AL2023_ARM_64_NVIDIA' is an ARM (arm64) AMI but the GPU catalog's instance types are x86_64"
    )


def test_training_apps_without_namespaces_say_what_is_missing():
    message = problem_text("training app without namespaces")
    assert message.startswith("has nowhere to run: scheduling.namespaces is empty")
    assert "None" not in message


def test_a_comma_in_a_tag_value_names_iams_alphabet():
    message = problem_text("comma in a tag value")
    assert "'ml,platform' has characters IAM refuses in tag values (CreateRole fails on it)" in message
    assert "letters, numbers, separators (spaces) and + - . / : = @ _" in message


def test_a_fractional_gpu_says_why_it_is_refused():
    assert problem_text("fractional GPU type").startswith("'g6f.4xlarge' has a fraction of one L4 GPU")


def test_a_kubelet_refused_label_names_the_allowed_namespaces():
    message = problem_text("node-role label the kubelet refuses")
    assert "kubelet.kubernetes.io, node.kubernetes.io" in message
    assert "never join" in message


def _path_pattern(template: str) -> re.Pattern[str]:
    """A "Refused by" key path as a pattern: ``[*]`` any index, ``<...>`` any key or name."""
    parts = re.split(r"(\[\*\]|<[^>]*>)", template)
    return re.compile("".join(r"\[\d+\]" if p == "[*]" else ".+" if p.startswith("<") else re.escape(p) for p in parts))


def _message_pattern(rule: str) -> re.Pattern[str]:
    """A row's message as a pattern: ``…`` stands for a value, a trailing ``…`` for the rest."""
    return re.compile(".*".join(map(re.escape, rule.split(": ", 1)[1].rstrip("…").split("…"))), re.S)


def _pydantic_wording(message: str) -> bool:
    """Whether pydantic worded a refusal (``List should have at least 1 item``, and the package's
    rewording of its unknown, missing and pattern errors): the table gives the constraint, not the wording."""
    return message[:1].isupper() or message.startswith(("unknown key; allowed: ", "is required")) or " does not match " in message


def test_every_refusal_of_the_corpus_is_a_row_of_the_refused_by_table():
    from eks_gpu_training.offline.refusals import source_refusals
    from eks_gpu_training.offline.schema_refusals import schema_refusals

    rows = [(_path_pattern(p), r.rule) for r in [*schema_refusals(), *source_refusals()] for p in r.paths]
    unlisted = []
    for case, mutate, _ in INVALID:
        for problem in refusal(mutate).problems:
            rules = [rule for pattern, rule in rows if pattern.fullmatch(problem.path)]
            worded = any(_message_pattern(rule).match(problem.message) for rule in rules if not rule.startswith("`schema`"))
            # An unknown key has no row of its own; the table says once that every object refuses one.
            by_pydantic = _pydantic_wording(problem.message) and (bool(rules) or problem.message.startswith("unknown key"))
            if not (worded or by_pydantic):
                unlisted.append(f"{case}: {problem}")
    assert unlisted == []
