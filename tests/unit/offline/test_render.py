"""The offline render: the real program under the mock engine, written out as files and a picture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
import xml.etree.ElementTree as ElementTree

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
import yaml

from eks_gpu_training.offline.render import GRAPH_DOT, GRAPH_MERMAID, GRAPH_PNG, GRAPH_SVG, readme
from eks_gpu_training.offline.render.__main__ import main as render_main
from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.offline.render.picture import build_tree, node_id, source_hash, to_dot, to_mermaid
from tests.support.harness import PROJECT_ROOT, run_stack, stack_file
from eks_gpu_training.platform.stack_files import stack_file_name

RESOURCE_KEYS = {"type", "name", "urn", "parent", "provider", "dependencies", "custom", "remote", "id", "protect", "ignoreChanges", "inputs"}


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory, monkeypatch):
    """The render command caches chart renders under $XDG_CACHE_HOME; the tests keep theirs apart."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))


def resources(out):
    return json.loads((out / "resources.json").read_text())


def one(document, type_, name=None):
    found = [r for r in document["resources"] if r["type"] == type_ and (name is None or r["name"] == name)]
    assert len(found) == 1, [r["name"] for r in found]
    return found[0]


def test_render_lists_every_resource_the_program_registers_with_its_wiring(rendered_stack):
    stack, out, _ = rendered_stack
    document = resources(out)
    graph = run_stack(stack)
    assert sorted((r["type"], r["name"]) for r in document["resources"]) == sorted(
        (r.type, r.name) for r in graph.resources
    )
    urns = {r["urn"] for r in document["resources"]}
    for resource in document["resources"]:
        assert set(resource) == RESOURCE_KEYS
        assert resource["parent"] is None or resource["parent"] in urns
        assert set(resource["dependencies"]) <= urns
    assert document["stack"] == stack
    assert document["kubernetesVersion"] == "1.35"


def test_render_lists_parents_before_children(rendered_stack):
    _, out, _ = rendered_stack
    seen = set()
    for resource in resources(out)["resources"]:
        assert resource["parent"] is None or resource["parent"] in seen
        seen.add(resource["urn"])


