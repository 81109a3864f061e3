"""Values that come from other resources stay Outputs all the way to AWS: a cluster whose name is
an Output (pulumi-eks names it, or another stack hands it over) gets every component of the
library without any name, description, policy or kubeconfig holding Output text."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pytest

from eks_gpu_training import (
    ClusterRef,
    EfaDevicePlugin,
    EfaDevicePluginArgs,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
    GpuNodePool,
    GpuNodePoolArgs,
    GpuOperator,
    GpuOperatorArgs,
    GpuOperatorConfig,
    Karpenter,
    KarpenterArgs,
    KarpenterConfig,
    KarpenterGpuNodePoolConfig,
    NetworkConfig,
    S3BucketConfig,
    SubnetConfig,
    TopologyLabeler,
    TopologyLabelerArgs,
    TopologyLabelerConfig,
    TrainingIdentity,
    TrainingIdentityArgs,
    node_os_of,
)
from tests.support.harness import ACCOUNT_ID, run_program, two_az_network

NETWORK = two_az_network()
TAGS = {"team": "ml-platform"}


def every_component(ref: ClusterRef) -> None:
    GpuNodeGroup(
        "h100",
        GpuNodeGroupArgs(
            cluster=ref,
            network=NETWORK,
            pool=GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a"),
            tags=TAGS,
        ),
    )
    karpenter = Karpenter("karpenter", KarpenterArgs(cluster=ref, config=KarpenterConfig(enabled=True), tags=TAGS))
    GpuNodePool(
        "karpenter-h200",
        GpuNodePoolArgs(
            cluster=ref,
            pool=KarpenterGpuNodePoolConfig(name="h200", instance_types=["p5en.48xlarge"], availability_zone="us-west-2a"),
            network=NETWORK,
            node_role_name=karpenter.node_role_name,
            karpenter_release=karpenter.release,
            tags=TAGS,
        ),
    )
    GpuOperator("gpu-operator", GpuOperatorArgs(cluster=ref, config=GpuOperatorConfig(), node_os=node_os_of("AL2023_x86_64_NVIDIA")))
    EfaDevicePlugin("efa", EfaDevicePluginArgs(cluster=ref))
    TopologyLabeler("labeler", TopologyLabelerArgs(cluster=ref, config=TopologyLabelerConfig(), tags=TAGS))
    checkpoints = aws.s3.Bucket("checkpoints")
    TrainingIdentity(
        "training",
        TrainingIdentityArgs(
            cluster=ref,
            namespaces=["training"],
            service_account="training",
            s3_buckets=[S3BucketConfig(name=checkpoints.bucket, access="readWrite")],
            tags=TAGS,
        ),
    )


def created_cluster_program():
    cluster = eks.Cluster(
        "research", vpc_id=NETWORK.vpc_id, subnet_ids=[s.id for s in NETWORK.subnets], skip_default_node_group=True
    )
    every_component(ClusterRef.from_eks_cluster(cluster, region="us-west-2"))


def adopted_cluster_program():
    name = pulumi.Output.secret("research")  # e.g. a StackReference's output
    every_component(ClusterRef.from_existing(name, "us-west-2", resource_name="research"))


def _run(program, preview: bool = False):
    graph = run_program(program, preview=preview)
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="module")
def created_graph():
    return _run(created_cluster_program)


@pytest.fixture(scope="module")
def adopted_graph():
    return _run(adopted_cluster_program)


def test_a_cluster_named_by_pulumi_eks_gets_every_component_without_output_text(created_graph):
    assert created_graph.output_text() == []


def test_an_adopted_cluster_whose_name_is_an_output_gets_every_component_without_output_text(adopted_graph):
    assert adopted_graph.output_text() == []


def test_the_clusters_output_name_reaches_names_policies_and_the_kubeconfig(created_graph):
    graph = created_graph
    name = graph.one("aws:eks/nodeGroup:NodeGroup").inputs["clusterName"]
    assert name.startswith("research-eksCluster-")
    association = graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert {a.inputs["clusterName"] for a in association} == {name}
    trust = [json.loads(r.inputs["assumeRolePolicy"]) for r in graph.of_type("aws:iam/role:Role") if "pods.eks" in r.inputs["assumeRolePolicy"]]
    assert trust
    assert all(
        s["Condition"]["ArnEquals"]["aws:SourceArn"].endswith(f":cluster/{name}") for policy in trust for s in policy["Statement"]
    )
    # Each role is also held to the ServiceAccount it serves.
    assert {
        s["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] for policy in trust for s in policy["Statement"]
    } == {"karpenter", "topology-labeler", "training"}
    s3_policy = json.loads(graph.one("aws:iam/rolePolicy:RolePolicy", "training-s3-access").inputs["policy"])
    assert s3_policy["Statement"][1]["Resource"] == ["arn:aws:s3:::checkpoints-7g8h9i/*"]
    repository = graph.one("aws:ecr/repository:Repository")
    assert repository.inputs["name"] == f"{name.lower()}/topology-labeler"
    placement_groups = sorted(g.inputs["name"] for g in graph.of_type("aws:ec2/placementGroup:PlacementGroup"))
    assert placement_groups == [f"{name}-h100", f"{name}-karpenter-h200"]


def test_the_adopted_clusters_kubeconfig_names_the_cluster_from_the_output(adopted_graph):
    graph = adopted_graph
    provider = next(r for r in graph.of_type("pulumi:providers:kubernetes") if r.name == "research-k8s")
    kubeconfig = provider.inputs["kubeconfig"]
    # The name came in as a secret, so the kubeconfig made from it is one too.
    assert isinstance(kubeconfig, dict)
    assert set(kubeconfig) == {"4dabf18193072939515e22adb298388d", "value"}
    kubeconfig = json.loads(kubeconfig["value"])
    assert kubeconfig["users"][0]["user"]["exec"]["args"][3] == "research"


def platform_program():
    from eks_gpu_training import ClusterConfig, GpuTrainingPlatform, GpuTrainingPlatformArgs
    import pulumi_aws as aws

    admin = aws.iam.Role("admin", assume_role_policy="{}")
    vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16")
    subnets = [aws.ec2.Subnet(f"subnet-{z}", vpc_id=vpc.id, cidr_block=f"10.0.{i * 16}.0/20") for i, z in enumerate("ab")]
    GpuTrainingPlatform(
        "platform",
        GpuTrainingPlatformArgs(
            region="us-west-2",
            cluster=ClusterConfig(
                name=pulumi.Output.secret("research"),
                admin_principal_arns=[admin.arn],
                endpoint_public_access_cidrs=["203.0.113.0/24"],
            ),
            network=NetworkConfig(
                vpc_id=vpc.id,
                subnets=[SubnetConfig(id=s.id, availability_zone=f"us-west-2{z}") for s, z in zip(subnets, "ab", strict=True)],
            ),
            gpu_node_groups=[GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a")],
            karpenter=KarpenterConfig(
                enabled=True,
                gpu_node_pools=[KarpenterGpuNodePoolConfig(name="h200", instance_types=["p5en.48xlarge"], availability_zone="us-west-2b")],
            ),
            tags=TAGS,
        ),
    )


def test_the_platform_built_from_outputs_has_no_output_text_in_any_input():
    # As `pulumi preview` runs it: values the mocks leave out stay unknown.
    graph = _run(platform_program, preview=True)
    assert graph.output_text() == []
    cluster = graph.one("eks:index:Cluster")
    entry = graph.one("aws:eks/accessEntry:AccessEntry", "platform-cluster-admin-output-0")
    assert entry.inputs["principalArn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/admin-1a2b3c"
    subnets = {r.name: r.id for r in graph.of_type("aws:ec2/subnet:Subnet")}
    assert cluster.inputs["subnetIds"] == [subnets["subnet-a"], subnets["subnet-b"]]
    assert all(i.startswith("subnet-") for i in cluster.inputs["subnetIds"])


def test_names_made_from_an_output_cluster_name_are_left_to_deployment_not_measured():
    from eks_gpu_training.platform import generated_names
    from eks_gpu_training.config import ClusterConfig, GpuTrainingPlatformArgs

    def placement_groups(cluster_name):
        args = GpuTrainingPlatformArgs(
            region="us-west-2",
            cluster=ClusterConfig(name=cluster_name, endpoint_public_access_cidrs=["203.0.113.0/24"]),
            network=NETWORK,
            gpu_node_groups=[GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a")],
        )
        return {n.resource_type: n.name for _, n in generated_names(args) if n.resource_type.startswith(("aws:ec2/placementGroup", "aws:ecr"))}

    assert placement_groups("research") == {
        "aws:ec2/placementGroup:PlacementGroup": "research-h100",
        "aws:ecr/repository:Repository": "research/topology-labeler",
    }
    assert placement_groups(pulumi.Output.from_input("research")) == {}


def _warnings(monkeypatch) -> list[str]:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    return warnings


def test_a_pool_whose_cluster_name_is_an_output_warns_that_its_running_group_is_not_read(monkeypatch):
    warnings = _warnings(monkeypatch)
    graph = _run(adopted_cluster_program)
    # Nothing was read: no running group, so no refusal and no running size either.
    assert not [token for token, _ in graph.invokes if token == "aws:eks/getNodeGroups:getNodeGroups"]
    [warning] = [w for w in warnings if w.startswith("GpuNodeGroup(h100)")]
    assert "the cluster name is an Output, known only at deployment" in warning
    assert "neither is a roll of its running nodes refused without pool.forceUpdateVersion" in warning
    assert "nor is its running desired size sent" in warning


def test_a_platform_whose_cluster_name_is_an_output_warns_for_the_cluster_and_each_pool(monkeypatch):
    warnings = _warnings(monkeypatch)
    _run(platform_program, preview=True)
    unread = sorted(w.split(":", 1)[0] for w in warnings if "the cluster name is an Output" in w)
    assert unread == ["EksCluster(platform-cluster)", "GpuNodeGroup(platform-h100)"]
    [cluster] = [w for w in warnings if w.startswith("EksCluster(")]
    assert "a control plane EKS upgraded past cluster.kubernetesVersion" in cluster
    assert "the system node group's running desired size is not sent" in cluster


def test_a_cluster_named_by_a_string_warns_of_nothing_unread(monkeypatch):
    warnings = _warnings(monkeypatch)
    graph = run_program(lambda: every_component(ClusterRef.from_existing("research", "us-west-2", resource_name="research")))
    assert graph.error is None, repr(graph.error)
    assert [w for w in warnings if "the cluster name is an Output" in w] == []
