"""Every image from a mirror (``images.registryMirrors``), and a stack that would pull from an
unmapped registry refused before anything registers (``images.requireMirror``)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from eks_gpu_training import ConfigError, image_mirrors
from eks_gpu_training.facts.images import is_private_ecr, mirrored, registry_of, split_registry
from harness import run_main, run_program, stack_config
from eks_gpu_training.platform.stack_files import stack_file_name

PROJECT = "eks-gpu-training"
MIRRORS = {
    "nvcr.io": "harbor.example.com/nvcr",
    "registry.k8s.io": "harbor.example.com/k8s",
    "public.ecr.aws": "harbor.example.com/ecr-public",
    "602401143452.dkr.ecr.us-west-2.amazonaws.com": "harbor.example.com/eks",
    "docker.io": "harbor.example.com/hub",
    "ghcr.io": "harbor.example.com/ghcr",
}
"""Every registry the stacks pull from, each to a prefix of one company registry (ghcr.io: Kubeflow
Trainer's controller, prod's)."""


def test_a_reference_keeps_its_path_tag_and_digest_under_the_mirror():
    assert split_registry("busybox:1.37") == ("docker.io", "library/busybox:1.37")
    assert split_registry("localhost:5000/team/app") == ("localhost:5000", "team/app")
    assert mirrored("nvcr.io/nvidia/k8s/dcgm-exporter:4.2", MIRRORS) == "harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.2"
    digest = "public.ecr.aws/karpenter/controller:1.14.1@sha256:" + "a" * 64
    assert mirrored(digest, MIRRORS) == "harbor.example.com/ecr-public/karpenter/controller:1.14.1@sha256:" + "a" * 64
    assert mirrored("quay.io/org/app:1", MIRRORS) == "quay.io/org/app:1"  # a registry the map leaves out
    assert is_private_ecr(registry_of("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/x:1"))


def _images(document, origin):
    """(where, image) of every container image and every image repository an object names (the
    ClusterPolicy's operands are repositories the GPU Operator reads)."""
    found = []

    def walk(value, path):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "repository" and isinstance(item, str) and item:
                    found.append((f"{origin}: {'.'.join(path + [key])}", item))
                elif key == "image" and isinstance(item, str) and "name" in value:
                    found.append((f"{origin}: {'.'.join(path + [key])}", item))
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
        document = yaml.safe_load(manifest.read_text())
        images += _images(document, str(manifest.relative_to(out)))
    assert any("clusterpolicy" in where and "repository" in where for where, _ in images)
    outside = [
        (where, image) for where, image in images
        if not any(image.startswith(prefix + "/") for prefix in MIRRORS.values())
        # The EKS add-on's images come from EKS's own ECR, which the add-on does not let a stack
        # change; the topology labeler's is the stack's own ECR repository, known at deployment.
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
    # Karpenter's chart names its controller by digest; prod's training image is pinned by digest.
    assert not any("karpenter" in m or "rl-training" in m for m in messages), messages


def test_require_digest_refuses_a_training_image_named_by_tag():
    config = stack_config("dev")
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    config[f"{PROJECT}:scheduling"]["trainingApps"][0]["job"]["image"] = "nvcr.io/nvidia/pytorch:25.01-py3"
    graph = run_main(config)
    messages = [p.message for p in graph.error.problems if p.path == "images.requireDigest"]
    assert "training job " + config[f"{PROJECT}:scheduling"]["trainingApps"][0]["name"] + \
        ": nvcr.io/nvidia/pytorch:25.01-py3 is named by tag alone; pin it by digest (@sha256:...)" in messages


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


def test_a_program_of_its_own_mirrors_its_objects_with_the_same_transformation():
    job = {"template": {"spec": {"restartPolicy": "Never",
                                 "initContainers": [{"name": "fetch", "image": "busybox:1.37"}],
                                 "containers": [{"name": "train", "image": pulumi.Output.from_input("nvcr.io/nvidia/pytorch:25.01-py3")}]}}}

    def program():
        k8s.batch.v1.Job("train", spec=job, opts=pulumi.ResourceOptions(transformations=[image_mirrors(MIRRORS)]))

    graph = run_program(program, {})
    (resource,) = graph.of_type("kubernetes:batch/v1:Job")
    spec = resource.inputs["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == "harbor.example.com/hub/library/busybox:1.37"
    assert spec["containers"][0]["image"] == "harbor.example.com/nvcr/nvidia/pytorch:25.01-py3"
