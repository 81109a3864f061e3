"""Helm releases from a local chart folder or archive (``charts.directory``): found by name and
version, refused with the key path when missing or mislabelled, before anything is registered."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
import yaml

from eks_gpu_training.facts import yaml_io
from eks_gpu_training import ConfigError
from eks_gpu_training.addons import gpu_operator, kueue
from eks_gpu_training.addons.chart_source import chart_problems, local_chart, release_chart
from tests.support.harness import PROJECT_ROOT, run_main, stack_config

PROJECT = "eks-gpu-training"
RELEASE = "kubernetes:helm.sh/v3:Release"


def write_chart(folder: Path, name: str, version: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    return folder


def package(source: Path, archive: Path, name: str) -> Path:
    """What `helm package` writes: the chart under a top folder named after the chart."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=name)
    return archive


def all_stack_charts(directory: Path) -> Path:
    """A folder holding every chart prod installs, at its pinned version (only their Chart.yaml)."""
    for chart, version in [
        ("gpu-operator", "v26.7.0"),
        ("aws-efa-k8s-device-plugin", "v0.5.30"),
        ("kueue", "0.19.2"),
        ("karpenter", "1.14.3"),
        ("karpenter-crd", "1.14.3"),
        ("jobset", "0.12.0"),
        ("kubeflow-trainer", "2.3.0"),
    ]:
        write_chart(directory / f"{chart}-{version}", chart, version)
    return directory


def test_a_chart_folder_or_archive_at_the_pinned_version_is_found(tmp_path):
    folder = write_chart(tmp_path / "kueue-0.19.2", "kueue", "0.19.2")
    assert local_chart(tmp_path, kueue.KUEUE_CHART, "0.19.2") == (folder, "")
    archive = package(write_chart(tmp_path / "src" / "gpu-operator", "gpu-operator", "v26.7.0"),
                      tmp_path / "gpu-operator-v26.7.0.tgz", "gpu-operator")
    assert local_chart(tmp_path, "gpu-operator", "v26.7.0") == (archive, "")
    # `v` before the version is optional in the file name, as helm and upstream tags spell it.
    write_chart(tmp_path / "karpenter-v1.14.1", "karpenter", "1.14.1")
    assert local_chart(tmp_path, "oci://public.ecr.aws/karpenter/karpenter", "1.14.1")[0].name == "karpenter-v1.14.1"


def test_a_chart_whose_chart_yaml_names_another_version_is_refused(tmp_path):
    write_chart(tmp_path / "kueue-0.19.2", "kueue", "0.18.0")
    source, reason = local_chart(tmp_path, kueue.KUEUE_CHART, "0.19.2")
    assert source is None
    assert reason == "kueue-0.19.2's Chart.yaml is kueue 0.18.0, not kueue 0.19.2"


def test_an_archive_without_the_charts_top_folder_is_refused(tmp_path):
    source = write_chart(tmp_path / "src" / "other", "other", "1.0.0")
    package(source, tmp_path / "kueue-0.19.2.tgz", "other")
    assert local_chart(tmp_path, kueue.KUEUE_CHART, "0.19.2") == (None, "kueue-0.19.2.tgz holds no kueue/Chart.yaml")


def test_a_missing_chart_says_which_file_names_would_do(tmp_path):
    assert chart_problems(str(tmp_path), [("gpu-operator", "v26.7.0")], "charts.directory")[0].message == (
        "has no gpu-operator v26.7.0: expected gpu-operator-v26.7.0/ or gpu-operator-v26.7.0.tgz in it"
    )
    missing = str(tmp_path / "absent")
    problems = chart_problems(missing, [("gpu-operator", "v26.7.0"), ("kueue", "0.19.2")], "charts.directory")
    assert [(p.path, p.message) for p in problems] == [
        ("charts.directory", f"'{missing}' is not a folder; give the folder that holds the charts")
    ]


def test_a_release_takes_the_repository_or_the_local_path(tmp_path):
    remote = release_chart("gpu-operator", "v26.7.0", gpu_operator.CHART_REPOSITORY, None, "x")
    assert (remote["chart"], remote["version"], remote["repository_opts"].repo) == (
        "gpu-operator", "v26.7.0", gpu_operator.CHART_REPOSITORY)
    assert release_chart(kueue.KUEUE_CHART, "0.19.2", None, None, "x") == {"chart": kueue.KUEUE_CHART, "version": "0.19.2"}
    folder = write_chart(tmp_path / "kueue-0.19.2", "kueue", "0.19.2")
    # A local path has no repository, and Helm installs the folder as it is (its version was checked).
    assert release_chart(kueue.KUEUE_CHART, "0.19.2", None, str(tmp_path), "x") == {"chart": str(folder)}


def test_the_stack_installs_every_release_from_the_local_folder(tmp_path):
    config = stack_config("prod")
    config[f"{PROJECT}:charts"] = {"directory": str(all_stack_charts(tmp_path))}
    graph = run_main(config)
    assert graph.error is None, repr(graph.error)
    releases = {r.inputs["name"]: r.inputs for r in graph.of_type(RELEASE)}
    assert set(releases) == {"gpu-operator", "aws-efa-k8s-device-plugin", "kueue", "karpenter", "karpenter-crd", "jobset", "kubeflow-trainer"}
    for name, inputs in releases.items():
        assert Path(inputs["chart"]).parent == tmp_path, name
        assert "repositoryOpts" not in inputs, name
        assert "version" not in inputs, name



