"""The render's cache of chart renders and pictures: a repeated render writes exactly what a fresh
one writes, and anything that could change the output (values, chart source, Helm engine, Graphviz
build, the render's own code) makes it render afresh."""

from __future__ import annotations

import copy
import shutil

import pulumi_kubernetes as k8s
import pytest

from eks_gpu_training.offline.chart_sources import ChartSources
from eks_gpu_training.offline.render import GRAPH_PNG, GRAPH_SVG, RenderCache, write_render
from eks_gpu_training.offline.render import cache as render_cache
from eks_gpu_training.offline.render import charts, picture
from eks_gpu_training.offline.render.__main__ import main as render_main
from eks_gpu_training.offline.render.registrations import PlaceholderMocks, to_render
from tests.support.harness import run_program

pytest.importorskip("helm_python", reason="helm-python-sdk (the check extra) renders the charts")


def files(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def prod_render(prod_graph):
    return to_render(prod_graph, stack="prod", project="eks-gpu-training", region="us-west-2", kubernetes_version="1.34")


@pytest.fixture
def helm_calls(monkeypatch):
    """The releases Helm is asked to render, in order."""
    calls = []
    real = charts.render_release

    def counted(release, source, reason=""):
        calls.append(release["release"])
        return real(release, source, reason)

    monkeypatch.setattr(charts, "render_release", counted)
    return calls


def gpu_operator_release(**values):
    return {"release": "gpu-operator", "chart": "gpu-operator", "version": "v26.7.0", "namespace": "gpu-operator",
            "values": {"driver": {"enabled": False}, **values}}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed, so render draws no picture to cache (.ci/run installs it)")
def test_a_repeated_render_writes_the_same_files_without_helm_or_graphviz(
    prod_render, chart_sources, tmp_path, helm_calls, monkeypatch
):
    cache = RenderCache(tmp_path / "cache")
    write_render(prod_render, tmp_path / "fresh", sources=chart_sources, cache=cache)
    assert len(helm_calls) == 8
    uncached = tmp_path / "uncached"
    write_render(prod_render, uncached, sources=chart_sources, cache=None)
    helm_calls.clear()

    real_popen = picture.subprocess.Popen

    def no_layout(command, *args, **kwargs):
        assert "-Tsvg" not in command, "dot laid out a cached picture"
        return real_popen(command, *args, **kwargs)

    monkeypatch.setattr(picture.subprocess, "Popen", no_layout)
    summary = write_render(prod_render, tmp_path / "repeated", sources=chart_sources, cache=cache)
    assert helm_calls == []
    assert files(tmp_path / "repeated") == files(tmp_path / "fresh") == files(uncached)
    assert (tmp_path / "repeated" / GRAPH_SVG).is_file()
    assert (tmp_path / "repeated" / GRAPH_PNG).is_file()
    assert [len(c.objects) for c in summary.charts] == [len(c.objects) for c in write_render(
        prod_render, tmp_path / "again", sources=chart_sources, cache=None, picture=False).charts]


def test_a_changed_value_renders_that_release_again(chart_sources, tmp_path, helm_calls):
    cache = RenderCache(tmp_path)
    first, _ = render_cache.render_release_cached(gpu_operator_release(), chart_sources, cache)
    again, _ = render_cache.render_release_cached(gpu_operator_release(), chart_sources, cache)
    assert helm_calls == ["gpu-operator"]
    assert again.objects == first.objects
    changed, _ = render_cache.render_release_cached(
        gpu_operator_release(mig={"strategy": "mixed"}), chart_sources, cache
    )
    assert helm_calls == ["gpu-operator", "gpu-operator"]
    policy = next(obj for _, obj in changed.objects if obj["kind"] == "ClusterPolicy")
    assert policy["spec"]["mig"]["strategy"] == "mixed"


def test_the_key_covers_release_name_namespace_crds_and_values_in_any_key_order(chart_sources, tmp_path):
    cache = RenderCache(tmp_path)
    release = gpu_operator_release(mig={"strategy": "single"}, gfd={"enabled": True})
    source = chart_sources.locate("gpu-operator", "v26.7.0")
    key = cache.chart_key(release, source)
    reordered = copy.deepcopy(release)
    reordered["values"] = dict(reversed(list(reordered["values"].items())))
    assert cache.chart_key(reordered, source) == key
    for field, value in (("release", "other"), ("namespace", "other"), ("skipCrds", True), ("version", "v24.9.2")):
        assert cache.chart_key({**release, field: value}, source) != key, field


def test_an_edited_chart_source_renders_afresh(reference_dir, tmp_path, helm_calls):
    # A charts.directory copy of the chart, edited between two renders.
    folder = tmp_path / "charts" / "aws-efa-k8s-device-plugin-v0.5.30"
    shutil.copytree(reference_dir / "charts" / "aws-efa-k8s-device-plugin-v0.5.30", folder)
    sources = ChartSources(cache=tmp_path / "chart-cache", directory=tmp_path / "charts")
    release = {"release": "efa", "chart": "aws-efa-k8s-device-plugin", "version": "v0.5.30", "namespace": "kube-system", "values": {}}
    cache = RenderCache(tmp_path / "cache")
    render_cache.render_release_cached(release, sources, cache)
    template = next((folder / "templates").glob("*daemonset*.yaml"))
    template.write_text(template.read_text().replace("kind: DaemonSet", "kind: DaemonSet\n# edited"))
    (folder / "templates" / "extra.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n")
    edited, _ = render_cache.render_release_cached(release, sources, cache)
    assert helm_calls == ["efa", "efa"]
    assert "ConfigMap" in {obj["kind"] for _, obj in edited.objects}


def test_another_helm_engine_or_render_code_makes_another_key(chart_sources, tmp_path, monkeypatch):
    cache = RenderCache(tmp_path)
    release = gpu_operator_release()
    source = chart_sources.locate("gpu-operator", "v26.7.0")
    key = cache.chart_key(release, source)
    engine = render_cache.engine_identity()
    assert engine["version"]
    assert any(hash_ for _, hash_, _, _ in engine["libraries"])
    monkeypatch.setattr(render_cache, "engine_identity", lambda: {**engine, "version": "9.9.9"})
    assert cache.chart_key(release, source) != key
    monkeypatch.undo()
    renderer = render_cache.renderer_identity()
    monkeypatch.setattr(render_cache, "renderer_identity", lambda: {**renderer, "charts.py": "0" * 64})
    assert cache.chart_key(release, source) != key


def test_without_the_helm_engine_nothing_is_keyed(chart_sources, tmp_path, monkeypatch):
    monkeypatch.setattr(render_cache, "engine_identity", lambda: None)
    assert RenderCache(tmp_path).chart_key(gpu_operator_release(), chart_sources.locate("gpu-operator", "v26.7.0")) is None


def test_a_damaged_entry_is_rendered_again(chart_sources, tmp_path, helm_calls):
    cache = RenderCache(tmp_path)
    release = gpu_operator_release()
    first, texts = render_cache.render_release_cached(release, chart_sources, cache)
    (entry,) = (tmp_path / "charts").glob("*.json")
    entry.write_text(entry.read_text()[: len(entry.read_text()) // 2])
    again, again_texts = render_cache.render_release_cached(release, chart_sources, cache)
    assert helm_calls == ["gpu-operator", "gpu-operator"]
    assert again.objects == first.objects
    assert again_texts == texts


def test_a_helm_refusal_is_not_stored(chart_sources, tmp_path, helm_calls):
    cache = RenderCache(tmp_path)
    bad = gpu_operator_release(**{"node-feature-discovery": {"worker": {"tolerations": "all"}}})
    for _ in range(2):
        refused, _ = render_cache.render_release_cached(bad, chart_sources, cache)
        assert "want array" in refused.error
    assert helm_calls == ["gpu-operator", "gpu-operator"]
    assert not (tmp_path / "charts").exists()


def test_objects_that_json_would_change_are_not_stored(tmp_path):
    cache = RenderCache(tmp_path)
    cache.store_chart("k", render_cache.CachedChart([("t.yaml", {"data": {80: "http"}})], ["data:\n  80: http\n"]))
    assert cache.load_chart("k") is None


def test_another_graphviz_build_lays_the_picture_out_again(tmp_path):
    cache = RenderCache(tmp_path)
    key = cache.picture_key("digraph {}", "dot - graphviz version 2.43.0 (0)", 72)
    assert cache.picture_key("digraph {}", "dot - graphviz version 9.0.0 (0)", 72) != key
    assert cache.picture_key("digraph { a }", "dot - graphviz version 2.43.0 (0)", 72) != key
    assert cache.picture_key("digraph {}", "dot - graphviz version 2.43.0 (0)", 96) != key


def test_the_render_command_caches_under_xdg_cache_home_unless_told_not_to(tmp_path, monkeypatch, capsys, chart_sources):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert render_main(["dev", str(tmp_path / "nocache"), "--no-picture", "--no-cache"]) == 0
    assert not (tmp_path / "xdg").exists()
    assert render_main(["dev", str(tmp_path / "out"), "--no-picture"]) == 0
    stored = list((tmp_path / "xdg" / "eks-gpu-training" / "render" / "charts").glob("*.json"))
    releases = [line for line in capsys.readouterr().out.splitlines() if "objects rendered by Helm" in line]
    assert len(stored) == len(releases) // 2 > 0
    assert files(tmp_path / "out") .keys() == files(tmp_path / "nocache").keys()


def test_a_release_program_renders_the_same_through_the_cache(chart_sources, tmp_path):
    graph = run_program(
        lambda: k8s.helm.v3.Release("op", name="gpu-operator", chart="gpu-operator", version="v26.7.0",
                                    namespace="gpu-operator", values={"driver": {"enabled": False}}),
        {}, preview=True, mocks=PlaceholderMocks("us-west-2"),
    )
    result = to_render(graph, stack="t", project="p", region="us-west-2", kubernetes_version="1.34")
    cache = RenderCache(tmp_path / "cache")
    for out in ("cold", "warm"):
        write_render(result, tmp_path / out, picture=False, sources=chart_sources, cache=cache)
    write_render(result, tmp_path / "none", picture=False, sources=chart_sources, cache=None)
    assert files(tmp_path / "cold") == files(tmp_path / "warm") == files(tmp_path / "none")
