"""The TopologyLabeler component: what the stacks register under the mock engine, and the
Kubernetes objects validated against the Kubernetes schema."""

from __future__ import annotations

import copy
import json
import re
import shutil

import kubernetes_validate
import pytest

from eks_gpu_training.aws import labeler_image
from eks_gpu_training.addons import topology_labeler as tl
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS, ConfigError, TopologyLabelerConfig
from eks_gpu_training.platform import parse_platform_args
from eks_gpu_training.facts.gpu_nodes import gpu_daemon_tolerations
from tests.support.harness import ACCOUNT_ID, PROJECT_ROOT, run_main, run_program, stack_config, stand_in_ref

NS = "kubernetes:core/v1:Namespace"
SA = "kubernetes:core/v1:ServiceAccount"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NODE_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
NODE_POLICY_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
REPOSITORY = "aws:ecr/repository:Repository"
IMAGE = "docker-build:index:Image"
COMPONENT = "eks-gpu-training:index:TopologyLabeler"
LABELER_TYPES = {COMPONENT, NS, SA, NETWORK_POLICY, CLUSTER_ROLE, BINDING, NODE_POLICY, NODE_POLICY_BINDING, DAEMONSET, ROLE_POLICY, ASSOCIATION, REPOSITORY, IMAGE}
PREBUILT = "111122223333.dkr.ecr.us-west-2.amazonaws.com/tools/topology-labeler@sha256:" + "ab" * 32


def prod_with_labeler(**labeler) -> dict:
    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:topologyLabeler"] = labeler
    return config


def labeler_of(graph):
    """The labeler component's own resources (other components have namespaces too)."""
    return graph.subtree(graph.one(COMPONENT))


def labeler_role(graph):
    (role,) = [r for r in graph.of_type(ROLE) if r.name.endswith("topology-labeler-role")]
    return role


def as_sent(registration) -> dict:
    """A Kubernetes object as the program handed it to pulumi-kubernetes."""
    return dict(registration.inputs)


def test_prod_has_the_labeler_namespace_service_account_and_nodes_only_rbac(prod_graph):
    namespace = labeler_of(prod_graph).one(NS)
    assert namespace.inputs["metadata"]["name"] == "topology-labeler"
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    account = labeler_of(prod_graph).one(SA)
    assert account.inputs["metadata"] == {"name": "topology-labeler", "namespace": "topology-labeler", "labels": tl.LABELS}
    role = labeler_of(prod_graph).one(CLUSTER_ROLE)
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    binding = labeler_of(prod_graph).one(BINDING)
    assert binding.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "topology-labeler"}
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": "topology-labeler", "namespace": "topology-labeler"}]