def test_a_release_takes_its_chart_from_the_mirror_by_name(tmp_path):
    https = release_chart("gpu-operator", "v26.7.0", gpu_operator.CHART_REPOSITORY, None, "x",
                          mirror="https://artifactory.example.com/api/helm/charts")
    assert (https["chart"], https["version"], https["repository_opts"].repo) == (
        "gpu-operator", "v26.7.0", "https://artifactory.example.com/api/helm/charts")
    # An OCI prefix holds each chart at <prefix>/<chart>, whatever registry it comes from upstream.
    assert release_chart(kueue.KUEUE_CHART, "0.19.2", None, None, "x", mirror="oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/charts") == {
        "chart": "oci://123456789012.dkr.ecr.us-west-2.amazonaws.com/charts/kueue", "version": "0.19.2"}
    # The local folder comes first.
    folder = write_chart(tmp_path / "kueue-0.19.2", "kueue", "0.19.2")
    assert release_chart(kueue.KUEUE_CHART, "0.19.2", None, str(tmp_path), "x", mirror="oci://r/charts") == {"chart": str(folder)}


def test_the_stack_installs_every_release_from_its_charts_mirror():
    config = stack_config("prod")
    config[f"{PROJECT}:charts"] = {"mirror": "oci://harbor.example.com/helm-remote/"}
    graph = run_main(config)
    assert graph.error is None
    releases = {r.inputs["name"]: r.inputs for r in graph.of_type(RELEASE)}
    assert {name: inputs["chart"] for name, inputs in releases.items()} == {
        name: f"oci://harbor.example.com/helm-remote/{name}"
        for name in ("gpu-operator", "aws-efa-k8s-device-plugin", "kueue", "karpenter", "karpenter-crd", "jobset", "kubeflow-trainer")}
    assert all("repositoryOpts" not in inputs for inputs in releases.values())


def test_a_charts_mirror_that_is_no_repository_is_refused_with_its_key_before_anything_registers():
    config = stack_config("prod")
    config[f"{PROJECT}:charts"] = {"mirror": "harbor.example.com/helm-remote"}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [(p.path, p.message) for p in graph.error.problems] == [
        ("charts.mirror", "'harbor.example.com/helm-remote' is neither a Helm repository (https://...) nor an OCI prefix (oci://...)")]


def test_a_component_given_a_mirror_that_is_no_repository_refuses_it_with_its_argument():
    with pytest.raises(ConfigError) as refused:
        release_chart("gpu-operator", "v26.7.0", gpu_operator.CHART_REPOSITORY, None, "GpuOperator(op).charts.directory",
                      mirror="artifactory/helm")
    assert [p.path for p in refused.value.problems] == ["GpuOperator(op).charts.mirror"]

def test_a_stack_whose_folder_lacks_a_chart_registers_nothing_and_names_each(tmp_path):
    charts = all_stack_charts(tmp_path)
    (charts / "kueue-0.19.2" / "Chart.yaml").unlink()
    (charts / "kueue-0.19.2").rmdir()
    (charts / "karpenter-1.14.3" / "Chart.yaml").write_text(yaml.safe_dump({"name": "karpenter", "version": "1.13.0"}))
    config = stack_config("prod")
    config[f"{PROJECT}:charts"] = {"directory": str(charts)}
    graph = run_main(config)
    assert isinstance(graph.error, ConfigError)
    assert graph.resources == []
    assert [(p.path, p.message) for p in graph.error.problems] == [
        ("charts.directory", "has no kueue 0.19.2: expected kueue-0.19.2/ or kueue-0.19.2.tgz in it"),
        ("charts.directory", "karpenter-1.14.3's Chart.yaml is karpenter 1.13.0, not karpenter 1.14.3"),
    ]


ECR = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com$")
"""A private ECR registry's host (EKS's own in a region, or the stack's account)."""


def image_registries(manifests: Path) -> set[str]:
    """The registry host of every image reference the rendered objects name: containers' ``image``
    and the ClusterPolicy's ``repository`` fields the GPU Operator pulls its operands from. An ECR
    host reads as ``<account>.dkr.ecr.<region>.amazonaws.com``; references not known offline are
    left out."""
    references: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("image", "repository") and isinstance(item, str):
                    references.add(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in manifests.rglob("*.yaml"):
        for document in yaml_io.load_all(path.read_text()):
            walk(document)
    hosts = {ref.split("/", 1)[0] for ref in references if "/" in ref and not ref.startswith("<")}
    return {"<account>.dkr.ecr.<region>.amazonaws.com" if ECR.match(host) else host for host in hosts if "." in host}


def test_the_docs_say_charts_directory_leaves_every_image_registry_the_nodes_pull_from(rendered_stack):
    # The folder is read where `pulumi up` runs; the nodes still pull what the rendered objects name.
    _, out, _ = rendered_stack
    registries = image_registries(out / "manifests")
    assert "public.ecr.aws" in registries  # the training image; the charts' images when their sources are present
    page = (PROJECT_ROOT / "docs" / "mirrors.md").read_text()
    paragraph = page[page.index("**`charts.directory`**"):].split("\n\n", 1)[0]
    assert "does not make an air-gapped cluster work" in paragraph
    assert {host for host in registries if f"`{host}`" not in paragraph} == set()
