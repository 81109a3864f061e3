"""The real Pulumi engine deploys a stack's in-cluster half alone (``inCluster``) through a
kubeconfig, with its Helm charts from a local folder (``charts.directory``), to a bare local
cluster: the GPU Operator release installed and awaited by Helm, the scheduling policy and the
training job after it; then a chart version bump, planned and made as an in-place upgrade, and
destroy.

The dev stack's settings, with Kueue off: Kueue's chart would put its webhook in front of every
Job in the training namespaces, served by a pod KWOK only pretends to run (the local platform runs
Kueue out of cluster instead)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from eks_gpu_training import GpuTrainingInCluster
from eks_gpu_training.addons import gpu_operator
from eks_gpu_training.local import build as builds
from eks_gpu_training.offline.engine import stack_config
from eks_gpu_training.platform.loading import platform_args_from_settings

from conftest import REFERENCE, start
from engine import Engine, changed, exists
from kube import wait_for

PROJECT = "eks-gpu-training"
RELEASE = "kubernetes:helm.sh/v3:Release gpu-training-gpu-operator-release"
INSTALLED, UPGRADE = "v24.9.2", "v26.7.0"
"""The two GPU Operator versions the library supports: the older is installed, then upgraded. The
charts' hook Jobs (the CRD upgrade before an upgrade, NFD's prune after an uninstall) finish as on
real nodes, through KWOK's pod-complete stage narrowed to Helm's Jobs (``control_plane.kwok_stages``)."""


@dataclass(frozen=True)
class Settings:
    gpu_operator_version: str = INSTALLED


def local_charts(folder: Path) -> Path:
    """A chart folder as an air-gapped user keeps one: the pinned charts, by name and version."""
    folder.mkdir()
    for version in (INSTALLED, UPGRADE):
        name = f"gpu-operator-{version}"
        (folder / name).symlink_to(REFERENCE / "charts" / name, target_is_directory=True)
    return folder


def program(kubeconfig: Path, charts: Path):
    def for_settings(settings: Settings):
        config = stack_config("dev")
        config[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": str(kubeconfig)}
        config[f"{PROJECT}:charts"] = {"directory": str(charts)}
        config[f"{PROJECT}:kueue"] = {"enabled": False}
        config[f"{PROJECT}:gpuOperator"] = {**config[f"{PROJECT}:gpuOperator"], "chartVersion": settings.gpu_operator_version}
        args = platform_args_from_settings(config)
        return lambda: GpuTrainingInCluster("gpu-training", args)

    return for_settings


@pytest.fixture(scope="module")
def tools() -> Path:
    return builds.tools_dir(log=print)


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory):
    yield from start("dev", tmp_path_factory.mktemp("local-in-cluster"), bare=True)


@pytest.fixture(scope="module")
def engine(tools, bare_cluster, tmp_path_factory):
    charts = local_charts(tmp_path_factory.mktemp("charts") / "charts")
    engine = Engine(tools, tmp_path_factory.mktemp("in-cluster-state"), program(bare_cluster.kubeconfig, charts),
                    project="in-cluster")
    yield engine
    engine.destroy_after_tests()


def release_secrets(kube) -> list[str]:
    """Helm's record of each revision of the GPU Operator release (``sh.helm.release.v1.<name>.v<n>``)."""
    secrets = kube.core.list_namespaced_secret(gpu_operator.NAMESPACE, label_selector="owner=helm,name=gpu-operator")
    return sorted(secret.metadata.name for secret in secrets.items)


# The tests below run in order on one stack: each starts from the state the previous one left.

def test_up_installs_the_in_cluster_half_from_local_charts_and_a_second_preview_is_empty(engine, bare_cluster):
    kube = bare_cluster.kube
    engine.up(Settings())
    assert release_secrets(kube) == ["sh.helm.release.v1.gpu-operator.v1"]
    # Helm waited for the operator's Deployment before the release counted as installed.
    operator = client.AppsV1Api(kube.api).read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    assert operator.status.available_replicas == operator.spec.replicas
    classes = {c.metadata.name for c in client.SchedulingV1Api(kube.api).list_priority_class().items}
    assert {c.name for c in bare_cluster.args.scheduling.priority_classes} <= classes
    job = kube.batch.read_namespaced_job("rl-training", "training")
    assert job.spec.suspend is True
    assert changed(engine.plan(Settings(), expect_no_changes=True)) == {}


def test_a_chart_version_bump_upgrades_the_release_in_place(engine, bare_cluster):
    plan = changed(engine.plan(Settings(gpu_operator_version=UPGRADE)))
    assert plan == {RELEASE: ["update"]}, plan
    engine.up(Settings(gpu_operator_version=UPGRADE))
    # A second revision of the same release (an upgrade), not a new release.
    assert release_secrets(bare_cluster.kube) == ["sh.helm.release.v1.gpu-operator.v1", "sh.helm.release.v1.gpu-operator.v2"]
    operator = client.AppsV1Api(bare_cluster.kube.api).read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    assert operator.metadata.labels["helm.sh/chart"] == f"gpu-operator-{UPGRADE}"
    assert changed(engine.plan(Settings(gpu_operator_version=UPGRADE), expect_no_changes=True)) == {}


def test_destroy_uninstalls_the_release_and_removes_the_policy(engine, bare_cluster):
    kube = bare_cluster.kube
    engine.destroy()
    assert release_secrets(kube) == []
    scheduling = client.SchedulingV1Api(kube.api)
    for priority_class in bare_cluster.args.scheduling.priority_classes:
        assert not exists(lambda: scheduling.read_priority_class(priority_class.name))
    wait_for(lambda: not exists(lambda: kube.core.read_namespace(gpu_operator.NAMESPACE)), timeout=120,
             what=f"namespace {gpu_operator.NAMESPACE} going")
