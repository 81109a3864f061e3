"""pulumi-eks's calling convention: ``Name(name, args=NameArgs(...), opts=...)`` or the same fields as
keywords, and a ``pulumi_eks.Cluster`` or ``EksCluster`` wherever a ``ClusterRef`` is taken."""

from __future__ import annotations

import inspect

import pulumi
import pulumi_eks as eks
import pytest

import eks_gpu_training
from eks_gpu_training import (
    ClusterRef,
    ConfigError,
    EfaDevicePlugin,
    EfaDevicePluginArgs,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    GpuNodeGroupConfig,
    GpuOperator,
)
from tests.support.harness import research_cluster, run_program, two_az_network

STACK = {"aws:region": "us-west-2"}
NETWORK = two_az_network()
POOL = GpuNodeGroupConfig(name="h100", instance_types=["p5.48xlarge"], availability_zone="us-west-2a")
COMPONENTS = [
    getattr(eks_gpu_training, name)
    for name in eks_gpu_training.__all__
    if isinstance(getattr(eks_gpu_training, name), type) and issubclass(getattr(eks_gpu_training, name), pulumi.ComponentResource)
]


def _own_cluster() -> eks.Cluster:
    return eks.Cluster("research", name="research", vpc_id=NETWORK.vpc_id, subnet_ids=[s.id for s in NETWORK.subnets])


def _inputs_of(graph, type_: str) -> list[dict]:
    return [{k: v for k, v in r.inputs.items()} for r in graph.of_type(type_)]


def test_keywords_register_the_same_resources_as_args():
    def with_args():
        cluster = _own_cluster()
        GpuNodeGroup("h100", args=GpuNodeGroupArgs(cluster=ClusterRef.from_eks_cluster(cluster, region="us-west-2"), network=NETWORK, pool=POOL))

    def with_keywords():
        cluster = _own_cluster()
        GpuNodeGroup("h100", cluster=ClusterRef.from_eks_cluster(cluster, region="us-west-2"), network=NETWORK, pool=POOL)

    by_args, by_keywords = run_program(with_args, STACK), run_program(with_keywords, STACK)
    assert by_args.error is None, repr(by_args.error)
    assert by_keywords.error is None, repr(by_keywords.error)
    assert sorted((r.type, r.name) for r in by_args.resources) == sorted((r.type, r.name) for r in by_keywords.resources)
    assert _inputs_of(by_args, "aws:eks/nodeGroup:NodeGroup") == _inputs_of(by_keywords, "aws:eks/nodeGroup:NodeGroup")


def test_a_pulumi_eks_cluster_is_taken_where_a_cluster_ref_is_and_shares_one_kubernetes_provider():
    def program():
        cluster = _own_cluster()
        node_group = GpuNodeGroup("h100", cluster=cluster, network=NETWORK, pool=POOL)
        GpuOperator("gpu-operator", cluster=cluster)
        EfaDevicePlugin("efa", EfaDevicePluginArgs(cluster=cluster), opts=pulumi.ResourceOptions(depends_on=[node_group]))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    provider = graph.one("pulumi:providers:kubernetes")
    assert provider.name == "research-k8s"
    releases = graph.of_type("kubernetes:helm.sh/v3:Release")
    assert {r.provider.rsplit("::", 1)[0] for r in releases} == {provider.urn}
    node_group = graph.one("aws:eks/nodeGroup:NodeGroup")
    assert node_group.inputs["clusterName"].startswith("research")
    assert node_group.inputs["region"] == "us-west-2"


def test_the_platforms_own_eks_cluster_is_taken_where_a_cluster_ref_is():
    def program():
        cluster = research_cluster(NETWORK)
        GpuNodeGroup("h100", cluster=cluster, network=NETWORK, pool=POOL)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    pool = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert pool.inputs["clusterName"] == "research"


def test_refuses_args_and_keywords_together():
    def program():
        cluster = research_cluster(NETWORK)
        GpuNodeGroup("h100", GpuNodeGroupArgs(cluster=cluster, network=NETWORK, pool=POOL), pool=POOL)

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [p.path for p in graph.error.problems] == ["GpuNodeGroup(h100)"]


