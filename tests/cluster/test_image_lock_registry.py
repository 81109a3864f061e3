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

from chart_mirror import OciChartMirror
from go_tools import DISTRIBUTION

from eks_gpu_training.config.image_lock import ImageLock
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.processes import free_port
from eks_gpu_training.offline.image_lock import record_digests, resolve_digest


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
