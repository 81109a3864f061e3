"""Every Helm release a stack makes, rendered by Helm's own engine from the pinned chart source, and
what the charts create held to the same checks as the stack's own objects."""

from __future__ import annotations

import copy
import tarfile

import pulumi_kubernetes as k8s
import pytest

from eks_gpu_training.facts import yaml_io
from eks_gpu_training.offline.check import check_render
from eks_gpu_training.offline.check.helm import values_schema_problems
from eks_gpu_training.offline.check.kubernetes import CustomResourceSchemas, check_manifests
from eks_gpu_training.offline.chart_sources import ChartLock, ChartSources, ChartUnavailable
from eks_gpu_training.offline.render import RenderError, write_render
from eks_gpu_training.offline.render.charts import locate_release_chart, render_release
from eks_gpu_training.offline.render.registrations import PlaceholderMocks, to_render
from tests.support.harness import run_program

pytest.importorskip("helm_python", reason="helm-python-sdk (the check extra) renders the charts")

RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


def releases(out):
    return {p.name: yaml_io.load(p.read_text()) for p in sorted((out / "values").glob("*.yaml"))}


def test_every_release_of_a_stack_is_rendered_from_its_pinned_chart_pulled_into_the_cache(rendered_stack, chart_sources):
    stack, out, summary = rendered_stack
    document_releases = releases(out)
    assert document_releases, f"stack {stack} makes no Helm release"
    for filename, release in document_releases.items():
        rendered = release["rendered"]
        assert "skipped" not in rendered, (filename, rendered)
        assert "error" not in rendered, (filename, rendered)
        source = chart_sources.locate(release["chart"], release["version"], release["repository"])
        assert source.parent == chart_sources.cache
        assert rendered["source"] == str(source)
        folder = out / rendered["folder"]
        assert len(list(folder.glob("*.yaml"))) == rendered["objects"] > 0
    assert {c.release for c in summary.charts} == {r["release"] for r in document_releases.values()}


def test_the_gpu_operator_chart_renders_its_cluster_policy_with_the_stacks_values(rendered_stack):
    _, out, _ = rendered_stack
    policy = yaml_io.load((out / "manifests/charts/gpu-operator/clusterpolicy_cluster-policy.yaml").read_text())
    assert policy["spec"]["driver"]["enabled"] is False
    assert policy["spec"]["toolkit"]["enabled"] is False
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in policy["spec"]["daemonsets"]["tolerations"]


def test_a_release_that_skips_crds_renders_none(rendered_stack):
    _, out, _ = rendered_stack
    karpenter = releases(out)["gpu-training-karpenter-release.yaml"]
    assert karpenter["skipCrds"] is True
    kinds = {yaml_io.load(p.read_text())["kind"] for p in (out / karpenter["rendered"]["folder"]).glob("*.yaml")}
    assert "CustomResourceDefinition" not in kinds
    assert "Deployment" in kinds


def _gpu_operator_release(prod_graph):
    for resource in prod_graph.of_type(RELEASE_TYPE):
        if resource.inputs.get("chart") == "gpu-operator":
            inputs = resource.inputs
            return {"release": inputs["name"], "chart": "gpu-operator", "version": inputs["version"],
                    "namespace": inputs["namespace"], "values": copy.deepcopy(inputs["values"])}
    raise AssertionError("prod has no GPU Operator release")


def _cluster_policy_problems(release, sources):
    rendered = render_release(release, *locate_release_chart(release, sources))
    assert not rendered.error, rendered.error
    assert not rendered.skipped, rendered.skipped
    crds = CustomResourceSchemas()
    for _, obj in rendered.objects:
        if obj["kind"] == "CustomResourceDefinition":
            crds.add(obj, "chart")
    policies = [(path, obj) for path, obj in rendered.objects if obj["kind"] == "ClusterPolicy"]
    assert len(policies) == 1
    return [line for outcome, line in check_manifests(policies, "1.34", crds, "") if outcome == "fail"]


def test_a_values_change_that_renders_an_invalid_cluster_policy_fails_its_crd(prod_graph, chart_sources):
    release = _gpu_operator_release(prod_graph)
    assert _cluster_policy_problems(release, chart_sources) == []
    # The chart passes daemonsets.updateStrategy through; the CRD allows RollingUpdate or OnDelete.
    release["values"]["daemonsets"]["updateStrategy"] = "Recreate"
    problems = _cluster_policy_problems(release, chart_sources)
    assert len(problems) == 1
    assert "spec.daemonsets.updateStrategy: 'Recreate' is not one of" in problems[0]


def test_values_breaking_the_nfd_values_schema_fail_through_helm(chart_sources):
    source = chart_sources.locate("gpu-operator", "v26.7.0")
    good = {"node-feature-discovery": {"worker": {"tolerations": []}}}
    assert values_schema_problems(source, good) is None
    problem = values_schema_problems(source, {"node-feature-discovery": {"worker": {"tolerations": "all"}}})
    assert "/worker/tolerations" in problem
    assert "want array" in problem


