"""Binaries a user already has (``--bin-dir``, ``$EKS_GPU_TRAINING_BIN_DIR``): taken into the
cache when each reports the pinned version, refused by name when one reports another. The
binaries are the real ones this tier built, asked for their version as a user's would be."""

from __future__ import annotations

import shutil

import pytest

from eks_gpu_training.local import build as builds


@pytest.fixture(scope="module")
def user_bin_dir(tmp_path_factory):
    """A folder as kwokctl or envtest leaves one: kube-apiserver, kube-controller-manager,
    kube-scheduler and etcd, side by side."""
    folder = tmp_path_factory.mktemp("user-bin")
    for component in (builds.KUBERNETES, builds.ETCD):
        built = builds.build(component, log=print)
        for binary in component.binaries:
            shutil.copy2(built / binary, folder / binary)
    return folder


def test_binaries_at_the_pinned_versions_are_taken_into_the_cache_without_building(user_bin_dir, tmp_path):
    said = []
    for component in (builds.KUBERNETES, builds.ETCD):
        assert builds.adopt(component, user_bin_dir, root=tmp_path, log=said.append)
        assert builds.is_built(component, tmp_path)
        for binary in component.binaries:
            assert builds.reported_version(builds.bin_dir(component, tmp_path) / binary, component).lstrip("v") == component.stamp.lstrip("v")
    assert f"kubernetes {builds.KUBERNETES.stamp}: kube-apiserver, kube-controller-manager, kube-scheduler taken from {user_bin_dir}" in said
    assert not (tmp_path / "src").exists()  # nothing was built


def test_a_binary_at_another_version_is_refused_naming_it(user_bin_dir, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    # kube-apiserver under etcd's name: a real binary whose version is not etcd's pin.
    shutil.copy2(user_bin_dir / "kube-apiserver", wrong / "etcd")
    with pytest.raises(builds.BuildError) as refused:
        builds.adopt(builds.ETCD, wrong, root=tmp_path / "cache")
    assert str(refused.value).startswith(f"{wrong / 'etcd'} is etcd (no version reported), not the pinned {builds.ETCD.stamp}")
    assert not builds.is_built(builds.ETCD, tmp_path / "cache")


def test_a_folder_without_a_components_binaries_or_with_only_some_leaves_it_to_the_build(user_bin_dir, tmp_path):
    said = []
    assert not builds.adopt(builds.KWOK, user_bin_dir, root=tmp_path, log=said.append)
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy2(user_bin_dir / "kube-apiserver", partial / "kube-apiserver")
    assert not builds.adopt(builds.KUBERNETES, partial, root=tmp_path, log=said.append)
    assert said == [f"kubernetes: building it; {partial} lacks kube-controller-manager, kube-scheduler"]
