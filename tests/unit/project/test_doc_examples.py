"""The examples of using the library from your own program, run as their pages print them: the README's
one ("Use from your own program") and those of docs/library.md ("Examples"); and the README's fleet
of stacks, its stack files written as it prints them."""

from __future__ import annotations

from collections import Counter

import yaml

from tests.support.fleet_stacks import MANAGER, WORKERS, run_fleet_stack, run_fleet_workers, write_fleet_project
from tests.support.harness import PlausibleMocks, page_examples, run_example

README_EXAMPLES = page_examples("README.md", "Use from your own program")
LIBRARY_EXAMPLES = page_examples("docs/library.md", "Examples")
EXAMPLES = {**README_EXAMPLES, **LIBRARY_EXAMPLES}


def run(heading: str):
    graph = run_example(EXAMPLES[heading], heading, config={"aws:region": "us-west-2"})
    assert graph.error is None, repr(graph.error)
    assert graph.output_text() == []
    assert [urn for urn, n in Counter(r.urn for r in graph.resources).items() if n > 1] == []
    return graph


def test_the_readme_keeps_one_example_and_the_library_page_one_per_use_each_run_by_a_test_below():
    assert set(README_EXAMPLES) == {"Your own `eks.Cluster`"}
    assert set(LIBRARY_EXAMPLES) == {
        "An existing cluster, adopted by name",
        "Kubernetes objects only",
        "A JobSet or a TrainJob",
        "The in-cluster half of a stack, on a cluster made elsewhere",
        "Outputs from resources made in the same program",
        "Two fleets under your own component",
        "Training templates without the platform, as plain manifests",
    }


