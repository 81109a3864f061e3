"""Programs in other languages use the library's plugin package, judged by the real engine: the
Pulumi CLI built from its module runs examples/python through the Python language host,
examples/yaml through the YAML host built from pulumi-yaml and examples/typescript through the
Node.js host of sdk/v3 v3.68.0, against the local control plane. Each deploys the in-cluster half
(the GPU Operator release from the chart mirror, scheduling policies, Kueue's flavor and queues, a
queued training job); the YAML and TypeScript programs make the same objects as the Python one,
their second preview is empty, and destroy removes what they made. A bad argument comes back as
Pulumi's property error.

The package is offered as an executable plugin (``pulumi-resource-eks-gpu-training``, the console
script the project declares, on ``PATH``): ``pulumi package add`` on the source folder would first
install the resource plugins its Python environment requires (aws, eks, tls, docker-build), which
are downloaded from get.pulumi.com and cannot be built here. The cluster is bare, with Kueue's CRDs
from the module its controller is built from: the engine needs the kinds served, not Kueue running
(the Job stays suspended, as it is until Kueue admits it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from eks_gpu_training.addons import gpu_operator
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.go_components import KUEUE
from eks_gpu_training.offline.chart_sources import MIRROR_ENV
from eks_gpu_training.plugin.package_provider import package_schema
from tests.support.clusters import start
from tests.support.go_tools import PULUMI_LANGUAGE_NODEJS, PULUMI_YAML
from tests.support.harness import PROJECT_ROOT
from tests.support.typescript_program import prepared_program, run_tool

EXAMPLES = PROJECT_ROOT / "examples"
KUEUE_CRDS = ("resourceflavors", "clusterqueues", "localqueues", "topologies", "workloadpriorityclasses", "workloads")
"""Kueue's CRDs the programs' objects (and the Job's queue label) need served."""
PLUGIN = "pulumi-resource-eks-gpu-training"


@pytest.fixture(scope="module")
def path_dirs(tmp_path_factory) -> list[Path]:
    """The folders on PATH: the plugin, the YAML host, the CLI with the Kubernetes provider and the
    Python host, and the virtual environment's python (which the Python host runs)."""
    plugin = tmp_path_factory.mktemp("plugin")
    # The console script pyproject declares, as pip writes it: a venv installed before it lacks it.
    (plugin / PLUGIN).write_text(f'#!/bin/sh\nexec "{sys.executable}" -m eks_gpu_training.plugin "$@"\n')
    (plugin / PLUGIN).chmod(0o755)
    hosts = [builds.build(component, log=print) for component in (PULUMI_YAML, PULUMI_LANGUAGE_NODEJS)]
    return [plugin, *hosts, builds.tools_dir(log=print), Path(sys.executable).parent]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    for running in start("dev", tmp_path_factory.mktemp("local-plugin"), bare=True):
        module = json.loads(subprocess.run(
            ["go", "mod", "download", "-json", f"{KUEUE.module}@{KUEUE.version}"], cwd=KUEUE.wrapper,
            capture_output=True, text=True, check=True).stdout)["Dir"]
        crds = [yaml.safe_load((Path(module) / "config/components/crd/bases" / f"kueue.x-k8s.io_{name}.yaml").read_text())
                for name in KUEUE_CRDS]
        for crd in crds:
            running.env.apply(crd)
        running.env.applier.wait_established(crds)
        yield running


class Project:
    """One example program, copied to a folder of its own, run by the CLI on a file backend."""

    def __init__(self, example: str | Path, state: Path, path_dirs: list[Path]):
        if isinstance(example, Path):
            self.folder = example  # prepared already (the TypeScript program with its SDK installed)
        else:
            self.folder = state / example
            shutil.copytree(EXAMPLES / example, self.folder)
        state.mkdir(parents=True, exist_ok=True)
        (state / "backend").mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]]),
            "PULUMI_HOME": str(state / "home"),
            "PULUMI_BACKEND_URL": (state / "backend").as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": "plugin-tests",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        finished = subprocess.run(["pulumi", *args, "--non-interactive"], cwd=self.folder, env=self.env,
                                  capture_output=True, text=True, timeout=1200, check=False)
        print(finished.stdout[-4000:], finished.stderr[-4000:])
        if check:
            assert finished.returncode == 0, finished.stderr[-2000:] or finished.stdout[-2000:]
        return finished

    def up(self, kubeconfig: Path) -> None:
        self.run("stack", "init", "local")
        self.run("config", "set", "kubeconfig", str(kubeconfig))
        self.run("config", "set", "chartMirror", os.environ[MIRROR_ENV])
        self.run("up", "--yes", "--skip-preview")