def test_refuses_unknown_and_missing_keywords_together_with_what_is_allowed():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroup("h100", cluster=None, pools=[POOL])
    assert [str(p) for p in raised.value.problems] == [
        "GpuNodeGroup(h100).pools: unknown argument; allowed: cluster, pool, network, tags, protect, instance_store_raid0, health_gate",
        "GpuNodeGroup(h100).pool: is required",
    ]


def test_refuses_something_that_is_no_cluster_with_the_field_path():
    with pytest.raises(ConfigError) as raised:
        GpuNodeGroupArgs(cluster="research", network=NETWORK, pool=POOL)
    assert [str(p) for p in raised.value.problems] == [
        "GpuNodeGroupArgs.cluster: expected a ClusterRef, an EksCluster or a pulumi_eks.Cluster, got str"
    ]


def test_refuses_a_pulumi_eks_cluster_whose_region_cannot_be_known():
    def program():
        GpuNodeGroup("h100", cluster=_own_cluster(), network=NETWORK, pool=POOL)

    graph = run_program(program)  # no aws:region
    assert isinstance(graph.error, ConfigError)
    assert "pass ClusterRef.from_eks_cluster(cluster, region=...)" in str(graph.error)
    assert [r.type for r in graph.resources] == ["eks:index:Cluster"]


def test_gpu_operator_takes_the_gpu_nodes_ami_type_and_defaults_to_the_pools_default():
    from eks_gpu_training import GpuOperatorArgs
    from eks_gpu_training.facts.node_os import AL2023_NVIDIA, BOTTLEROCKET_NVIDIA
    from tests.support.harness import stand_in_ref

    assert GpuOperatorArgs(cluster=stand_in_ref()).node_os == AL2023_NVIDIA
    assert GpuOperatorArgs(cluster=stand_in_ref(), node_os="BOTTLEROCKET_x86_64_NVIDIA").node_os == BOTTLEROCKET_NVIDIA


def test_gpu_operator_refuses_an_ami_type_without_the_nvidia_stack():
    from eks_gpu_training import GpuOperatorArgs
    from tests.support.harness import stand_in_ref

    with pytest.raises(ConfigError) as raised:
        GpuOperatorArgs(cluster=stand_in_ref(), node_os="AL2023_x86_64_STANDARD")
    assert [str(p) for p in raised.value.problems] == [
        "GpuOperatorArgs.node_os: 'AL2023_x86_64_STANDARD' is not an NVIDIA GPU AMI type; allowed: "
        "AL2023_x86_64_NVIDIA, BOTTLEROCKET_x86_64_NVIDIA, BOTTLEROCKET_x86_64_NVIDIA_FIPS"
    ]


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_component_signature_lists_args_opts_and_each_field_as_a_keyword(component):
    args_cls = getattr(eks_gpu_training, f"{component.__name__}Args")
    parameters = inspect.signature(component).parameters
    assert list(parameters)[:3] == ["name", "args", "opts"]
    fields = getattr(args_cls, "model_fields", None) or {f: None for f in args_cls.__dataclass_fields__}
    assert list(parameters)[3:] == list(fields)
    assert all(parameters[f].kind is inspect.Parameter.KEYWORD_ONLY for f in fields)


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_component_builds_its_arguments_in_its_own_constructor(component):
    # The constructor is the one the class defines, not a wrapper put in its place.
    assert component.__init__.__qualname__ == f"{component.__name__}.__init__"
    assert not hasattr(component.__init__, "__wrapped__")
    with pytest.raises(ConfigError) as raised:
        component("x", no_such_field=1)
    assert str(raised.value.problems[0]).startswith(f"{component.__name__}(x).no_such_field: unknown argument; allowed: ")


def test_documenting_a_component_whose_constructor_takes_no_keyword_fields_is_refused():
    from eks_gpu_training.config.documented import documented_component

    with pytest.raises(TypeError, match=r"Plain.__init__ takes no \*\*fields"):

        @documented_component(GpuNodeGroupArgs)
        class Plain(pulumi.ComponentResource):
            def __init__(self, name: str, args: GpuNodeGroupArgs, opts=None):
                super().__init__("test:index:Plain", name, None, opts)


