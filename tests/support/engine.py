"""The real Pulumi engine for the cluster tier's engine tests: one stack of an inline program on a
file backend, run by the CLI built from source (``eks-gpu-training-local tools``), with a
passphrase and no plugin downloads. The programs run through the Automation API as inline
programs, which the SDK's own language runtime serves (programs with components built in the test;
the project's own ``__main__.py`` goes through the Python language host, ``test_engine_in_cluster``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Generic, Optional, TypeVar

import pytest
from kubernetes.client.exceptions import ApiException
from pulumi import automation as auto

Settings = TypeVar("Settings")


def _recorder(steps: dict[str, list[str]]):
    """An event handler that collects each resource's planned steps into ``steps``."""

    def record(event: auto.EngineEvent) -> None:
        if event.resource_pre_event is not None:
            metadata = event.resource_pre_event.metadata
            steps.setdefault(f"{metadata.type} {metadata.urn.rsplit('::', 1)[-1]}", []).append(metadata.op.value)

    return record


class Engine(Generic[Settings]):
    """One stack of the inline program ``program(settings)`` makes, on a file backend."""

    def __init__(self, tools: Path, state: Path, program: Callable[[Settings], Callable[[], None]], project: str = "engine"):
        self.program = program
        self.project = project
        backend = state / "backend"
        backend.mkdir(parents=True)
        self.env = {
            "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
            "PULUMI_HOME": str(state / "home"),
            "PULUMI_CONFIG_PASSPHRASE": "engine-tests",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
        }
        self.options = auto.LocalWorkspaceOptions(
            work_dir=str(state),
            pulumi_command=auto.PulumiCommand(root=str(tools.parent)),
            project_settings=auto.ProjectSettings(name=project, runtime="python",
                                                  backend=auto.ProjectBackend(url=backend.as_uri())),
            env_vars=self.env,
        )
        self.stack: Optional[auto.Stack] = None

    def _stack(self, settings: Settings) -> auto.Stack:
        self.stack = auto.create_or_select_stack("local", project_name=self.project, program=self.program(settings),
                                                 opts=self.options)
        return self.stack

    def up(self, settings: Settings) -> auto.UpResult:
        return self._stack(settings).up(on_output=print)

    def plan(self, settings: Settings, **options) -> dict[str, list[str]]:
        """``"<type> <name>"`` -> the engine's steps for that resource in a preview of ``settings``."""
        steps: dict[str, list[str]] = {}
        self._stack(settings).preview(on_event=_recorder(steps), on_output=print, **options)
        return steps

    def failed_plan(self, settings: Settings) -> tuple[dict[str, list[str]], str]:
        """The steps the engine planned before a preview of ``settings`` failed, and its output."""
        steps: dict[str, list[str]] = {}
        with pytest.raises(auto.CommandError) as failure:
            self._stack(settings).preview(on_event=_recorder(steps), on_output=print)
        return steps, str(failure.value)

    def destroy(self) -> None:
        assert self.stack is not None
        self.stack.destroy(on_output=print)

    def destroy_after_tests(self) -> None:
        """What a fixture runs at its end: after a failure the last test's destroy never ran, so this
        removes what is left (the cluster goes with the session anyway, so a failure only prints)."""
        if self.stack is not None:
            try:
                self.destroy()
            except auto.CommandError as error:
                print(f"destroy after the engine tests failed: {error}")


def changed(plan: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: ops for name, ops in plan.items() if ops != ["same"]}


def exists(read) -> bool:
    try:
        read()
        return True
    except ApiException as error:
        if error.status == 404:
            return False
        raise
