"""The engine tests' tools, and the OCI registry the cluster tier pulls charts from, as build.py
describes them: pins read from the wrappers, the names the binaries get, and the one folder
``eks-gpu-training-local tools`` prints. No Go is run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from eks_gpu_training.local import build as builds


def test_the_cli_is_pinned_to_pkg_and_sdk_at_one_version():
    go_mod = builds.PULUMI.wrapper / "go.mod"
    assert builds.PULUMI.version == "v3.274.0"
    assert builds.required_version(go_mod, "github.com/pulumi/pulumi/sdk/v3") == builds.PULUMI.version


def test_the_cli_wrapper_repeats_the_clipboard_replace_of_pkg():
    text = (builds.PULUMI.wrapper / "go.mod").read_text()
    assert "replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e" in text


def test_the_provider_is_pinned_to_the_v4_25_0_release_commit_and_stamped_with_that_release():
    assert builds.PULUMI_KUBERNETES.version == "v4.0.0-20260115033456-f47bc2d6f199"
    assert builds.PULUMI_KUBERNETES.stamp == "4.25.0"
    assert builds.PULUMI.stamp == builds.PULUMI.version


def test_the_provider_build_generates_its_embedded_schema_first():
    assert builds.PULUMI_KUBERNETES.generate == ("cmd/pulumi-resource-kubernetes",)


def test_go_build_names_the_tools_after_their_binaries():
    for component in builds.TOOLS:
        assert builds._built_names(component) == {name: name for name in component.binaries}


def test_tools_folder_links_every_built_tool(tmp_path):
    for component in builds.TOOLS:
        folder = builds.bin_dir(component, tmp_path)
        folder.mkdir(parents=True)
        for binary in component.binaries:
            (folder / binary).write_text("#!/bin/sh\n")
        for data in component.data:  # built, so nothing is built or downloaded here
            (folder / Path(data).name).write_text("")
    folder = builds.tools_dir(root=tmp_path, log=lambda line: None)
    assert folder == tmp_path / "tools" / "bin"
    assert sorted(path.name for path in folder.iterdir()) == [
        "pulumi", "pulumi-language-python", "pulumi-resource-kubernetes"]
    # The language host runs the exec script it finds beside its own (resolved) binary.
    host = (folder / "pulumi-language-python").resolve()
    assert (host.parent / "pulumi-language-python-exec").is_file()
    assert (folder / "pulumi").resolve() == builds.bin_dir(builds.PULUMI, tmp_path) / "pulumi"


def test_the_oci_registry_is_distribution_v3_1_2_catalogued_beside_the_tests_that_run_it(tmp_path):
    from tests.support.go_tools import CATALOGUE, DISTRIBUTION

    assert DISTRIBUTION.wrapper == CATALOGUE.parent / "distribution"
    assert DISTRIBUTION.version == "v3.1.2"
    assert DISTRIBUTION.version_variable == "github.com/distribution/distribution/v3/version.version"
    assert builds._built_names(DISTRIBUTION) == {"registry": "registry"}
    # The cache key is the component's name and version, wherever its wrapper is.
    assert builds.bin_dir(DISTRIBUTION, tmp_path) == tmp_path / "bin" / "distribution-v3.1.2"
    assert "distribution" not in {c.name for group in builds.GROUPS.values() for c in group}


def test_the_benchmark_peers_are_kwokctl_and_kubectl_at_the_control_planes_pins_and_never_the_packages():
    catalogue = Path(__file__).parents[2] / "benchmarks" / "go" / "catalogue.json"
    kwokctl, kubectl = builds.load_catalogue(catalogue)["peers"]
    # kwokctl starts the control plane's own binaries, so it is compared at their versions.
    assert (kwokctl.module, kwokctl.version) == (builds.KWOK.module, builds.KWOK.version)
    assert (kubectl.module, kubectl.version) == (builds.KUBERNETES.module, builds.KUBERNETES.version)
    for peer in (kwokctl, kubectl):
        assert peer.wrapper == catalogue.parent / peer.name
        assert f"{peer.module} {peer.version} h1:" in (peer.wrapper / "go.sum").read_text()
        assert not list(peer.wrapper.glob("*.go")), "wrappers hold no Go source"
    assert {"kwokctl", "kubectl"}.isdisjoint(c.name for group in builds.GROUPS.values() for c in group)


def test_a_catalogue_names_only_fields_a_component_has(tmp_path):
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text('{"groups": {"g": [{"name": "x", "module": "m", "binaries": {}, "verison": "v1"}]}}')
    with pytest.raises(builds.BuildError) as refused:
        builds.load_catalogue(catalogue)
    assert refused.value.what == f"{catalogue}: x has no field verison"


def test_the_builder_refuses_a_group_its_catalogue_lacks_naming_those_it_has(capsys):
    from tests.support.go_tools import CATALOGUE

    assert builds.main(["--catalogue", str(CATALOGUE), "control-plane"]) == 1
    assert capsys.readouterr().err == f"build failed: no group control-plane in {CATALOGUE} — name one of test-tools\n"


def test_a_binaries_folder_comes_from_the_flag_else_the_environment(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(builds.PREBUILT_ENV, raising=False)
    assert builds.prebuilt_dir() is None
    monkeypatch.setenv(builds.PREBUILT_ENV, str(tmp_path))
    assert builds.prebuilt_dir() == tmp_path
    assert builds.prebuilt_dir(tmp_path / "given") == tmp_path / "given"
    assert builds.main(["control-plane", "--bin-dir", str(tmp_path / "absent")]) == 2
    assert f"the binaries folder {tmp_path / 'absent'} is not a folder" in capsys.readouterr().err


def test_only_binaries_that_report_a_version_can_be_taken_from_a_folder():
    assert {c.name for c in (*builds.CONTROL_PLANE, *builds.TOOLS) if c.reports_version} == {"etcd", "kubernetes", "kwok", "pulumi"}