def _job_spec():
    from eks_gpu_training import TrainingJobSpec

    return TrainingJobSpec(
        name="llama-sft", nodes=2, instance_types=("p5.48xlarge",), priority_class="training-critical",
        namespace="training", efa=True, command=("torchrun",), args=("train.py",),
        image="public.ecr.aws/deep-learning-containers/pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2",
    )


def test_a_workload_given_a_cluster_puts_its_objects_on_the_clusters_kubernetes_provider():
    from eks_gpu_training import TrainingJob

    def program():
        cluster = research_cluster(NETWORK)
        TrainingJob("llama-sft", job=_job_spec(), cluster=cluster)

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    provider = graph.one("pulumi:providers:kubernetes")
    job_objects = [r for r in graph.resources if r.type.startswith("kubernetes:") and r.name.startswith("llama-sft")]
    assert {r.type for r in job_objects} == {"kubernetes:batch/v1:Job", "kubernetes:core/v1:Service", "kubernetes:policy/v1:PodDisruptionBudget"}
    assert {r.provider.rsplit("::", 1)[0] for r in job_objects} == {provider.urn}


def test_refuses_a_kubernetes_provider_in_opts_beside_a_cluster_with_another():
    import pulumi_kubernetes as k8s
    from eks_gpu_training import TrainingJob

    def program():
        cluster = research_cluster(NETWORK)
        other = k8s.Provider("other")
        TrainingJob("llama-sft", job=_job_spec(), cluster=cluster, opts=pulumi.ResourceOptions(provider=other))

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [str(p) for p in graph.error.problems] == [
        "TrainingJob(llama-sft).opts: names a Kubernetes provider other than its cluster's; pass one of them, not both"
    ]
    assert not [r for r in graph.resources if r.name.startswith("llama-sft")]


def test_an_addon_accepts_its_clusters_own_kubernetes_provider_in_opts():
    def program():
        cluster = research_cluster(NETWORK)
        EfaDevicePlugin("efa", cluster=cluster, opts=pulumi.ResourceOptions(providers={"kubernetes": cluster.provider}))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)


def test_pulumi_up_shows_a_calling_mistake_as_its_message_not_a_traceback():
    from tests.support.harness import refusal_text

    def program():
        GpuNodeGroup("h100", cluster=research_cluster(NETWORK), pools=[POOL])

    shown = refusal_text(run_program(program, STACK).error)
    assert "Traceback" not in shown
    assert "GpuNodeGroup(h100).pools: unknown argument" in shown


def test_refuses_a_pulumi_eks_cluster_with_an_aws_provider_of_its_own_given_without_its_region():
    import pulumi_aws as aws

    def program():
        east = aws.Provider("east", region="us-east-1")
        cluster = eks.Cluster("research", name="research", opts=pulumi.ResourceOptions(providers={"aws": east}))
        GpuNodeGroup("h100", cluster=cluster, network=NETWORK, pool=POOL)

    graph = run_program(program, STACK)
    assert isinstance(graph.error, ConfigError)
    assert [str(p) for p in graph.error.problems] == [
        "GpuNodeGroupArgs.cluster: the region of this pulumi_eks.Cluster is not known (it has an AWS provider of its own); "
        "pass ClusterRef.from_eks_cluster(cluster, region=...)"
    ]


def test_kueue_queues_given_a_cluster_put_their_objects_on_the_clusters_kubernetes_provider():
    from eks_gpu_training import KueueQueues, NamespaceQueues

    def program():
        KueueQueues("queues", flavors=[], namespaces=[NamespaceQueues("training", {})], cluster=research_cluster(NETWORK))

    graph = run_program(program, STACK)
    assert graph.error is None, repr(graph.error)
    provider = graph.one("pulumi:providers:kubernetes")
    queue_objects = [r for r in graph.resources if r.name.startswith("queues-")]
    assert sorted(r.type.rsplit(":", 1)[1] for r in queue_objects) == ["ClusterQueue", "LocalQueue", "LocalQueue", "Topology"]
    assert {r.provider.rsplit("::", 1)[0] for r in queue_objects} == {provider.urn}