def test_own_eks_cluster_example_adds_a_pool_named_after_the_clusters_output_name():
    graph = run("Your own `eks.Cluster`")
    cluster = graph.one("eks:index:Cluster")
    node_group = graph.one("aws:eks/nodeGroup:NodeGroup")
    # pulumi-eks names an unnamed cluster itself; the pool reads that name from the cluster.
    assert node_group.inputs["clusterName"].startswith("research-eksCluster-")
    assert node_group.inputs["nodeGroupNamePrefix"] == "h100-"
    assert cluster.inputs["vpcId"] == "vpc-0123456789abcdef0"
    template = graph.one("aws:ec2/launchTemplate:LaunchTemplate")
    assert node_group.inputs["clusterName"] in template.inputs["description"]
    attachment = graph.one("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "h100-datasets")
    assert attachment.inputs["role"] == graph.one("aws:iam/role:Role").inputs.get("name", "h100-node-role-1a2b3c")
    assert graph.exports["nodeRoleArn"].endswith(":role/h100-node-role-1a2b3c")


def test_adopted_cluster_example_reads_the_cluster_and_installs_through_its_provider():
    graph = run("An existing cluster, adopted by name")
    assert [args["name"] for token, args in graph.invokes if token == "aws:eks/getCluster:getCluster"] == ["research"]
    provider = graph.one("pulumi:providers:kubernetes")
    releases = graph.of_type("kubernetes:helm.sh/v3:Release")
    assert {r.inputs["chart"] for r in releases} == {"gpu-operator", "aws-efa-k8s-device-plugin"}
    assert {r.provider.rsplit("::", 1)[0] for r in releases} == {provider.urn}
    assert not graph.of_type("eks:index:Cluster")


def test_kubernetes_objects_only_example_puts_every_object_on_the_given_provider():
    graph = run("Kubernetes objects only")
    provider = graph.one("pulumi:providers:kubernetes")
    objects = [r for r in graph.resources if r.type.startswith("kubernetes:")]
    assert {r.type for r in objects} >= {
        "kubernetes:scheduling.k8s.io/v1:PriorityClass",
        "kubernetes:core/v1:Namespace",
        "kubernetes:batch/v1:Job",
    }
    assert {r.provider.rsplit("::", 1)[0] for r in objects} == {provider.urn}
    assert not [r for r in graph.resources if r.type.startswith("aws:")]


def test_jobset_or_trainjob_example_installs_both_controllers_and_a_trainjob_waiting_for_them():
    graph = run("A JobSet or a TrainJob")
    releases = {r.inputs["chart"].rsplit("/", 1)[-1]: r for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert set(releases) == {"jobset", "kubeflow-trainer"}
    (train_job,) = graph.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    (runtime,) = graph.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime")
    assert train_job.inputs["spec"]["runtimeRef"]["name"] == runtime.inputs["metadata"]["name"] == "llama-sft"
    (component,) = graph.of_type("eks-gpu-training:index:TrainingJob")
    assert graph.depends_on(component, releases["kubeflow-trainer"])


def test_in_cluster_half_example_creates_nothing_in_aws_and_only_kubernetes_objects():
    graph = run("The in-cluster half of a stack, on a cluster made elsewhere")
    assert not [r for r in graph.resources if r.type.startswith(("aws:", "eks:"))]
    provider = graph.one("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "research-kubeconfig.yaml"
    releases = {r.inputs["chart"] for r in graph.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases == {"gpu-operator", "aws-efa-k8s-device-plugin", "oci://registry.k8s.io/kueue/charts/kueue"}
    assert graph.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")


def test_outputs_example_feeds_the_programs_own_vpc_and_subnets_to_the_cluster_and_pool():
    graph = run("Outputs from resources made in the same program")
    subnets = {r.name: r.id for r in graph.of_type("aws:ec2/subnet:Subnet")}
    cluster = graph.one("eks:index:Cluster")
    assert cluster.inputs["vpcId"] == graph.one("aws:ec2/vpc:Vpc").id
    assert cluster.inputs["subnetIds"] == [subnets["private-us-west-2a"], subnets["private-us-west-2b"]]
    pool = next(r for r in graph.of_type("aws:eks/nodeGroup:NodeGroup") if r.inputs["nodeGroupNamePrefix"] == "h100-")
    assert pool.inputs["subnetIds"] == [subnets["private-us-west-2a"]]
    assert graph.one("aws:ec2/securityGroup:SecurityGroup").inputs["vpcId"] == graph.one("aws:ec2/vpc:Vpc").id


def test_two_fleets_nest_under_the_users_component_without_clashing():
    graph = run("Two fleets under your own component")
    fleets = graph.one("acme:index:GpuFleets")
    platforms = graph.of_type("eks-gpu-training:index:GpuTrainingPlatform")
    assert sorted(p.name for p in platforms) == ["fleets-us-east-1", "fleets-us-west-2"]
    assert {p.parent for p in platforms} == {fleets.urn}
    assert sorted(c.inputs["name"] for c in graph.of_type("eks:index:Cluster")) == ["fleets-us-east-1", "fleets-us-west-2"]
    assert all(fleets in graph.ancestors(r) for r in graph.resources if r is not fleets)


def test_plain_manifests_example_prints_the_job_its_rendezvous_service_and_its_pdb(capsys):
    run("Training templates without the platform, as plain manifests")
    manifests = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [
        ("Job", "llama-sft"),
        ("Service", "llama-sft"),
        ("PodDisruptionBudget", "llama-sft"),
    ]
    assert manifests[0]["spec"]["completions"] == 4
    assert manifests[0]["spec"]["parallelism"] == 4
    assert manifests[2]["spec"]["minAvailable"] == 4


def test_the_readmes_fleet_runs_two_workers_and_a_manager_that_reads_their_kubeconfigs_by_stack_reference(tmp_path, monkeypatch):
    write_fleet_project(tmp_path)
    monkeypatch.chdir(tmp_path)  # Pulumi runs a stack's program in its project's folder
    workers = run_fleet_workers(tmp_path)
    # A worker in each of two regions, each its own cluster.
    assert {stack: (g.one("eks:index:Cluster").inputs["name"], sorted({s.inputs["availabilityZone"] for s in g.of_type("aws:ec2/subnet:Subnet")}))
            for stack, g in workers.items()} == {"fleet-west": ("gpu-training-west", ["us-west-2a", "us-west-2b"]),
                                                 "fleet-east": ("gpu-training-east", ["us-east-1a", "us-east-1b"])}
    manager = run_fleet_stack(tmp_path, MANAGER, PlausibleMocks(stacks={stack: g.stack_outputs() for stack, g in workers.items()}))
    assert sorted(r.inputs["name"] for r in manager.of_type("pulumi:pulumi:StackReference")) == ["fleet-east", "fleet-west"]
    secrets = {s.inputs["metadata"]["name"]: s.inputs["stringData"]["value"]["kubeconfig"] for s in manager.of_type("kubernetes:core/v1:Secret")
               if s.inputs["metadata"]["name"].startswith("multikueue-")}
    assert set(secrets) == {"multikueue-west", "multikueue-east"}
    for name, stack in WORKERS.items():
        assert "multiKueueKubeconfig" in workers[stack].secret_exports
        assert secrets[f"multikueue-{name}"] == workers[stack].exports["multiKueueKubeconfig"]
        assert yaml.safe_load(secrets[f"multikueue-{name}"])["users"][0]["user"] == {"token": f"token-of-{stack}"}
    assert manager.one("kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig").inputs["spec"] == {"clusters": ["west", "east"]}