def test_render_records_a_chart_helm_refuses_and_check_fails_it(tmp_path, chart_sources):
    bad = {"node-feature-discovery": {"worker": {"tolerations": "all"}}}
    graph = run_program(
        lambda: k8s.helm.v3.Release("op", name="gpu-operator", chart="gpu-operator", version="v26.7.0",
                                    namespace="gpu-operator", values=bad),
        {}, preview=True, mocks=PlaceholderMocks("us-west-2"),
    )
    summary = write_render(to_render(graph, stack="t", project="p", region="us-west-2", kubernetes_version="1.34"),
                           tmp_path, picture=False, sources=chart_sources)
    assert "want array" in summary.charts[0].error
    failures = check_render(tmp_path).failures
    assert any("Helm could not render the chart" in f and "want array" in f for f in failures), failures


def _operator_render(values=None):
    graph = run_program(
        lambda: k8s.helm.v3.Release("op", name="gpu-operator", chart="gpu-operator", version="v26.7.0",
                                    namespace="gpu-operator", values=values or {},
                                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo="https://helm.ngc.nvidia.com/nvidia")),
        {}, preview=True, mocks=PlaceholderMocks("us-west-2"),
    )
    return to_render(graph, stack="t", project="p", region="us-west-2", kubernetes_version="1.34")


def test_with_chart_rendering_turned_off_the_charts_are_skipped_and_said_so(tmp_path):
    summary = write_render(_operator_render(), tmp_path, picture=False, sources=None)
    assert summary.charts[0].skipped == "chart rendering was turned off (--no-charts)"
    assert not (tmp_path / "manifests" / "charts").exists()
    report = check_render(tmp_path)
    assert report.ok
    assert any("the chart's objects were not rendered, nor its values checked: chart rendering was turned off" in s
               for s in report.skipped)


def test_a_chart_no_source_supplies_fails_the_render_before_it_writes_anything(tmp_path):
    # A mirror nothing answers on (a closed loopback port) and an empty cache.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    sources = ChartSources(cache=tmp_path / "cache", mirror=f"http://127.0.0.1:{closed}")
    with pytest.raises(RenderError) as refused:
        write_render(_operator_render(), tmp_path / "out", picture=False, sources=sources)
    message = str(refused.value)
    assert "1 chart(s) unavailable" in message
    assert f"chart gpu-operator v26.7.0: not in the cache ({tmp_path / 'cache'}), and the mirror http://127.0.0.1:{closed} could not supply it" in message
    assert "supply it with charts.directory" in message
    assert not (tmp_path / "out").exists()


def test_the_stacks_charts_mirror_is_where_the_render_pulls_every_chart(charts_mirror, tmp_path, monkeypatch):
    """No mirror set for the run and an empty cache: the stack's own ``charts.mirror`` supplies
    every chart, the add-on's too, as its releases name it for ``pulumi up``."""
    from tests.support.chart_mirror import render_with_stack_mirror

    sources, summary = render_with_stack_mirror(charts_mirror.url, tmp_path, monkeypatch)
    assert sorted(sources.pulled) == sorted(
        f"{c.source.name.removesuffix('.tgz').rsplit('-', 1)[0]} {c.version} from the mirror {charts_mirror.url}"
        for c in summary.charts)


def test_a_version_the_mirror_lacks_is_unavailable_naming_the_chart(chart_sources, tmp_path):
    sources = ChartSources(cache=tmp_path, mirror=chart_sources.mirror)
    with pytest.raises(ChartUnavailable) as refused:
        sources.locate("gpu-operator", "v99.0.0", "https://helm.ngc.nvidia.com/nvidia")
    assert str(refused.value).startswith(f"chart gpu-operator v99.0.0: not in the cache ({tmp_path}), and the mirror ")


def test_a_pull_whose_digest_differs_from_the_lock_is_refused_and_lock_records_one(chart_sources, tmp_path):
    import helm_python

    lock = ChartLock(tmp_path / "charts.lock", {"kueue-0.19.2": "sha256:" + "0" * 64})
    sources = ChartSources(cache=tmp_path / "cache", mirror=chart_sources.mirror, lock=lock)
    with pytest.raises(ChartUnavailable) as refused:
        sources.locate("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")
    assert str(refused.value).startswith(f"chart kueue 0.19.2: the mirror {chart_sources.mirror} holds sha256:")
    assert f"not the sha256:{'0' * 64} {lock.path} records; refused" in str(refused.value)
    assert not (tmp_path / "cache" / "kueue-0.19.2.tgz").exists()
    recording = ChartSources(cache=tmp_path / "cache", mirror=chart_sources.mirror, lock=ChartLock(lock.path), record=True)
    archive = recording.locate("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")
    # Helm's own digest of the archive, which chart_sources.archive_digest computes without the library.
    assert ChartLock.read(lock.path).digests == {"kueue-0.19.2": helm_python.digest(archive)}
    # Recorded, the same bytes pass.
    assert ChartSources(cache=tmp_path / "cache", lock=ChartLock.read(lock.path)).locate(
        "oci://registry.k8s.io/kueue/charts/kueue", "0.19.2") == archive


