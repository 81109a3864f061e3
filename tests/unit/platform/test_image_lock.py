"""A stack with ``images.lock``: every locked image deployed by its digest, under its mirror too,
``images.requireDigest`` passing for what the lock holds and refusing what it lacks, naming its key.
(Resolving digests against a real registry: tests/cluster/test_image_lock_registry.py.)"""

from __future__ import annotations

import json

from eks_gpu_training import ConfigError
from eks_gpu_training.config.image_lock import ImageLock, chart_pins, pinned, with_image_lock
from harness import run_main, stack_config

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
