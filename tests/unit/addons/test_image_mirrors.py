"""Every image from a mirror (``images.registryMirrors``), and a stack that would pull from an
unmapped registry refused before anything registers (``images.requireMirror``)."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from eks_gpu_training.facts import yaml_io
from eks_gpu_training import ConfigError, image_mirrors
from eks_gpu_training.config.health_settings import DCGM_IMAGE
from eks_gpu_training.facts.images import is_private_ecr, mirrored, registry_of, split_registry
from tests.support.harness import run_main, run_program, stack_config
from eks_gpu_training.platform.stack_files import stack_file_name

PROJECT = "eks-gpu-training"
MIRRORS = {
    "nvcr.io": "harbor.example.com/nvcr",
    "registry.k8s.io": "harbor.example.com/k8s",
    "public.ecr.aws": "harbor.example.com/ecr-public",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com": "harbor.example.com/eks",
    "docker.io": "harbor.example.com/hub",
    "ghcr.io": "harbor.example.com/ghcr",
    "444455556666.dkr.ecr.us-west-2.amazonaws.com": "harbor.example.com/account",
}
"""Every registry the stacks pull from, each to a prefix of one company registry (ghcr.io: Kubeflow
Trainer's controller, prod's; the account's own ECR: prod's nccl-tests image, which its health gate
loops back over EFA with)."""


def test_a_reference_keeps_its_path_tag_and_digest_under_the_mirror():
    assert split_registry("busybox:1.37") == ("docker.io", "library/busybox:1.37")
    assert split_registry("localhost:5000/team/app") == ("localhost:5000", "team/app")
    assert mirrored("nvcr.io/nvidia/k8s/dcgm-exporter:4.2", MIRRORS) == "harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.2"
    digest = "public.ecr.aws/karpenter/controller:1.14.1@sha256:" + "a" * 64
    assert mirrored(digest, MIRRORS) == "harbor.example.com/ecr-public/karpenter/controller:1.14.1@sha256:" + "a" * 64
    assert mirrored("quay.io/org/app:1", MIRRORS) == "quay.io/org/app:1"  # a registry the map leaves out
    assert is_private_ecr(registry_of("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/x:1"))


def _json_payload(text):
    """A ConfigMap value that is a JSON object or list (the health gate's settings), else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _images(document, origin):
    """(where, image) of every container image and every image repository an object names (the
    ClusterPolicy's operands are repositories the GPU Operator reads), also inside a ConfigMap's
    JSON values (the health gate's check pod)."""
    found = []

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "repository" and isinstance(item, str) and item:
                    found.append((f"{origin}: {'.'.join(path + [key])}", item))
                elif key == "image" and isinstance(item, str) and "name" in value:
                    found.append((f"{origin}: {'.'.join(path + [key])}", item))
                elif isinstance(item, str) and path[-1:] == ["data"] and _json_payload(item) is not None:
                    walk(_json_payload(item), path + [key])
                else:
                    walk(item, path + [key])
        elif isinstance(value, list):
            for item in value:
                walk(item, path)

    walk(document, [])
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_with_every_registry_mapped_no_object_of_the_stack_pulls_from_outside_the_mirrors(stack, tmp_path, chart_sources):
    from eks_gpu_training.offline.render import render

    config = stack_config(stack)
    config[f"{PROJECT}:images"] = {"registryMirrors": MIRRORS, "requireMirror": True}
    stack_path = tmp_path / stack_file_name(f"{stack}-mirrored")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    out = tmp_path / "out"
    summary = render(f"{stack}-mirrored", out, stack_path=stack_path, picture=False, sources=chart_sources)
    assert all(c.objects for c in summary.charts), summary.charts
    images = []
    for manifest in sorted((out / "manifests").rglob("*.yaml")):
        document = yaml_io.load(manifest.read_text())
        images += _images(document, str(manifest.relative_to(out)))
    assert any("clusterpolicy" in where and "repository" in where for where, _ in images)
    # The health gate's check pod, inside its ConfigMap's JSON: DCGM's image, and the gate's own.
    check_images = [(where, image) for where, image in images if "gate.json" in where]
    assert mirrored(DCGM_IMAGE, MIRRORS) in [image for _, image in check_images], check_images
    outside = [
        (where, image) for where, image in images
        if not any(image.startswith(prefix + "/") for prefix in MIRRORS.values())
        # The EKS add-on's images come from EKS's own ECR, which the add-on does not let a stack
        # change; the topology labeler's and the health gate's are the stack's own ECR repositories,
        # known at deployment.
        and not ("eks-node-monitoring-agent" in where and is_private_ecr(registry_of(image)))
        and not image.startswith("<unknown: repositoryUrl of aws:ecr/repository:Repository")
    ]
    assert outside == []


def test_an_unmapped_registry_is_refused_naming_each_object_before_anything_registers():
    config = stack_config("dev")
    config[f"{PROJECT}:images"] = {"requireMirror": True, "registryMirrors": {"public.ecr.aws": "harbor.example.com/ecr-public"}}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    messages = [p.message for p in graph.error.problems if p.path == "images.requireMirror"]
    assert any(m.startswith("Helm release gpu-operator: ") and "operator.repository" in m and "from nvcr.io, which images.registryMirrors does not map" in m
               for m in messages), messages
    assert any(m.startswith("Helm release kueue: controllerManager.manager.image.repository from registry.k8s.io") for m in messages)
    # A part of a chart the stack leaves off (Kueue's dashboard, from a staging registry) is not asked for.
    assert not any("kueueViz" in m for m in messages)
    # Nothing from a mapped registry, nor from EKS's own ECR in the cluster's region (the EFA device plugin's).
    assert not any("public.ecr.aws" in m or "dkr.ecr" in m for m in messages)


def test_require_digest_refuses_each_image_named_by_tag_alone_naming_its_object():
    config = stack_config("prod")
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    messages = [p.message for p in graph.error.problems if p.path == "images.requireDigest"]
    assert any(m.startswith("Helm release gpu-operator: operator.repository (nvcr.io/nvidia) is named by tag alone")
               for m in messages), messages
    assert any(m.startswith("Helm release kueue: controllerManager.manager.image.repository (registry.k8s.io/kueue/kueue)")
               for m in messages), messages
    # Karpenter's chart names its controller by digest; prod's training image is named by tag and
    # no images.lock pins it.
    assert not any("karpenter" in m for m in messages), messages
    assert any("rl-training" in m and "pytorch-training:2.7.1-" in m for m in messages), messages


def test_require_digest_refuses_a_training_image_named_by_tag():
    config = stack_config("dev")
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    config[f"{PROJECT}:scheduling"]["trainingApps"][0]["job"]["image"] = "nvcr.io/nvidia/pytorch:25.01-py3"
    graph = run_main(config)
    messages = [p.message for p in graph.error.problems if p.path == "images.requireDigest"]
    assert "training job " + config[f"{PROJECT}:scheduling"]["trainingApps"][0]["name"] + \
        ": nvcr.io/nvidia/pytorch:25.01-py3 is named by tag alone and images.lock holds no digest for it; lock it " \
        "(eks-gpu-training-lock-images STACK) or pin it by digest (@sha256:...)" in messages


def test_a_private_ecr_of_another_region_needs_a_mirror_too():
    """The EFA device plugin's chart names EKS's ECR in us-west-2; a cluster elsewhere reaches it
    only over the internet, not through its VPC's ECR endpoints."""
    config = stack_config("prod")
    config["aws:region"] = "eu-west-1"
    config[f"{PROJECT}:images"] = {"requireMirror": True, "registryMirrors": {
        r: p for r, p in MIRRORS.items() if not r.endswith(".amazonaws.com")}}
    graph = run_main(config)
    problems = [p.message for p in getattr(graph.error, "problems", []) if p.path == "images.requireMirror"]
    assert any(m.startswith("Helm release aws-efa-k8s-device-plugin: image.repository from "
                            "602401143452.dkr.ecr.us-west-2.amazonaws.com") for m in problems), graph.error


def test_mirrors_that_are_not_registries_are_refused_with_their_key():
    config = stack_config("dev")
    config[f"{PROJECT}:images"] = {"registryMirrors": {"https://nvcr.io": "harbor.example.com/nvcr", "registry.k8s.io": "https://harbor/k8s"}}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [p.path for p in graph.error.problems] == ["images.registryMirrors"]
    assert "'https://nvcr.io' is not a registry host" in graph.error.problems[0].message


def test_a_program_of_its_own_mirrors_its_objects_with_the_same_transform():
    job = {"template": {"spec": {"restartPolicy": "Never",
                                 "initContainers": [{"name": "fetch", "image": "busybox:1.37"}],
                                 "containers": [{"name": "train", "image": pulumi.Output.from_input("nvcr.io/nvidia/pytorch:25.01-py3")}]}}}

    def program():
        k8s.batch.v1.Job("train", spec=job, opts=pulumi.ResourceOptions(transforms=[image_mirrors(MIRRORS)]))

    graph = run_program(program, {})
    (resource,) = graph.of_type("kubernetes:batch/v1:Job")
    spec = resource.inputs["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == "harbor.example.com/hub/library/busybox:1.37"
    assert spec["containers"][0]["image"] == "harbor.example.com/nvcr/nvidia/pytorch:25.01-py3"


def test_a_pod_spec_holding_a_secret_is_mirrored_and_stays_secret():
    """The engine hands a transform a secret input as the SDK's secret wrapper (a secret anywhere in
    the spec makes the whole spec secret)."""
    from pulumi.runtime import rpc

    job = {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "train", "image": "busybox:1.37", "env": [{"name": "TOKEN", "value": pulumi.Output.secret("s3cret")}]}]}}}

    def program():
        k8s.batch.v1.Job("train", spec=job, opts=pulumi.ResourceOptions(transforms=[image_mirrors(MIRRORS)]))

    graph = run_program(program, {})
    spec = graph.one("kubernetes:batch/v1:Job").inputs["spec"]
    assert spec[rpc._special_sig_key] == rpc._special_secret_sig
    (container,) = spec["value"]["template"]["spec"]["containers"]
    assert container["image"] == "harbor.example.com/hub/library/busybox:1.37"
    assert container["env"] == [{"name": "TOKEN", "value": "s3cret"}]


