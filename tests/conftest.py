"""Shared fixtures: the mocks harness and the stack files."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import PROJECT_ROOT, run_stack

REFERENCE = PROJECT_ROOT.parent / "shared" / "reference"
STACKS = sorted(p.name.split(".")[1] for p in (PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml"))


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