def test_values_known_only_after_deployment_are_marked_with_their_source(rendered_stack):
    stack, out, _ = rendered_stack
    document = resources(out)
    pool = {"prod": "p5-training", "dev": "dev-gpu"}[stack]
    node_group = one(document, "aws:eks/nodeGroup:NodeGroup", f"gpu-training-{pool}-node-group")
    assert node_group["inputs"]["nodeRoleArn"] == (
        f"<unknown: arn of aws:iam/role:Role gpu-training-{pool}-node-role>"
    )
    assert node_group["inputs"]["launchTemplate"] == {
        "id": f"<unknown: id of aws:ec2/launchTemplate:LaunchTemplate gpu-training-{pool}-launch-template>",
        "version": f"<unknown: output of aws:ec2/launchTemplate:LaunchTemplate gpu-training-{pool}-launch-template>",
    }
    provider = one(document, "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "<unknown: kubeconfigJson of eks:index:Cluster gpu-training-cluster-eks>"
    assert document["exports"]["kubeconfig"] == "<secret>"
    # No invented value that could pass for a real one (the test harness's fake account ID).
    assert "123456789012" not in (out / "resources.json").read_text()


def test_render_writes_whole_numbers_as_integers(rendered_stack):
    _, out, _ = rendered_stack
    system = one(resources(out), "aws:eks/nodeGroup:NodeGroup", "gpu-training-cluster-system")
    assert all(type(v) is int for v in system["inputs"]["scalingConfig"].values())


def test_every_kubernetes_object_becomes_one_manifest_and_every_release_one_values_file(render_program):
    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        opts = pulumi.ResourceOptions(provider=provider)
        namespace = k8s.core.v1.Namespace("ns", metadata={"name": "training"}, opts=opts)
        k8s.apps.v1.DaemonSet(
            "labeler",
            metadata={"name": "labeler", "namespace": namespace.metadata["name"]},
            spec={
                "selector": {"matchLabels": {"app": "labeler"}},
                "template": {
                    "metadata": {"labels": {"app": "labeler"}},
                    "spec": {"containers": [{"name": "labeler", "image": "labeler:1"}]},
                },
            },
            opts=opts,
        )
        k8s.core.v1.ConfigMap("unnamed", data={"a": "b"}, opts=opts)
        k8s.apps.v1.DaemonSetPatch("patch", metadata={"name": "aws-node", "namespace": "kube-system"}, opts=opts)
        k8s.apiextensions.CustomResource(
            "pool", api_version="karpenter.sh/v1", kind="NodePool", metadata={"name": "gpu"}, spec={"weight": 10}, opts=opts
        )
        k8s.helm.v3.Release(
            "operator",
            name="gpu-operator",
            chart="gpu-operator",
            version="v26.7.0",
            namespace="gpu-operator",
            repository_opts={"repo": "https://helm.ngc.nvidia.com/nvidia"},
            values={"driver": {"enabled": False}},
            opts=opts,
        )

    out = render_program(program)
    assert sorted(p.name for p in (out / "manifests").iterdir() if p.is_file()) == [
        "configmap_unnamed.yaml",
        "daemonset_training_labeler.yaml",
        "namespace_training.yaml",
        "nodepool_gpu.yaml",
    ]
    daemonset = yaml.safe_load((out / "manifests" / "daemonset_training_labeler.yaml").read_text())
    assert list(daemonset)[:3] == ["apiVersion", "kind", "metadata"]
    assert daemonset["metadata"] == {"name": "labeler", "namespace": "training"}
    assert daemonset["spec"]["template"]["spec"]["containers"] == [{"name": "labeler", "image": "labeler:1"}]
    unnamed = yaml.safe_load((out / "manifests" / "configmap_unnamed.yaml").read_text())
    assert unnamed["metadata"]["name"] == "<unknown: auto-name unnamed-xxxxxxxx>"
    assert yaml.safe_load((out / "manifests" / "nodepool_gpu.yaml").read_text()) == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"weight": 10},
    }
    assert [p.name for p in (out / "patches").iterdir()] == ["daemonset_kube-system_aws-node.yaml"]
    release = yaml.safe_load((out / "values" / "operator.yaml").read_text())
    # Which chart rendered it: the archive pulled into the chart cache.
    rendered = release.pop("rendered")
    assert Path(rendered["source"]).name == "gpu-operator-v26.7.0.tgz", rendered
    assert release == {
        "release": "gpu-operator",
        "namespace": "gpu-operator",
        "chart": "gpu-operator",
        "repository": "https://helm.ngc.nvidia.com/nvidia",
        "version": "v26.7.0",
        "values": {"driver": {"enabled": False}},
        "skipCrds": False,
        "resource": {"type": "kubernetes:helm.sh/v3:Release", "name": "operator"},
    }


def test_render_replaces_files_of_objects_that_no_longer_exist(render_program):
    out = render_program(lambda: k8s.core.v1.Namespace("ns", metadata={"name": "a"}))
    (out / "manifests" / "namespace_gone.yaml").write_text("stale")
    render_program(lambda: k8s.core.v1.Namespace("ns", metadata={"name": "a"}))
    assert [p.name for p in (out / "manifests").iterdir()] == ["namespace_a.yaml"]


def test_secrets_are_not_written_out(render_program):
    out = render_program(
        lambda: k8s.core.v1.Secret("token", metadata={"name": "token"}, string_data={"token": pulumi.Output.secret("s3cr3t")})
    )
    assert "s3cr3t" not in "".join(p.read_text() for p in out.rglob("*") if p.is_file() and p.suffix != ".png")
    secret = yaml.safe_load((out / "manifests" / "secret_token.yaml").read_text())
    assert secret["stringData"] == "<secret>"


def test_render_is_the_same_on_every_run():
    first, second = render_stack("prod"), render_stack("prod")
    assert to_dot(first) == to_dot(second)
    assert to_mermaid(first) == to_mermaid(second)
    assert [r.as_json() for r in first.resources] == [r.as_json() for r in second.resources]


def _require_picture(summary):
    if summary.picture_error:
        if os.environ.get("CI"):
            pytest.fail(f"CI must lay out the picture: {summary.picture_error}")
        pytest.skip(summary.picture_error)


