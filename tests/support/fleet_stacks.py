"""The README's MultiKueue fleet (a worker in each of two regions, one manager) as stack files: each
is the dev stack with the keys its README block sets changed, written into a project of its own, as
a reader following the README would write them."""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any

import pulumi
import yaml

from eks_gpu_training.platform.stack_files import PROJECT_FILE, locate_stack
from tests.support.clusters import stack_variant
from tests.support.harness import PROJECT_ROOT, Graph, PlausibleMocks, run_main

README_SECTION = "### A fleet: a worker in each of two regions, one manager"
STACK_FILE_COMMENT = re.compile(r"^# Pulumi\.(?P<stack>[a-z0-9-]+)\.yaml")
MANAGER = "fleet"
WORKERS = {"west": "fleet-west", "east": "fleet-east"}
"""The README manager's workers: each one's name there, and its stack."""


def readme_fleet_blocks() -> dict[str, dict[str, Any]]:
    """Each YAML block of the README's fleet section, by the stack its first line names."""
    text = (PROJECT_ROOT / "README.md").read_text()
    section = text[text.index(README_SECTION) + len(README_SECTION):]
    following = re.search(r"^#{2,3} ", section, re.M)
    section = section[: following.start() if following else len(section)]
    blocks = {}
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        match = STACK_FILE_COMMENT.match(block)
        assert match is not None, f"a fleet block names its stack file first: {block.splitlines()[0]}"
        blocks[match.group("stack")] = yaml.safe_load(block)["config"]
    return blocks


def merged(base: Any, change: Any) -> Any:
    """``base`` with ``change`` over it: a mapping key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{key: merged(base.get(key), value) for key, value in change.items()}}
    return copy.deepcopy(change)


def write_fleet_project(folder: Path) -> dict[str, Path]:
    """A Pulumi project in ``folder`` holding the README's fleet stacks, each dev's settings with its
    block's changes; the stack files by stack name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PROJECT_FILE).write_text("name: eks-gpu-training\nruntime: python\n")
    return {stack: stack_variant(folder, "dev", lambda config, change=change: config.update(merged(config, change)), name=stack)
            for stack, change in readme_fleet_blocks().items()}


class WorkerTokenMocks(PlausibleMocks):
    """The token a worker cluster's token controller writes into the manager's token Secret: the
    test's own, one per worker, so each worker's kubeconfig is told apart."""

    def __init__(self, token: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.token = token

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        resource_id, outputs = super().new_resource(args)
        if args.typ == "kubernetes:core/v1:Secret" and args.inputs.get("type") == "kubernetes.io/service-account-token":
            outputs = {**outputs, "data": {"token": base64.b64encode(self.token.encode()).decode()}}
        return resource_id, outputs


def run_fleet_stack(project: Path, stack: str, mocks: pulumi.runtime.Mocks) -> Graph:
    """A stack of the fleet's project run under ``mocks``, as `pulumi up` runs it from the project's
    folder (the caller's current folder): it must not fail."""
    graph = run_main(locate_stack(stack, project).settings(), stack=stack, mocks=mocks, project_root=project)
    assert graph.error is None, repr(graph.error)
    return graph


def run_fleet_workers(project: Path) -> dict[str, Graph]:
    """Both workers run, each with the token ``token-of-<stack>``, by stack."""
    return {stack: run_fleet_stack(project, stack, WorkerTokenMocks(f"token-of-{stack}")) for stack in WORKERS.values()}
