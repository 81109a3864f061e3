"""Shared fixtures: the mocks harness and the stack files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.builders import health_config, read_instance_type_docs, stack_without_teams
from tests.support.harness import PROJECT_ROOT, REFERENCE, run_main, run_stack
from eks_gpu_training.platform.stack_files import stack_names

CLUSTER_TIER = Path(__file__).parent / "cluster"


def pytest_addoption(parser):
    parser.addoption(
        "--cluster", action="store_true",
        help="run the cluster tier (tests/cluster): a local control plane built from upstream Go modules",
    )


def pytest_collection_finish(session):
    """Everything imported by now (the Pulumi SDKs' generated classes, a few hundred thousand
    objects, the test modules, the components) lives to the end of the session: handed to the
    permanent generation, it is no longer walked by every full collection the tests' mock-engine
    runs set off. And the youngest generation is collected every 20,000 allocations net of frees
    instead of every 700: the tests allocate in bursts (parsed YAML, CEL trees, chart renders) whose
    objects mostly live until the test ends, and at 700 every burst was scanned, and its survivors
    promoted, over and over. The unit tier took 63.3 s at 700 and 55.0 s at 20,000 (medians of 3,
    ``tests/benchmarks/suite_time.py``); memory is not the tests' limit."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


def pytest_ignore_collect(collection_path, config):
    """The cluster tier runs only when asked for (``--cluster``); the unit tier needs no Go."""
    if Path(collection_path) == CLUSTER_TIER and not config.getoption("--cluster"):
        return True
    return None
STACKS = stack_names(PROJECT_ROOT)


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """The upstream reference artefacts beside the project (CI has them; a user's clone does not)."""
    if not REFERENCE.is_dir():
        pytest.skip(f"upstream reference artefacts not found at {REFERENCE} (present in CI, absent in a plain clone)")
    return REFERENCE


@pytest.fixture(scope="session", params=STACKS)
def stack_graph(request):
    """Each stack file run end to end through __main__.py under mocks (once per session)."""
    graph = run_stack(request.param)
    assert graph.error is None, f"stack {request.param} failed: {graph.error!r}"
    return request.param, graph


@pytest.fixture(scope="session")
def prod_graph():
    graph = run_stack("prod")
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="session")
def dev_graph():
    graph = run_stack("dev")
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="session")
def prod_graph_without_teams():
    """The prod stack ``without_teams`` (one namespace with its own quota and ClusterQueue, its
    first app) run end to end under mocks (once per session)."""
    graph = run_main(stack_without_teams("prod"), stack="prod")
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="session")
def dev_graph_without_teams():
    """The dev stack ``without_teams``, as ``prod_graph_without_teams``."""
    graph = run_main(stack_without_teams("dev"), stack="dev")
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="session")
def instance_type_docs(reference_dir) -> dict[str, dict[str, str]]:
    """Karpenter's instance-type reference: labels and resources per instance type."""
    return read_instance_type_docs(reference_dir)


@pytest.fixture(scope="session")
def health_graph():
    """``health_config`` run end to end under mocks (once per session)."""
    graph = run_main(health_config())
    assert graph.error is None, repr(graph.error)
    return graph


@pytest.fixture(scope="session")
def charts_mirror(reference_dir, tmp_path_factory):
    """The reference folder's pinned charts in a Helm repository on loopback, packaged and indexed
    by Helm's own client, as a company mirror serves them (``tests/support/chart_mirror.py``), with the
    pinned charts the reference lacks packaged from their Go modules: skipped, with the reason,
    when the Go module proxy does not serve those."""
    from tests.support.chart_mirror import ChartMirror, package_charts
    from tests.support.module_charts import proxy_or_skip

    folder = tmp_path_factory.mktemp("chart-mirror")
    with proxy_or_skip():
        package_charts(reference_dir, folder)
    mirror = ChartMirror(folder)
    yield mirror
    mirror.stop()


@pytest.fixture(scope="session", autouse=True)
def configured_charts(request, tmp_path_factory):
    """The commands the tests run (render, check, the local cluster) get their charts as a user
    with a mirror does: ``$EKS_GPU_TRAINING_CHARTS_MIRROR`` names the loopback mirror, and the
    chart cache is the session's own, empty at first, so the first render pulls through Helm's
    client. Without the reference folder, or the Go module proxy, there is no mirror: the tests
    that render charts skip with the reason (``chart_sources``), and the others never ask for a chart."""
    from eks_gpu_training.offline.chart_sources import CACHE_ENV, MIRROR_ENV

    saved = {name: os.environ.get(name) for name in (CACHE_ENV, MIRROR_ENV)}
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("chart-cache"))
    os.environ.pop(MIRROR_ENV, None)
    if REFERENCE.is_dir():
        try:
            os.environ[MIRROR_ENV] = request.getfixturevalue("charts_mirror").url
        except pytest.skip.Exception:
            pass  # the fixture keeps its skip, which each test asking for the mirror then reports
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def chart_sources(charts_mirror):
    """The configured chart sources (the loopback mirror and the session's cache)."""
    from eks_gpu_training.offline.chart_sources import ChartSources

    return ChartSources.configured()


@pytest.fixture(scope="session", params=STACKS)
def rendered_stack(request, tmp_path_factory, chart_sources):
    """Each stack file rendered offline (``eks-gpu-training-render``'s work) into its own folder."""
    from eks_gpu_training.offline.render import render

    out = tmp_path_factory.mktemp(f"render-{request.param}")
    return request.param, out, render(request.param, out, sources=chart_sources)


@pytest.fixture
def render_program(tmp_path, request):
    """Render any program offline into a fresh folder; returns the folder."""
    from eks_gpu_training.offline.engine import run_program
    from eks_gpu_training.offline.render import write_render
    from eks_gpu_training.offline.render.registrations import PlaceholderMocks, to_render

    def render(program, kubernetes_version: str = "1.34", picture: bool = False, charts: bool = True) -> Path:
        graph = run_program(program, {}, preview=True, mocks=PlaceholderMocks("us-west-2"))
        assert graph.error is None, repr(graph.error)
        result = to_render(graph, stack="test", project="eks-gpu-training", region="us-west-2", kubernetes_version=kubernetes_version)
        write_render(result, tmp_path, picture=picture, sources=request.getfixturevalue("chart_sources") if charts else None)
        return tmp_path

    return render