def objects(env) -> dict[str, Any]:
    """What the programs make, as the cluster holds it (specs and labels, not server bookkeeping)."""
    custom = client.CustomObjectsApi(env.api)

    def kueue(plural: str, namespace: str | None = None) -> dict[str, Any]:
        items = (custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, plural) if namespace
                 else custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural))["items"]
        return {item["metadata"]["name"]: item["spec"] for item in items}

    classes = client.SchedulingV1Api(env.api).list_priority_class().items
    job = env.batch.read_namespaced_job("llama-sft", "training")
    quotas = env.core.list_namespaced_resource_quota("training").items
    secrets = env.core.list_namespaced_secret(gpu_operator.NAMESPACE, label_selector="owner=helm,name=gpu-operator").items
    return {
        "priorityClasses": sorted((c.metadata.name, c.value) for c in classes if not c.metadata.name.startswith("system-")),
        "namespace": env.core.read_namespace("training").metadata.labels,
        "quotas": {q.metadata.name: q.spec.hard for q in quotas},
        "flavors": kueue("resourceflavors"),
        "clusterQueues": kueue("clusterqueues"),
        "localQueues": kueue("localqueues", "training"),
        "job": {"labels": job.metadata.labels, "suspend": job.spec.suspend, "parallelism": job.spec.parallelism,
                "image": job.spec.template.spec.containers[0].image},
        "release": sorted(s.metadata.name for s in secrets),
    }


def test_the_cli_reads_the_executable_plugins_schema_as_the_checked_in_one(path_dirs, tmp_path):
    project = Project("yaml", tmp_path, path_dirs)
    printed = json.loads(project.run("package", "get-schema", str(path_dirs[0] / PLUGIN)).stdout)
    printed.pop("config", None)  # the CLI adds an empty one
    assert printed == package_schema()


def test_gen_sdk_on_the_executable_plugin_writes_yamls_package_declaration(path_dirs, tmp_path):
    """``pulumi package gen-sdk`` given the console script's path, offline. Given the plugin folder
    instead, the CLI would first download the resource plugins its Python environment requires."""
    project = Project("yaml", tmp_path, path_dirs)
    project.run("package", "gen-sdk", str(path_dirs[0] / PLUGIN), "--language", "yaml", "--out", str(tmp_path / "sdk"))
    declaration = yaml.safe_load((tmp_path / "sdk" / "yaml" / "eks-gpu-training-0.0.0.yaml").read_text())
    assert declaration == {"packageDeclarationVersion": 1, "name": "eks-gpu-training", "version": "0.0.0"}


def test_a_bad_argument_in_yaml_comes_back_as_the_property_error_python_gets(path_dirs, tmp_path):
    """The provider's ConfigError reaches the engine as InputPropertiesError: the CLI names the property
    path and the reason, as for a Python program, before anything is registered."""
    project = Project("yaml", tmp_path, path_dirs)
    program = yaml.safe_load((project.folder / "Pulumi.yaml").read_text())
    program["resources"] = {"cluster": program["resources"]["cluster"], "llama-sft": program["resources"]["llama-sft"]}
    program["resources"]["llama-sft"]["properties"]["job"]["kind"] = "CronJob"
    program["resources"]["llama-sft"]["options"].pop("dependsOn")
    program.pop("outputs")
    (project.folder / "Pulumi.yaml").write_text(yaml.safe_dump(program, sort_keys=False))
    project.run("stack", "init", "local")
    project.run("config", "set", "kubeconfig", str(tmp_path / "no-cluster.yaml"))
    project.run("config", "set", "chartMirror", "https://charts.example.com")
    failed = project.run("preview", check=False)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert "property TrainingJob(llama-sft).kind has a problem: 'CronJob' is not a job kind" in output, output[-3000:]
    assert "Unexpected" not in output


def test_yaml_typescript_and_python_programs_make_the_same_objects_with_an_empty_second_preview(
        typescript_program, path_dirs, cluster, tmp_path):
    # The TypeScript program is built (npm, tsc) before the cluster starts, which then idles for none of it.
    python = Project("python", tmp_path / "python", path_dirs)
    python.up(cluster.kubeconfig)
    made_by_python = objects(cluster.env)
    python.run("destroy", "--yes", "--skip-preview")

    program = Project("yaml", tmp_path / "yaml", path_dirs)
    program.up(cluster.kubeconfig)
    assert objects(cluster.env) == made_by_python
    assert made_by_python["release"] == ["sh.helm.release.v1.gpu-operator.v1"]
    assert made_by_python["job"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    program.run("preview", "--expect-no-changes")
    program.run("destroy", "--yes", "--skip-preview")
    assert client.CustomObjectsApi(cluster.env.api).list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"] == []

    # The Node.js host of sdk/v3 v3.68.0 runs the TypeScript program with @pulumi/pulumi from npm.
    typescript = Project(typescript_program, tmp_path / "typescript", path_dirs)
    typescript.up(cluster.kubeconfig)
    assert objects(cluster.env) == made_by_python
    typescript.run("preview", "--expect-no-changes")
    typescript.run("destroy", "--yes", "--skip-preview")
    assert client.SchedulingV1Api(cluster.env.api).list_priority_class(field_selector="metadata.name=training-critical").items == []


@pytest.fixture(scope="module")
def typescript_program(tmp_path_factory) -> Path:
    """examples/typescript with the SDK generated from the schema the plugin serves, built, and installed
    beside @pulumi/pulumi from npm (``tests/support/typescript_program``: kept in the build cache)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not on PATH: the TypeScript program needs @pulumi/pulumi and tsc from npm")
    return prepared_program(package_schema(), tmp_path_factory.mktemp("typescript"))


def test_the_typescript_program_type_checks_against_the_generated_sdk(typescript_program):
    run_tool(dict(os.environ), "npx", "tsc", "--noEmit", "-p", ".", cwd=typescript_program)