def _dot_clusters(dot_source):
    """(cluster title, enclosing cluster title) and (node ID, enclosing cluster title) from DOT text."""
    stack, clusters, nodes = [None], {}, {}
    for line in dot_source.splitlines():
        line = line.strip()
        opened = re.match(r'^subgraph "(cluster_[^"]+)" \{$', line)
        if opened:
            clusters[opened.group(1)] = stack[-1]
            stack.append(opened.group(1))
        elif line == "}":
            stack.pop()
        else:
            node = re.match(r'^"([^"]+)" \[label=', line)
            if node:
                nodes[node.group(1)] = stack[-1]
    return clusters, nodes


def test_picture_shows_every_component_as_a_box_around_its_children(rendered_stack):
    stack, out, summary = rendered_stack
    _require_picture(summary)
    result = summary.render
    assert (out / GRAPH_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = ElementTree.parse(out / GRAPH_SVG)  # noqa: S314 - the picture Graphviz just drew here
    titles: dict[str, set[str]] = {"node": set(), "cluster": set()}
    for group in svg.iter("{http://www.w3.org/2000/svg}g"):
        title = group.find("{http://www.w3.org/2000/svg}title")
        if title is not None:
            titles.setdefault(group.get("class"), set()).add(title.text)

    clusters, nodes = _dot_clusters((out / GRAPH_DOT).read_text())
    by_urn = {r.urn: r for r in result.resources}
    components = [r for r in result.resources if any(c.parent == r.urn for c in result.resources)]
    assert {r.type for r in components} >= {
        "eks-gpu-training:index:GpuTrainingPlatform",
        "eks-gpu-training:index:EksCluster",
        "eks-gpu-training:index:GpuNodeGroup",
    }
    for component in components:
        assert f"cluster_{node_id(component)}" in titles["cluster"], component.name
    for resource in result.resources:
        if resource not in components or resource.custom:
            assert node_id(resource) in titles["node"], resource.name
            box = nodes[node_id(resource)]
        else:
            box = clusters[f"cluster_{node_id(resource)}"]
        # Each resource is drawn inside its parent's box (a custom parent's box holds the parent too).
        parent = by_urn.get(resource.parent)
        if resource in components and resource.custom:
            assert box == f"cluster_{node_id(resource)}"
        elif parent is None:
            assert box is None
        else:
            assert box == f"cluster_{node_id(parent)}", resource.name


def test_picture_draws_each_dependency_as_an_arrow():
    result = render_stack("prod")
    mermaid = to_mermaid(result)
    tree_ids = {}
    for box in _boxes(build_tree(result)):
        tree_ids[box.resource.urn] = f"g{box.index}" if box.is_group and not box.resource.custom else f"n{box.index}"
    arrows = set(re.findall(r"^  (\w+) --> (\w+)$", mermaid, re.M))
    for resource in result.resources:
        for dependency in resource.dependencies:
            assert (tree_ids[dependency], tree_ids[resource.urn]) in arrows, (dependency, resource.name)


def _boxes(boxes):
    for box in boxes:
        yield box
        yield from _boxes(box.children)


def test_mermaid_names_every_resource(rendered_stack):
    _, out, summary = rendered_stack
    mermaid = (out / GRAPH_MERMAID).read_text()
    assert mermaid.startswith("flowchart LR\n")
    for resource in summary.render.resources:
        assert resource.name.split("-")[-1] in mermaid


def test_the_architecture_page_shows_the_current_prod_picture_and_the_readme_embeds_it():
    result = render_stack(readme.STACK)
    assert readme.stale(result) == [], "run `python -m eks_gpu_training.offline.render.readme --write`"
    page = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    assert "](images/prod-stack.svg)" in page
    assert "```mermaid" in page
    text = (PROJECT_ROOT / "README.md").read_text()
    assert "](docs/images/prod-stack.svg)" in text
    assert "```mermaid" not in text


def test_a_golden_picture_is_stale_when_the_graph_changes():
    result = render_stack(readme.STACK)
    result.resources.pop()
    assert source_hash(to_dot(result)) != source_hash(to_dot(render_stack(readme.STACK)))
    assert len(readme.stale(result)) == 2


def test_render_command_writes_the_render_and_says_what(tmp_path, capsys, chart_sources):
    assert render_main(["dev", str(tmp_path), "--no-picture"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1].startswith(f"rendered stack dev into {tmp_path}: ")
    # Each Helm release says which chart source rendered it.
    assert any(line.startswith("chart gpu-operator v") and "objects rendered by Helm from" in line for line in said) or any(
        line.startswith("skipped: chart gpu-operator") for line in said
    )
    assert (tmp_path / "resources.json").is_file()
    assert (tmp_path / GRAPH_MERMAID).is_file()
    assert not (tmp_path / GRAPH_SVG).exists()


def test_render_command_fails_with_the_configuration_problem(tmp_path, capsys):
    broken = tmp_path / stack_file_name("broken")
    config = yaml.safe_load(stack_file("dev", PROJECT_ROOT).read_text())
    config["config"]["eks-gpu-training:gpuNodeGroups"][0]["instanceTypes"] = ["p5.48xl"]
    broken.write_text(yaml.safe_dump(config))
    assert render_main([str(broken), str(tmp_path / "out"), "--no-picture"]) == 1
    assert "did you mean 'p5.48xlarge'?" in capsys.readouterr().err


def test_render_runs_as_a_module_in_a_fresh_process(tmp_path, chart_sources):
    done = subprocess.run(
        [sys.executable, "-m", "eks_gpu_training.offline.render", "prod", str(tmp_path), "--no-picture"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "rendered stack prod" in done.stdout


def test_a_project_of_stack_files_alone_renders_with_the_packages_stack_program(tmp_path):
    """A project beside an installed package: ``Pulumi.yaml`` and its stack files, no
    ``__main__.py``; the render runs the program this project's ``__main__.py`` runs."""
    import shutil

    project = tmp_path / "platform"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    shutil.copy(stack_file("dev", PROJECT_ROOT), project / "stacks" / stack_file_name("dev"))
    alone = render_stack("dev", project_root=project)
    here = render_stack("dev", project_root=PROJECT_ROOT)
    assert [r.urn for r in alone.resources] == [r.urn for r in here.resources]
    assert alone.exports.keys() == here.exports.keys()


def test_placement_group_inputs_reach_the_render_unchanged(render_program):
    out = render_program(lambda: aws.ec2.PlacementGroup("pg", strategy="cluster"))
    placement = one(resources(out), "aws:ec2/placementGroup:PlacementGroup")
    assert placement["inputs"] == {"strategy": "cluster"}
    assert placement["id"] == "<unknown: id of aws:ec2/placementGroup:PlacementGroup pg>"


def test_an_image_pushed_by_the_stack_reads_as_its_repository_at_its_digest(render_program):
    import pulumi_docker_build as docker_build

    def program():
        repository = aws.ecr.Repository("repo")
        image = docker_build.Image("image", push=True, tags=["app:1"], context={"location": "."})
        reference = pulumi.Output.all(repository.repository_url, image.digest).apply(lambda p: f"{p[0]}@{p[1]}")
        k8s.core.v1.Pod("app", metadata={"name": "app"}, spec={"containers": [{"name": "app", "image": reference}]})

    pod = yaml.safe_load((render_program(program) / "manifests" / "pod_app.yaml").read_text())
    assert pod["spec"]["containers"][0]["image"] == (
        "<unknown: repositoryUrl of aws:ecr/repository:Repository repo>@<unknown: digest of docker-build:index:Image image>"
    )


def test_render_shows_every_node_group_setting_sent_to_aws(rendered_stack):
    # Built from aws.eks.NodeGroup directly: no transform applies a setting render cannot see.
    stack, out, _ = rendered_stack
    document = resources(out)
    pool = {"prod": "p5-training", "dev": "dev-gpu"}[stack]
    node_group = one(document, "aws:eks/nodeGroup:NodeGroup", f"gpu-training-{pool}-node-group")
    inputs = node_group["inputs"]
    assert inputs["version"] == "1.35"
    assert inputs["nodeGroupNamePrefix"] == f"{pool}-"
    assert inputs["updateConfig"] == {"maxUnavailable": 1, "updateStrategy": "MINIMAL"}
    assert inputs["nodeRepairConfig"] == {
        "enabled": True,
        "maxUnhealthyNodeThresholdPercentage": 50,
        "maxParallelNodesRepairedCount": 1,
    }
    assert node_group["ignoreChanges"] == ["scalingConfig.desiredSize"]
    assert node_group["protect"] is (stack == "prod")
    assert [r["name"] for r in document["resources"] if r["type"].startswith("eks:index:Managed")] == []
