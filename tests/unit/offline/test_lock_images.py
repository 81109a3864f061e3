"""A stack with ``images.lock``: every locked image deployed by its digest, under its mirror too,
``images.requireDigest`` passing for what the lock holds and refusing what it lacks, naming its key.
(Resolving digests against a real registry: tests/cluster/test_image_lock_registry.py.)"""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from eks_gpu_training.facts import yaml_io
from eks_gpu_training import ConfigError
from eks_gpu_training.config.image_lock import ImageLock, chart_pins, pinned, with_image_lock
from tests.support.module_charts import images_named_by_tag
from tests.support.harness import run_main, stack_config

PROJECT = "eks-gpu-training"
DIGEST = "sha256:" + "e" * 64
OPERATOR = "nvcr.io/nvidia/gpu-operator:v26.7.0"


def _digest_problems(graph):
    return [p.message for p in getattr(graph.error, "problems", []) if p.path == "images.requireDigest"]


def test_a_locked_reference_is_pinned_and_an_unlocked_one_left_alone():
    assert pinned("nvcr.io/nvidia/pytorch:25.01-py3", {"nvcr.io/nvidia/pytorch:25.01-py3": DIGEST}) == \
        f"nvcr.io/nvidia/pytorch:25.01-py3@{DIGEST}"
    assert pinned("nvcr.io/nvidia/pytorch:25.02-py3", {"nvcr.io/nvidia/pytorch:25.01-py3": DIGEST}) == "nvcr.io/nvidia/pytorch:25.02-py3"
    assert chart_pins("gpu-operator", "v26.7.0", {OPERATOR: DIGEST}, {"gpu-operator-v26.7.0": {"operator.version": OPERATOR}}) == \
        {"operator.version": f"v26.7.0@{DIGEST}"}


def test_the_lock_beside_the_stack_file_fills_images_digests_unless_the_stack_sets_them(tmp_path):
    ImageLock(tmp_path / "images.lock", {OPERATOR: DIGEST}, {"gpu-operator-v26.7.0": {"operator.version": OPERATOR}}).write()
    settings = with_image_lock({f"{PROJECT}:images": json.dumps({"requireDigest": True})}, PROJECT, tmp_path)
    assert settings[f"{PROJECT}:images"] == {"requireDigest": True, "digests": {OPERATOR: DIGEST},
                                             "chartTags": {"gpu-operator-v26.7.0": {"operator.version": OPERATOR}}}
    own = {f"{PROJECT}:images": {"digests": {}}}
    assert with_image_lock(own, PROJECT, tmp_path) == own
    assert with_image_lock(own, PROJECT, tmp_path / "elsewhere") == own


def test_a_locked_training_image_runs_by_its_digest_from_the_mirror_and_passes_require_digest():
    config = stack_config("dev")
    image = config[f"{PROJECT}:scheduling"]["trainingApps"][0]["job"]["image"]
    config[f"{PROJECT}:images"] = {"requireDigest": True, "registryMirrors": {"public.ecr.aws": "harbor.example.com/ecr-public"}}
    refused = _digest_problems(run_main(config))
    assert any(image in message and "images.lock holds no digest for it" in message for message in refused), refused

    config[f"{PROJECT}:images"]["digests"] = {image: DIGEST}
    config[f"{PROJECT}:images"]["requireDigest"] = False
    graph = run_main(config)
    assert graph.error is None, graph.error
    expected = "harbor.example.com/ecr-public/" + image.partition("/")[2] + "@" + DIGEST
    pulled = {container["image"] for job in graph.of_type("kubernetes:batch/v1:Job")
              for container in job.inputs["spec"]["template"]["spec"]["containers"]}
    assert expected in pulled, pulled


def test_a_locked_chart_image_passes_require_digest_and_an_unlocked_one_is_refused_by_its_key():
    config = stack_config("prod")
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    before = _digest_problems(run_main(config))
    assert any(m.startswith("Helm release gpu-operator: operator.repository (nvcr.io/nvidia)") for m in before), before
    config[f"{PROJECT}:images"] = {"requireDigest": True, "digests": {OPERATOR: DIGEST},
                                   "chartTags": {"gpu-operator-v26.7.0": {"operator.version": OPERATOR}}}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    after = _digest_problems(graph)
    assert not any(m.startswith("Helm release gpu-operator: operator.repository ") for m in after), after
    assert any(m.startswith("Helm release gpu-operator: ccManager.repository ") for m in after), after


