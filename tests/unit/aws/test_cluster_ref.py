"""``ClusterRef``'s two constructors and what ``EksCluster`` hands out for composition."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pytest

from eks_gpu_training import (
    ClusterRef,
    EksCluster,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
)
from eks_gpu_training.aws.iam import SSM_POLICY
from tests.support.harness import research_cluster, run_program, two_az_network

NETWORK = two_az_network()


def _refs(program):
    refs = {}
    graph = run_program(lambda: refs.update(program()))
    assert graph.error is None, repr(graph.error)
    return graph, refs


def test_from_eks_cluster_takes_what_it_needs_from_the_cluster():
    def program():
        cluster = eks.Cluster(
            "research", name="research", version="1.33", vpc_id=NETWORK.vpc_id, subnet_ids=[s.id for s in NETWORK.subnets]
        )
        ref = ClusterRef.from_eks_cluster(cluster, region="eu-central-1", name="research")
        pulumi.export("vpc", ref.vpc_id)
        pulumi.export("endpoint", ref.endpoint)
        pulumi.export("sg", ref.cluster_security_group_id)
        pulumi.export("version", ref.kubernetes_version)
        return {"ref": ref, "cluster": cluster}

    graph, refs = _refs(program)
    ref, cluster = refs["ref"], refs["cluster"]
    assert (ref.name, ref.region, ref.partition) == ("research", "eu-central-1", "aws")
    assert ref.ready == (cluster,)
    assert ref.control_plane == (cluster,)
    assert ref.pod_identity == ()
    assert graph.exports == {
        "vpc": "vpc-0123456789abcdef0",
        "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
        "sg": "sg-0c1a55e7c1a55e7c1",
        "version": "1.33",
    }
    provider = graph.one("pulumi:providers:kubernetes")
    assert provider.name == "research-k8s"
    assert provider.parent == graph.one("eks:index:Cluster").urn


def test_from_eks_cluster_uses_a_provider_it_is_given():
    def program():
        cluster = eks.Cluster("research", vpc_id=NETWORK.vpc_id, subnet_ids=[s.id for s in NETWORK.subnets])
        import pulumi_kubernetes as k8s

        provider = k8s.Provider("mine", kubeconfig=cluster.kubeconfig_json)
        return {"ref": ClusterRef.from_eks_cluster(cluster, region="us-gov-west-1", provider=provider), "provider": provider}

    graph, refs = _refs(program)
    assert refs["ref"].provider is refs["provider"]
    assert refs["ref"].partition == "aws-us-gov"
    assert [p.name for p in graph.of_type("pulumi:providers:kubernetes")] == ["mine"]


def test_from_existing_looks_the_cluster_up_and_creates_only_a_provider():
    def program():
        ref = ClusterRef.from_existing("research", "us-west-2")
        pulumi.export("version", ref.kubernetes_version)
        pulumi.export("sg", ref.cluster_security_group_id)
        return {"ref": ref}

    graph, refs = _refs(program)
    assert [(r.type, r.name) for r in graph.resources] == [("pulumi:providers:kubernetes", "research-k8s")]
    assert [args["name"] for token, args in graph.invokes if token == "aws:eks/getCluster:getCluster"] == ["research"]
    assert graph.exports == {"version": "1.34", "sg": "sg-0e0e0e0e0e0e0e0e0"}
    assert refs["ref"].ready == ()
    assert refs["ref"].control_plane == ()
    assert refs["ref"].system_node_selector == {}


def test_from_existing_needs_a_resource_name_when_the_cluster_name_is_an_output():
    def program():
        ClusterRef.from_existing(pulumi.Output.from_input("research"), "us-west-2")

    graph = run_program(program)
    assert isinstance(graph.error, TypeError)
    assert "resource_name" in str(graph.error)


def _ssm_attachments(graph) -> list[str]:
    return [
        r.name for r in graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if r.inputs["policyArn"].endswith(SSM_POLICY)
    ]


@pytest.mark.parametrize("ssm", [False, True], ids=["default", "opted-in"])
def test_node_roles_get_ssm_only_when_the_ref_opts_in(ssm):
    def program():
        cluster = eks.Cluster("research", vpc_id=NETWORK.vpc_id, subnet_ids=[s.id for s in NETWORK.subnets])
        options = {"node_ssm_access": True} if ssm else {}
        refs = {
            "own": ClusterRef.from_eks_cluster(cluster, region="us-west-2", **options),
            "adopted": ClusterRef.from_existing("adopted", "us-west-2", **options),
        }
        for name, ref in refs.items():
            pool = GpuNodeGroupConfig(name=name, instance_types=["p5.48xlarge"], availability_zone="us-west-2a")
            GpuNodeGroup(name, GpuNodeGroupArgs(cluster=ref, network=NETWORK, pool=pool))
        return {}

    graph, _ = _refs(program)
    expected = ["adopted-AmazonSSMManagedInstanceCore", "own-AmazonSSMManagedInstanceCore"]
    assert sorted(_ssm_attachments(graph)) == (expected if ssm else [])


@pytest.mark.parametrize("create", [True, False], ids=["created", "adopted"])
def test_eks_cluster_exposes_its_cluster_system_node_group_and_provider(create):
    components = {}

    def program():
        component = research_cluster(NETWORK)
        components["cluster"] = component
        if not create:
            from eks_gpu_training import EksClusterArgs
            from eks_gpu_training.config import ClusterConfig, SystemNodeGroupConfig

            components["cluster"] = EksCluster(
                "adopted",
                EksClusterArgs(
                    cluster=ClusterConfig(name="existing", create=False),
                    network=NETWORK,
                    system_node_group=SystemNodeGroupConfig(),
                    region="us-west-2",
                    partition="aws",
                ),
            )

    graph = run_program(program)
    assert graph.error is None, repr(graph.error)
    component = components["cluster"]
    assert isinstance(component.system_node_group, aws.eks.NodeGroup)
    assert component.provider is component.ref.provider
    if create:
        assert isinstance(component.eks_cluster, eks.Cluster)
        assert component.ref.control_plane == (component.eks_cluster,)
    else:
        assert component.eks_cluster is None