def test_an_eks_add_on_that_installs_a_chart_is_rendered_like_a_release(tmp_path, chart_sources):
    import json

    import pulumi_aws as aws

    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    graph = run_program(
        lambda: aws.eks.Addon(
            "monitoring", cluster_name="c", addon_name="eks-node-monitoring-agent", addon_version="v1.7.0-eksbuild.1",
            configuration_values=json.dumps({"dcgmAgent": {"tolerations": [toleration]}}),
        ),
        {}, preview=True, mocks=PlaceholderMocks("us-west-2"),
    )
    summary = write_render(to_render(graph, stack="t", project="p", region="us-west-2", kubernetes_version="1.34"),
                           tmp_path, picture=False, sources=chart_sources)
    (chart,) = summary.charts
    assert (chart.release, chart.version, chart.source.name) == ("eks-node-monitoring-agent", "1.7.0", "eks-node-monitoring-agent-1.7.0.tgz")
    daemonsets = {obj["metadata"]["name"]: obj for _, obj in chart.objects if obj["kind"] == "DaemonSet"}
    assert all(d["metadata"]["namespace"] == "kube-system" for d in daemonsets.values())
    assert any(toleration in d["spec"]["template"]["spec"].get("tolerations", []) for d in daemonsets.values())
    report = check_render(tmp_path)
    assert report.ok, report.failures
    assert report.checked["chart objects"] == len(chart.objects)


def test_an_add_on_whose_version_eks_resolves_at_deployment_renders_the_checked_chart(tmp_path, chart_sources):
    import pulumi_aws as aws

    graph = run_program(
        lambda: aws.eks.Addon("monitoring", cluster_name="c", addon_name="eks-node-monitoring-agent",
                              addon_version=aws.eks.get_addon_version_output(addon_name="eks-node-monitoring-agent",
                                                                             kubernetes_version="1.34").version),
        {}, preview=True, mocks=PlaceholderMocks("us-west-2"),
    )
    summary = write_render(to_render(graph, stack="t", project="p", region="us-west-2", kubernetes_version="1.34"),
                           tmp_path, picture=False, sources=chart_sources)
    (chart,) = summary.charts
    assert chart.version == "1.7.0"
    assert not chart.skipped
    assert chart.objects
    (values,) = releases(tmp_path).values()
    assert values["versionNote"].startswith("resolved by EKS at deployment")


def test_releases_installed_from_a_local_chart_folder_render_from_it(tmp_path, reference_dir):
    from eks_gpu_training.offline.engine import run_main, stack_config

    charts = tmp_path / "charts"
    charts.mkdir()
    folder = charts / "kueue-0.19.2"
    folder.symlink_to(reference_dir / "charts" / "kueue-0.19.2", target_is_directory=True)
    archive = charts / "gpu-operator-v26.7.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(reference_dir / "charts" / "gpu-operator-v26.7.0", arcname="gpu-operator")
    for name in ("aws-efa-k8s-device-plugin-v0.5.30", "eks-node-monitoring-agent-1.7.0"):
        (charts / name).symlink_to(reference_dir / "charts" / name, target_is_directory=True)
    # JobSet's, Trainer's and Karpenter's, as their releases publish them (helm package of the
    # chart in their Go modules)
    from tests.support.module_charts import package_module_charts, proxy_or_skip

    with proxy_or_skip():
        jobset, trainer, karpenter_crd, karpenter = package_module_charts(charts)
    config = stack_config("prod")
    config["eks-gpu-training:charts"] = {"directory": str(charts)}
    graph = run_main(config, preview=True, mocks=PlaceholderMocks("us-west-2"))
    assert graph.error is None, repr(graph.error)
    rendered = tmp_path / "out"
    # No mirror, an empty cache and no network: every chart comes from the stack's own folder, the
    # node monitoring agent's (an EKS add-on, which no release installs from there) by its name.
    result = to_render(graph, stack="prod", project="eks-gpu-training", region="us-west-2", kubernetes_version="1.35")
    result.charts_directory = str(charts)
    summary = write_render(result, rendered, picture=False, sources=ChartSources(cache=tmp_path / "empty-cache"))
    sources = {chart.release: chart.source for chart in summary.charts if chart.source is not None}
    assert sources["kueue"] == folder
    assert sources["gpu-operator"] == archive
    assert sources["eks-node-monitoring-agent"] == charts / "eks-node-monitoring-agent-1.7.0"
    assert (sources["jobset"], sources["kubeflow-trainer"]) == (jobset, trainer)
    assert (sources["karpenter-crd"], sources["karpenter"]) == (karpenter_crd, karpenter)
    assert set(sources) == {"gpu-operator", "aws-efa-k8s-device-plugin", "kueue", "karpenter", "karpenter-crd",
                            "eks-node-monitoring-agent", "jobset", "kubeflow-trainer"}
    assert not (tmp_path / "empty-cache").exists()
    assert all(not chart.error for chart in summary.charts)
    assert any(obj["kind"] == "ClusterPolicy" for chart in summary.charts if chart.release == "gpu-operator"
               for _, obj in chart.objects)
