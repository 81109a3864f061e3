"""``images.lock`` against a real OCI registry: images pushed with the ``oras`` client to the CNCF
Distribution registry on loopback (built from its Go module, as for the chart mirror tests), then
resolved to the digests the registry serves, a tag moved to another image refused naming it, and a
registry that is not there failing with one line.

Here, not in the unit tier, because the registry is a Go binary; like the rest of this tier, a
machine that can neither find nor build it fails, and says why."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.support.chart_mirror import OciChartMirror
from tests.support.go_tools import DISTRIBUTION

from eks_gpu_training.config.image_lock import ImageLock
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.processes import free_port
from eks_gpu_training.offline.lock_images import record_digests, resolve_digest


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The registry on 127.0.0.1, stopped by its pid however the tests end."""
    try:
        binary = builds.build(DISTRIBUTION, log=print) / "registry"
    except builds.BuildError as error:
        pytest.fail(f"the image lock tests cannot run: {error}", pytrace=False)
    server = OciChartMirror(binary, tmp_path_factory.mktemp("image-registry"))
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        server.stop()


def push_image(host: str, name: str, tag: str, content: bytes, folder) -> str:
    """Push a one-layer image (an OCI config blob and a layer) as ``<host>/<name>:<tag>`` with oras;
    the digest of the manifest pushed."""
    import oras.oci
    import oras.provider

    client = oras.provider.Registry(hostname=host, insecure=True)
    container = client.get_container(f"{host}/{name}:{tag}")
    layer_path, config_path = folder / f"{tag}-layer", folder / f"{tag}-config.json"
    layer_path.write_bytes(content)
    config_path.write_text(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}))
    layer = oras.oci.NewLayer(str(layer_path), "application/vnd.oci.image.layer.v1.tar", is_dir=False)
    config = oras.oci.NewLayer(str(config_path), "application/vnd.oci.image.config.v1+json", is_dir=False)
    for path, descriptor in ((layer_path, layer), (config_path, config)):
        client.upload_blob(str(path), container, descriptor).raise_for_status()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config, "layers": [layer], "annotations": {}}
    response = client.upload_manifest(manifest, container)
    response.raise_for_status()
    return response.headers["Docker-Content-Digest"]


def test_the_lock_records_the_digest_the_registry_serves_for_each_tag(registry, tmp_path):
    pushed = push_image(registry, "team/train", "1.0", b"weights v1", tmp_path)
    assert resolve_digest(f"{registry}/team/train:1.0") == pushed
    lock = ImageLock(tmp_path / "images.lock")
    wanted = [("training job train", f"{registry}/team/train:1.0")]
    assert record_digests(wanted, {}, lock, {}) == []
    assert json.loads(lock.path.read_text())["images"] == {f"{registry}/team/train:1.0": pushed}
    assert pushed == "sha256:" + hashlib.sha256(
        resolve_manifest_bytes(registry, "team/train", "1.0")).hexdigest()