def _container_images(value, found):
    """Every container's image (a dict with ``name`` and ``image``) in a document, also inside a
    ConfigMap's JSON values (the health gate's check pod)."""
    if isinstance(value, dict):
        if isinstance(value.get("image"), str) and "name" in value:
            found.append(value["image"])
        for item in value.values():
            if isinstance(item, str) and item.lstrip().startswith("{"):
                try:
                    _container_images(json.loads(item), found)
                except ValueError:
                    pass
            else:
                _container_images(item, found)
    elif isinstance(value, list):
        for item in value:
            _container_images(item, found)
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_with_a_lock_of_every_image_the_rendered_stack_pulls_each_by_digest(stack, tmp_path, chart_sources):
    """The lock is made the way the command makes it, from the stack and its charts' values, with a
    digest per reference standing in for what a registry would serve (resolution against a real
    registry: tests/cluster/test_image_lock_registry.py)."""
    from eks_gpu_training.offline.lock_images import _unlocked_args, chart_references, stack_references
    from eks_gpu_training.offline.render import render
    from eks_gpu_training.platform.stack_files import StackFile, stack_file_name

    config = stack_config(stack)
    config[f"{PROJECT}:images"] = {"requireDigest": True}
    stack_path = tmp_path / stack_file_name(f"{stack}-locked")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    located = StackFile(f"{stack}-locked", stack_path, None)
    args = _unlocked_args(located)
    lock = ImageLock(tmp_path / "images.lock")
    for _, reference in stack_references(args):
        lock.digests[reference] = "sha256:" + hashlib.sha256(reference.encode()).hexdigest()
    for chart, _, reference, tag_key in chart_references(args, chart_sources):
        lock.digests[reference] = "sha256:" + hashlib.sha256(reference.encode()).hexdigest()
        lock.chart_tags.setdefault(chart, {})[tag_key] = reference
    lock.write()

    out = tmp_path / "out"
    summary = render(f"{stack}-locked", out, stack_path=stack_path, picture=False, sources=chart_sources)
    assert all(c.objects for c in summary.charts), summary.charts
    images, operands = [], []
    for manifest in sorted((out / "manifests").rglob("*.yaml")):
        for document in yaml_io.load_all(manifest.read_text()):
            images += [(manifest.name, image) for image in _container_images(document, [])]
            if isinstance(document, dict) and document.get("kind") == "ClusterPolicy":
                operands += [(name, spec) for name, spec in document["spec"].items()
                             if isinstance(spec, dict) and "repository" in spec and spec.get("enabled", True) is not False]
    assert images
    assert operands
    by_tag = [
        (where, image) for where, image in images if "@sha256:" not in image
        # The stack's own ECR images are built here and run by their pushed digest; the EKS add-on's
        # come from EKS.
        and not image.startswith("<unknown: repositoryUrl") and "/eks/eks-node-monitoring-agent:" not in image
        # A chart the tests prepare from its module lacks the digest its release sets by default.
        and image not in images_named_by_tag()
    ]
    assert by_tag == []
    # The GPU Operator reads its operands' images from the ClusterPolicy: each by <version>@<digest>.
    assert [(name, spec.get("version")) for name, spec in operands if "@sha256:" not in str(spec.get("version"))] == []


def test_a_built_image_is_built_from_its_locked_base_and_from_the_dockerfiles_tag_without_a_lock():
    from eks_gpu_training.aws.labeler_image import HEALTH_GATE_DIR, LABELER_DIR, dockerfile_base

    base = dockerfile_base(LABELER_DIR)
    assert base == dockerfile_base(HEALTH_GATE_DIR) == "python:3.13-slim"
    config = stack_config("prod")
    builds = run_main(config).of_type("docker-build:index:Image")
    assert len(builds) == 2
    assert all(not image.inputs.get("buildArgs") for image in builds)
    config[f"{PROJECT}:images"] = {"digests": {base: DIGEST}}
    builds = run_main(config).of_type("docker-build:index:Image")
    assert [image.inputs.get("buildArgs") for image in builds] == [{"PYTHON_IMAGE": f"{base}@{DIGEST}"}] * 2


def test_the_stack_program_reads_the_lock_beside_the_stack_files_of_its_project(tmp_path, monkeypatch):
    """As ``pulumi up`` runs it: in the project's folder, with the stack's settings from the CLI."""
    from eks_gpu_training.offline.engine import run_program
    from eks_gpu_training.platform.program import stack_program

    config = stack_config("dev")
    image = config[f"{PROJECT}:scheduling"]["trainingApps"][0]["job"]["image"]
    (tmp_path / "Pulumi.yaml").write_text("name: eks-gpu-training\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    ImageLock(tmp_path / "stacks" / "images.lock", {image: DIGEST}).write()
    monkeypatch.chdir(tmp_path)
    graph = run_program(stack_program, config)
    assert graph.error is None, graph.error
    pulled = {container["image"] for job in graph.of_type("kubernetes:batch/v1:Job")
              for container in job.inputs["spec"]["template"]["spec"]["containers"]}
    assert f"{image}@{DIGEST}" in pulled, pulled
