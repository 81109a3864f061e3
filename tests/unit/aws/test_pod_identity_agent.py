"""Every component that gets AWS credentials through EKS Pod Identity has the agent on every path:
the add-on of a created cluster, one created for your own cluster, or a look-up of an adopted one."""

from __future__ import annotations

import pulumi_eks as eks

from eks_gpu_training import ClusterRef, Karpenter, KarpenterConfig, TopologyLabeler, TopologyLabelerConfig
from tests.support.harness import run_program

STACK = {"aws:region": "us-west-2"}
ADDON, ASSOCIATION, GET_ADDON = "aws:eks/addon:Addon", "aws:eks/podIdentityAssociation:PodIdentityAssociation", "aws:eks/getAddon:getAddon"
LABELER = TopologyLabelerConfig(image="123456789012.dkr.ecr.us-west-2.amazonaws.com/labeler:v1")


def _own_cluster() -> eks.Cluster:
    return eks.Cluster("research", name="research", skip_default_node_group=True)


def test_your_own_cluster_gets_one_agent_add_on_that_every_association_waits_for():
    def program():
        cluster = _own_cluster()
        Karpenter("karpenter", cluster=cluster, config=KarpenterConfig(enabled=True))
        TopologyLabeler("labeler", cluster=cluster, config=LABELER)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    [agent] = [a for a in graph.of_type(ADDON) if a.inputs["addonName"] == "eks-pod-identity-agent"]
    assert (agent.name, agent.inputs["clusterName"], agent.inputs["region"]) == ("research-pod-identity-agent", "research", "us-west-2")
    assert agent.parent == graph.one("eks:index:Cluster").urn
    associations = graph.of_type(ASSOCIATION)
    assert len(associations) == 2
    assert all(graph.depends_on(a, agent) for a in associations)
    assert not [token for token, _ in graph.invokes if token == GET_ADDON]


def test_a_ref_that_says_its_cluster_runs_the_agent_has_it_looked_up_not_created():
    def program():
        ref = ClusterRef.from_eks_cluster(_own_cluster(), region="us-west-2", pod_identity=())
        Karpenter("karpenter", cluster=ref, config=KarpenterConfig(enabled=True))
        TopologyLabeler("labeler", cluster=ref, config=LABELER)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    assert not [a for a in graph.of_type(ADDON) if a.inputs["addonName"] == "eks-pod-identity-agent"]
    lookups = [args for token, args in graph.invokes if token == GET_ADDON]
    assert [(a["clusterName"], a["addonName"], a["region"]) for a in lookups] == [("research", "eks-pod-identity-agent", "us-west-2")]


def test_an_adopted_cluster_is_checked_for_the_agent_once():
    def program():
        ref = ClusterRef.from_existing("research", "us-east-1")
        Karpenter("karpenter", cluster=ref, config=KarpenterConfig(enabled=True))
        TopologyLabeler("labeler", cluster=ref, config=LABELER)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    lookups = [args for token, args in graph.invokes if token == GET_ADDON]
    assert [(a["clusterName"], a["region"]) for a in lookups] == [("research", "us-east-1")]
    assert not graph.of_type(ADDON)


def test_an_agent_given_to_the_ref_is_the_one_waited_for():
    def program():
        import pulumi_aws as aws

        cluster = _own_cluster()
        agent = aws.eks.Addon("my-agent", cluster_name="research", addon_name="eks-pod-identity-agent")
        ref = ClusterRef.from_eks_cluster(cluster, region="us-west-2", pod_identity=[agent])
        Karpenter("karpenter", cluster=ref, config=KarpenterConfig(enabled=True))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    [agent] = graph.of_type(ADDON)
    assert agent.name == "my-agent"
    assert graph.depends_on(graph.one(ASSOCIATION), agent)
    assert not [token for token, _ in graph.invokes if token == GET_ADDON]


def test_the_fsx_csi_driver_which_gets_no_credentials_does_not_wait_for_the_agent(prod_graph):
    agent = prod_graph.one(ADDON, "gpu-training-cluster-pod-identity-agent")
    driver = prod_graph.one(ADDON, "gpu-training-lustre-csi-driver")
    assert driver.inputs["podIdentityAssociations"] == []
    assert not prod_graph.depends_on(driver, agent)


def test_two_refs_of_your_own_cluster_share_its_kubernetes_provider_and_agent():
    def program():
        cluster = _own_cluster()
        Karpenter("karpenter", cluster=cluster, config=KarpenterConfig(enabled=True))
        TopologyLabeler("labeler", cluster=ClusterRef.from_eks_cluster(cluster, region="us-west-2"), config=LABELER)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    assert [p.name for p in graph.of_type("pulumi:providers:kubernetes")] == ["research-k8s"]
    assert [a.name for a in graph.of_type(ADDON)] == ["research-pod-identity-agent"]


def test_a_pod_identity_role_refuses_an_association_for_a_namespace_it_does_not_trust():
    import pulumi

    from eks_gpu_training.aws.pod_identity import pod_identity_role
    from tests.support.harness import run_program, stand_in_ref

    errors: list[str] = []

    class Holder(pulumi.ComponentResource):
        def __init__(self) -> None:
            super().__init__("test:index:Holder", "holder")
            role = pod_identity_role("trainer-role", stand_in_ref(), namespace=["training", "research"],
                                     service_account="trainer", holder="Training pods", tags={}, parent=self,
                                     account_id="111122223333")
            for namespace in (None, "default"):
                try:
                    role.associate("trainer-association", namespace)
                except ValueError as error:
                    errors.append(str(error))

    graph = run_program(Holder)
    assert graph.error is None
    assert errors == [
        "trainer-association: name the namespace, the role trusts training, research",
        "trainer-association: the role does not trust namespace 'default'",
    ]
    assert not graph.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