def _gate_objects(graph):
    """The health gate's check pod (from its ConfigMap's settings) and its Deployment's pod spec."""
    (config_map,) = graph.subtree(graph.one("eks-gpu-training:index:HealthGate")).of_type("kubernetes:core/v1:ConfigMap")
    (deployment,) = [r for r in graph.of_type("kubernetes:apps/v1:Deployment") if r.inputs["metadata"]["name"] == "health-gate"]
    return json.loads(config_map.inputs["data"]["gate.json"])["checkPod"]["spec"], deployment.inputs["spec"]["template"]["spec"]


def test_the_gates_own_image_and_its_check_images_are_pulled_from_the_mirrors():
    """The check pod travels as JSON in the gate's ConfigMap, where the transformation that mirrors
    pod specs does not look: its images are mirrored where the template is built."""
    config = stack_config("prod")
    config[f"{PROJECT}:healthGate"] = {**config[f"{PROJECT}:healthGate"], "image": "ghcr.io/example/health-gate:1.0.0"}
    config[f"{PROJECT}:images"] = {"registryMirrors": MIRRORS, "requireMirror": True}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    check, gate = _gate_objects(graph)
    assert {c["name"]: c["image"] for c in check["initContainers"] + check["containers"]} == {
        "efa": "harbor.example.com/ghcr/example/health-gate:1.0.0",
        "efa-loopback": "harbor.example.com/account/nccl-tests:efa1.47.0-ncclv2.29.3-1-testsv2.17.9",
        "dcgm": "harbor.example.com/nvcr/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
    }
    assert gate["containers"][0]["image"] == "harbor.example.com/ghcr/example/health-gate:1.0.0"