def resolve_manifest_bytes(host: str, name: str, tag: str) -> bytes:
    import requests

    response = requests.get(f"http://{host}/v2/{name}/manifests/{tag}", timeout=10,
                            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    response.raise_for_status()
    return response.content


def test_a_tag_moved_to_another_image_is_refused_naming_the_image(registry, tmp_path):
    reference = f"{registry}/team/eval:2.0"
    first = push_image(registry, "team/eval", "2.0", b"eval v1", tmp_path)
    lock = ImageLock(tmp_path / "images.lock")
    assert record_digests([("training job eval", reference)], {}, lock, {}) == []
    moved = push_image(registry, "team/eval", "2.0", b"eval rebuilt", tmp_path)
    assert moved != first
    written = lock.path.read_text()
    for check in (True, False):
        (problem,) = record_digests([("training job eval", reference)], {}, ImageLock.read(lock.path), {}, check=check)
        assert problem == (f"training job eval: {reference} is now {moved}, not the {first} images.lock records; "
                           "refused (run with --update to lock the new image on purpose)")
    assert lock.path.read_text() == written
    assert record_digests([("training job eval", reference)], {}, ImageLock.read(lock.path), {}, update=True) == []
    assert ImageLock.read(lock.path).digests == {reference: moved}


def test_an_image_from_a_mirror_is_resolved_there(registry, tmp_path):
    pushed = push_image(registry, "nvcr/nvidia/k8s/dcgm", "4.6.0", b"dcgm", tmp_path)
    assert resolve_digest("nvcr.io/nvidia/k8s/dcgm:4.6.0", {"nvcr.io": f"{registry}/nvcr"}) == pushed


def test_an_unreachable_registry_fails_with_one_line_naming_the_image(tmp_path):
    reference = f"127.0.0.1:{free_port()}/team/train:1.0"
    lock = ImageLock(tmp_path / "images.lock")
    (problem,) = record_digests([("training job train", reference)], {}, lock, {})
    assert problem.startswith(f"training job train: {reference}: 127.0.0.1:")
    assert "is unreachable (ConnectionError)" in problem
    assert not lock.path.exists()


MIRRORED_REGISTRIES = ("public.ecr.aws", "nvcr.io", "registry.k8s.io", "docker.io", "ghcr.io",
                       "602401143452.dkr.ecr.us-west-2.amazonaws.com", "444455556666.dkr.ecr.us-west-2.amazonaws.com")
"""Every registry the shipped stacks name, each mirrored into the loopback registry."""


def _mirrored_stack(tmp_path, stack, host):
    """A project folder holding ``stack``'s file with every registry mirrored to ``host``."""
    import yaml
    from tests.support.harness import stack_config

    config = stack_config(stack)
    config["eks-gpu-training:images"] = {"registryMirrors": {r: f"{host}/{r.split('.')[0]}" for r in MIRRORED_REGISTRIES}}
    (tmp_path / "Pulumi.yaml").write_text("name: eks-gpu-training\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir(exist_ok=True)
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def test_the_command_locks_every_image_of_a_stack_through_its_mirror_and_refuses_a_moved_tag(registry, tmp_path, capsys, chart_sources):
    from eks_gpu_training.facts.images import mirrored
    from eks_gpu_training.offline.lock_images import _unlocked_args, chart_references, main, stack_references
    from eks_gpu_training.platform.stack_files import locate_stack

    path = _mirrored_stack(tmp_path, "prod", registry)
    args = _unlocked_args(locate_stack(path))
    references = {reference for _, reference in stack_references(args)}
    references |= {reference for _, _, reference, _ in chart_references(args, chart_sources)}
    assert "python:3.13-slim" in references
    assert "nvcr.io/nvidia/gpu-operator:v26.7.0" in references
    pushed = {}
    for number, reference in enumerate(sorted(references)):
        name, _, tag = mirrored(reference, args.images.registry_mirrors).partition("/")[2].rpartition(":")
        pushed[reference] = push_image(registry, name, tag, f"image {number}".encode(), tmp_path)

    assert main([str(path)]) == 0, capsys.readouterr().err
    lock = ImageLock.read(path.parent / "images.lock")
    assert lock.digests == pushed
    assert lock.chart_tags["gpu-operator-v26.7.0"]["operator.version"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert main([str(path), "--check"]) == 0

    moved = "nvcr.io/nvidia/gpu-operator:v26.7.0"
    name, _, tag = mirrored(moved, args.images.registry_mirrors).partition("/")[2].rpartition(":")
    now = push_image(registry, name, tag, b"another operator", tmp_path)
    capsys.readouterr()
    assert main([str(path), "--check"]) == 1
    errors = capsys.readouterr().err.splitlines()
    # Each object that names the image is named (the GPU Operator runs its validator from the same image).
    assert errors == [f"lock-images failed: Helm release gpu-operator: operator.repository, Helm release gpu-operator: "
                      f"validator.repository: {moved} is now {now}, not the {pushed[moved]} images.lock records; refused "
                      "(run with --update to lock the new image on purpose)"]
    assert main([str(path)]) == 1
    assert ImageLock.read(path.parent / "images.lock").digests == pushed


def test_the_command_fails_cleanly_when_the_mirror_is_unreachable(tmp_path, capsys, chart_sources):
    from eks_gpu_training.offline.lock_images import main

    path = _mirrored_stack(tmp_path, "dev", f"127.0.0.1:{free_port()}")
    assert main([str(path)]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert errors
    assert all(line.startswith("lock-images failed: ") and "is unreachable (ConnectionError)" in line for line in errors)
    assert "Traceback" not in "\n".join(errors)
    assert not (path.parent / "images.lock").exists()