def test_prod_iam_role_is_for_pod_identity_and_allows_exactly_describe_instance_topology(prod_graph):
    role = labeler_role(prod_graph)
    assert json.loads(role.inputs["assumeRolePolicy"]) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                # this cluster's Pod Identity only, not any cluster's in any account
                "Condition": {
                    # and only to the labeler's ServiceAccount (Pod Identity's session tags)
                    "StringEquals": {
                        "aws:SourceAccount": ACCOUNT_ID,
                        "aws:RequestTag/kubernetes-namespace": "topology-labeler",
                        "aws:RequestTag/kubernetes-service-account": "topology-labeler",
                    },
                    "ArnEquals": {"aws:SourceArn": f"arn:aws:eks:us-west-2:{ACCOUNT_ID}:cluster/gpu-training-prod"},
                },
            }
        ],
    }
    (policy,) = [p for p in prod_graph.of_type(ROLE_POLICY) if p.parent == role.urn]
    document = json.loads(policy.inputs["policy"])
    (statement,) = document["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "ec2:DescribeInstanceTopology"
    assert statement["Resource"] == "*"
    assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-west-2"}}
    assert policy.inputs["role"] == f"{role.name}-id"
    # No managed policy is attached to the labeler's role.
    attachments = [a for a in prod_graph.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if "topology" in a.name]
    assert attachments == []


def test_prod_pod_identity_association_binds_the_role_to_the_service_account(prod_graph):
    association = labeler_of(prod_graph).one(ASSOCIATION)
    assert association.inputs == {
        "region": "us-west-2",
        "clusterName": "gpu-training-prod",
        "namespace": "topology-labeler",
        "serviceAccount": "topology-labeler",
        "roleArn": f"arn:aws:iam::123456789012:role/{labeler_role(prod_graph).name}-1a2b3c",
        "tags": stack_config("prod")["eks-gpu-training:tags"],
    }


def test_prod_builds_and_pushes_the_image_to_a_scanned_private_ecr_repository(prod_graph):
    repository = labeler_of(prod_graph).one(REPOSITORY)
    assert repository.inputs["name"] == "gpu-training-prod/topology-labeler"
    assert repository.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    image = labeler_of(prod_graph).one(IMAGE)
    url = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{repository.inputs['name']}"
    assert image.inputs["push"] is True
    assert image.inputs["context"] == {"location": "components/labeler"}
    assert image.inputs["buildOnPreview"] is False
    assert image.inputs["dockerfile"] == {"location": "components/labeler/Dockerfile"}
    assert image.inputs["platforms"] == ["linux/amd64"]
    assert image.inputs["tags"] == [f"{url}:{labeler_image.build_context_tag()}"]
    assert image.inputs["registries"] == [{"address": url, "username": "AWS", "password": "mock-ecr-password"}]
    assert prod_graph.depends_on(image, repository)


def test_prod_daemonset_runs_the_pushed_image_by_digest(prod_graph):
    repository, image = labeler_of(prod_graph).one(REPOSITORY), labeler_of(prod_graph).one(IMAGE)
    daemonset = labeler_of(prod_graph).one(DAEMONSET)
    (container,) = daemonset.inputs["spec"]["template"]["spec"]["containers"]
    url = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{repository.inputs['name']}"
    assert re.fullmatch(rf"{re.escape(url)}@sha256:[0-9a-f]{{64}}", container["image"])
    assert prod_graph.depends_on(daemonset, image)


def test_prod_daemonset_passes_strict_schema_validation_for_the_cluster_version(prod_graph):
    version = stack_config("prod")["eks-gpu-training:cluster"]["kubernetesVersion"]
    for kind in (NS, SA, CLUSTER_ROLE, BINDING, DAEMONSET):
        assert kubernetes_validate.validate(as_sent(labeler_of(prod_graph).one(kind)), version, strict=True) == version


def test_prod_daemonset_carries_the_security_and_scheduling_settings(prod_graph):
    spec = labeler_of(prod_graph).one(DAEMONSET).inputs["spec"]
    assert spec["updateStrategy"]["type"] == "RollingUpdate"
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"role": "gpu-training", "kubernetes.io/os": "linux"}
    assert pod["tolerations"] == gpu_daemon_tolerations()
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["serviceAccountName"] == "topology-labeler"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"] == {"requests": {"cpu": "10m", "memory": "128Mi"}, "limits": {"cpu": "250m", "memory": "256Mi"}}
    assert container["livenessProbe"]["exec"]["command"] == [
        "python", "-m", "labeler.healthcheck", "--file", "/run/labeler/heartbeat", "--max-age", "180"
    ]
    # The heartbeat is the only thing written, on a memory-backed emptyDir.
    assert container["volumeMounts"] == [{"name": "run", "mountPath": "/run/labeler"}]
    assert pod["volumes"] == [{"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["LABELER_INTERVAL_SECONDS"]["value"] == "600"


def test_labeler_pods_get_the_cluster_region_and_never_ask_instance_metadata_for_it(prod_graph):
    container = labeler_of(prod_graph).one(DAEMONSET).inputs["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e.get("value") for e in container["env"]}["AWS_REGION"] == "us-west-2"


def test_registered_objects_are_the_pure_manifests(prod_graph):
    config = TopologyLabelerConfig()
    image = labeler_of(prod_graph).one(DAEMONSET).inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    region = stack_config("prod")["aws:region"]
    expected = {m["kind"]: m for m in tl.manifests(image, config, region)}
    for kind in (NS, SA, NETWORK_POLICY, CLUSTER_ROLE, BINDING, NODE_POLICY, NODE_POLICY_BINDING, DAEMONSET):
        sent = as_sent(labeler_of(prod_graph).one(kind))
        assert _equal_numbers(sent, expected[sent["kind"]]), kind


def _equal_numbers(sent, expected) -> bool:
    """Equality up to Pulumi's wire format, where every number is a double."""
    if isinstance(expected, dict):
        return sent.keys() == expected.keys() and all(_equal_numbers(sent[k], expected[k]) for k in expected)
    if isinstance(expected, list):
        return len(sent) == len(expected) and all(_equal_numbers(s, e) for s, e in zip(sent, expected, strict=True))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return float(sent) == float(expected)
    return sent == expected


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_manifests_pass_strict_schema_validation_for_every_supported_version(version):
    config = TopologyLabelerConfig(resources={"cpuLimit": "1", "memoryLimit": "1Gi"}, intervalSeconds=3600)
    for manifest in tl.manifests(PREBUILT, config, "us-west-2"):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version


def test_strict_validation_would_catch_a_misspelt_field():
    manifest = tl.daemonset_manifest(PREBUILT, TopologyLabelerConfig(), "us-west-2")
    manifest["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(manifest, "1.34", strict=True)


def test_k8s_objects_use_the_cluster_provider_and_wait_for_the_cluster_not_gpu_nodes(prod_graph):
    provider = prod_graph.one("pulumi:providers:kubernetes")
    cluster = prod_graph.one("eks:index:Cluster")
    addon = prod_graph.one("aws:eks/addon:Addon", "gpu-training-cluster-pod-identity-agent")
    gpu_groups = [g for g in prod_graph.of_type("aws:eks/nodeGroup:NodeGroup") if g.inputs.get("taints")]
    for kind in (NS, SA, CLUSTER_ROLE, BINDING, NODE_POLICY, NODE_POLICY_BINDING, DAEMONSET):
        assert labeler_of(prod_graph).one(kind).provider.startswith(provider.urn)
    for waiter in (labeler_of(prod_graph).one(NS), labeler_of(prod_graph).one(CLUSTER_ROLE), labeler_of(prod_graph).one(ASSOCIATION)):
        assert prod_graph.depends_on(waiter, cluster)
        assert not any(prod_graph.depends_on(waiter, gpu) for gpu in gpu_groups)
    # Only the Pod Identity association needs the agent add-on.
    assert prod_graph.depends_on(labeler_of(prod_graph).one(ASSOCIATION), addon)
    assert not prod_graph.depends_on(labeler_of(prod_graph).one(NS), addon)


def test_daemonset_waits_for_pod_identity_rbac_and_the_policy(prod_graph):
    daemonset = labeler_of(prod_graph).one(DAEMONSET)
    for other in (ASSOCIATION, BINDING, ROLE_POLICY, SA, NS):
        assert prod_graph.depends_on(daemonset, labeler_of(prod_graph).one(other)), other


def test_labeler_resources_are_children_of_one_component(prod_graph):
    component = prod_graph.one(COMPONENT)
    assert prod_graph.by_urn(component.parent).type == "eks-gpu-training:index:GpuTrainingPlatform"
    for kind in LABELER_TYPES - {COMPONENT}:
        assert component in prod_graph.ancestors(labeler_of(prod_graph).one(kind)), kind


def test_a_prebuilt_image_skips_the_repository_and_the_build():
    graph = run_main(prod_with_labeler(image=PREBUILT))
    assert graph.error is None, repr(graph.error)
    assert labeler_of(graph).of_type(REPOSITORY) == []
    assert labeler_of(graph).of_type(IMAGE) == []
    (container,) = labeler_of(graph).one(DAEMONSET).inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == PREBUILT


def test_labeler_can_be_switched_off_per_stack(dev_graph):
    graph = run_main(prod_with_labeler(enabled=False))
    assert graph.error is None, repr(graph.error)
    for g in (graph, dev_graph):
        assert g.of_type(COMPONENT) == []
        assert not [r for r in g.resources if "topology-labeler" in r.name]
        assert not [r for r in g.of_type(ROLE) if "topology" in r.name]


def test_interval_and_resources_reach_the_daemonset():
    graph = run_main(prod_with_labeler(intervalSeconds=1800, resources={"cpuRequest": "50m", "memoryLimit": "512Mi"}))
    assert graph.error is None, repr(graph.error)
    (container,) = labeler_of(graph).one(DAEMONSET).inputs["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in container["env"]}["LABELER_INTERVAL_SECONDS"] == "1800"
    assert container["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "250m", "memory": "512Mi"}}


# --- configuration ------------------------------------------------------------------------------

def labeler_problems(**labeler) -> list[str]:
    raw = {
        "region": "us-west-2",
        "cluster": {"name": "c", "endpointPublicAccessCidrs": ["192.0.2.0/24"]},
        "network": {
            "vpcId": "vpc-0123456789abcdef0",
            "subnets": [
                {"id": "subnet-0123456789abcdef0", "availabilityZone": "us-west-2a"},
                {"id": "subnet-0123456789abcdef1", "availabilityZone": "us-west-2b"},
            ],
        },
        "topologyLabeler": labeler,
    }
    try:
        parse_platform_args(raw)
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


@pytest.mark.parametrize(
    "image",
    [
        PREBUILT,
        "public.ecr.aws/acme/topology-labeler:v1.2.3",
        "registry.example.com:5000/ml/labeler:2026.11@sha256:" + "0f" * 32,
        "localhost:5000/labeler:1",
        "ghcr.io/acme/labeler@sha256:" + "12" * 32,
    ],
)
def test_image_references_pinned_by_digest_or_release_tag_are_accepted(image):
    assert labeler_problems(image=image) == []


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("ghcr.io/acme/labeler", "names no fixed image"),
        ("ghcr.io/acme/labeler:latest", "names no fixed image"),
        ("ghcr.io/Acme/labeler:v1", "is not an image reference"),
        ("ghcr.io/acme/labeler@sha256:abc", "is not an image reference"),
        ("https://ghcr.io/acme/labeler:v1", "is not an image reference"),
        ("ghcr.io/acme/labeler:v1 ", "is not an image reference"),
    ],
)
def test_image_references_without_a_fixed_image_or_malformed_are_refused(image, message):
    (problem,) = labeler_problems(image=image)
    assert problem.startswith("topologyLabeler.image: ")
    assert message in problem


def test_requests_above_limits_are_refused_with_their_key_paths():
    problems = labeler_problems(resources={"cpuRequest": "2", "cpuLimit": "500m", "memoryRequest": "1Gi", "memoryLimit": "512Mi"})
    assert problems == [
        "topologyLabeler.resources.cpuRequest: '2' exceeds cpuLimit '500m'",
        "topologyLabeler.resources.memoryRequest: '1Gi' exceeds memoryLimit '512Mi'",
    ]


@pytest.mark.parametrize(
    ("labeler", "path"),
    [
        ({"intervalSeconds": 30}, "topologyLabeler.intervalSeconds"),
        ({"intervalSeconds": 100000}, "topologyLabeler.intervalSeconds"),
        ({"resources": {"cpuRequest": "10 m"}}, "topologyLabeler.resources.cpuRequest"),
        ({"resources": {"memoryLimit": "256MB"}}, "topologyLabeler.resources.memoryLimit"),
        ({"namespace": "kube-system"}, "topologyLabeler.namespace"),
    ],
)
def test_invalid_labeler_settings_are_refused(labeler, path):
    (problem,) = labeler_problems(**labeler)
    assert problem.startswith(f"{path}: ")


def test_component_refuses_invalid_resources_before_registering_anything():
    bad = TopologyLabelerConfig.model_validate({"resources": {"memoryRequest": "1Gi", "memoryLimit": "128Mi"}})
    # Validation comes first, so a ref without a provider is enough to see it fail.
    graph = run_program(lambda: tl.TopologyLabeler("labeler", tl.TopologyLabelerArgs(cluster=stand_in_ref(), config=bad)))
    assert isinstance(graph.error, ConfigError)
    assert "TopologyLabeler(labeler).resources.memoryRequest" in str(graph.error)
    assert graph.resources == []


# --- pure helpers -------------------------------------------------------------------------------

def test_ecr_repository_name_is_a_valid_repository_name_for_any_cluster_name():
    assert labeler_image.ecr_repository_name("gpu-training-prod") == "gpu-training-prod/topology-labeler"
    assert labeler_image.ecr_repository_name("Research_GPU--01") == "research-gpu-01/topology-labeler"


def test_build_context_is_the_program_and_its_requirements_only():
    files = labeler_image.build_context_files()
    assert "requirements.txt" in files
    assert "loop.py" in files
    assert "__main__.py" in files
    assert all(f == "requirements.txt" or (f.endswith(".py") and "/" not in f) for f in files)
    assert "Dockerfile" not in files
    assert ".dockerignore" not in files


def test_build_context_tag_follows_the_sources(tmp_path):
    context = tmp_path / "labeler"
    shutil.copytree(labeler_image.LABELER_DIR, context, ignore=shutil.ignore_patterns("__pycache__"))
    before = labeler_image.build_context_tag(context)
    assert before == labeler_image.build_context_tag(labeler_image.LABELER_DIR)
    (context / "notes.md").write_text("not part of the image")
    assert labeler_image.build_context_tag(context) == before
    (context / "loop.py").write_text((context / "loop.py").read_text() + "\n# changed\n")
    assert labeler_image.build_context_tag(context) != before


def test_resources_take_any_kubernetes_quantity_and_compare_exactly():
    # The same quantity grammar as the scheduling quotas: decimal and binary suffixes, fractions.
    assert labeler_problems(resources={"cpuLimit": "0.5", "memoryRequest": "100M", "memoryLimit": "0.25Gi"}) == []
    assert labeler_problems(resources={"memoryRequest": "1G", "memoryLimit": "1Gi"}) == []
    assert labeler_problems(resources={"memoryRequest": "1Gi", "memoryLimit": "1G"}) == [
        "topologyLabeler.resources.memoryRequest: '1Gi' exceeds memoryLimit '1G'"
    ]


def test_the_daemonset_waits_for_the_node_policy_and_tells_pods_the_clusters_region(prod_graph):
    daemonset = labeler_of(prod_graph).one(DAEMONSET)
    assert prod_graph.depends_on(daemonset, labeler_of(prod_graph).one(NODE_POLICY_BINDING))
    env = {e["name"]: e.get("value") for e in daemonset.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AWS_REGION"] == stack_config("prod")["aws:region"]


def test_nothing_may_connect_to_the_labelers_namespace(prod_graph):
    policy = labeler_of(prod_graph).one(NETWORK_POLICY)
    assert policy.inputs["metadata"]["namespace"] == "topology-labeler"
    assert policy.inputs["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


def test_build_context_location_is_the_same_in_every_checkout_and_in_project_venv(tmp_path):
    # Two machines, two checkouts: the Image's context input must not differ between them, or every
    # `pulumi up` from the other machine rebuilds and pushes.
    locations = set()
    for machine in ("alice", "ci"):
        project = tmp_path / machine / "platform"
        installed = project / ".venv/lib/python3.11/site-packages/eks_gpu_training/labeler"
        installed.mkdir(parents=True)
        locations.add(labeler_image.build_context_location(installed, working_directory=project))
    assert locations == {".venv/lib/python3.11/site-packages/eks_gpu_training/labeler"}
    assert labeler_image.build_context_location(working_directory=PROJECT_ROOT) == "components/labeler"


def test_build_context_location_outside_the_project_is_absolute(tmp_path):
    elsewhere = tmp_path / "site-packages" / "eks_gpu_training" / "labeler"
    elsewhere.mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    assert labeler_image.build_context_location(elsewhere, working_directory=project) == elsewhere.as_posix()
