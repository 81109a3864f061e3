"""The mock-engine harness the tests use; it lives in ``components.offline`` (the render command
runs the same engine), and is re-exported here under the names the tests import."""

from components.offline import (
    PROJECT_ROOT,
    Graph,
    PlausibleMocks,
    Registration,
    run_main,
    run_program,
    run_stack,
    stack_config,
)

__all__ = [
    "PROJECT_ROOT",
    "Graph",
    "PlausibleMocks",
    "Registration",
    "run_main",
    "run_program",
    "run_stack",
    "stack_config",
]