def test_require_mirror_refuses_each_gate_image_from_an_unmapped_registry_naming_its_key():
    config = stack_config("prod")
    config[f"{PROJECT}:healthGate"] = {**config[f"{PROJECT}:healthGate"], "image": "quay.io/example/health-gate:1.0.0",
                                       "efaLoopbackImage": "quay.io/example/nccl-tests:1.0.0"}
    config[f"{PROJECT}:images"] = {"requireMirror": True, "registryMirrors": {r: p for r, p in MIRRORS.items() if r != "nvcr.io"}}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    messages = [p.message for p in graph.error.problems if p.path == "images.requireMirror"]
    assert "the health gate's DCGM check (healthGate.dcgmImage): nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04 from " \
        "nvcr.io, which images.registryMirrors does not map; map nvcr.io to a mirror prefix" in messages, messages
    assert "the health gate (healthGate.image): quay.io/example/health-gate:1.0.0 from quay.io, which images.registryMirrors " \
        "does not map; map quay.io to a mirror prefix" in messages
    assert any(m.startswith("the health gate's EFA loopback check (healthGate.efaLoopbackImage): quay.io/example/nccl-tests:1.0.0 ")
               for m in messages), messages


def test_require_digest_lists_each_gate_image_named_by_tag_with_its_key():
    config = stack_config("prod")
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    messages = [p.message for p in graph.error.problems if p.path == "images.requireDigest"]
    assert "the health gate's DCGM check (healthGate.dcgmImage): nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04 is named " \
        "by tag alone and images.lock holds no digest for it; lock it (eks-gpu-training-lock-images STACK) or pin it " \
        "by digest (@sha256:...)" in messages, messages
    assert any(m.startswith("the health gate's EFA loopback check (healthGate.efaLoopbackImage): 444455556666.dkr.ecr.us-west-2."
                            "amazonaws.com/nccl-tests:efa1.47.0-ncclv2.29.3-1-testsv2.17.9 is named by tag alone") for m in messages)
    # The gate's own image is built here and run by the digest it was pushed with.
    assert not any("(healthGate.image)" in m for m in messages)
    pinned = "nvcr.io/nvidia/cloud-native/dcgm@sha256:" + "d" * 64
    config[f"{PROJECT}:healthGate"] = {**config[f"{PROJECT}:healthGate"], "dcgmImage": pinned}
    messages = [p.message for p in run_main(config).error.problems if p.path == "images.requireDigest"]
    assert not any("(healthGate.dcgmImage)" in m for m in messages)
