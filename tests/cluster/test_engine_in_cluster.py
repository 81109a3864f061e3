"""The real Pulumi engine deploys a stack's in-cluster half alone (``inCluster``) through a
kubeconfig, with its Helm charts from a local folder (``charts.directory``), to a bare local
cluster: the GPU Operator release installed and awaited by Helm, the scheduling policy and the
training job after it; then a chart version bump, planned and made as an in-place upgrade, and
destroy. And a Karpenter GPU pool's NodePool and EC2NodeClass, kept in the cluster when the pool
leaves the configuration and when the stack is destroyed, as the change table says. And the project
itself through the Python language host: a refused stack file, then up, preview and destroy.

The dev stack's settings, with Kueue off: Kueue's chart would put its webhook in front of every
Job in the training namespaces, served by a pod KWOK only pretends to run (the local platform runs
Kueue out of cluster instead). And with Karpenter off, which the in-cluster half refuses (Karpenter
needs the AWS half's IAM and queue): dev's training app moves from the Karpenter pool to dev-gpu.
Without Kueue there are no teams (a cohort is Kueue's), so the stack keeps its first namespace and
its Job app; its JobSet app goes too, whose controller's webhooks would be served by a pod KWOK only
pretends to run, like Kueue's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from kubernetes import client

from eks_gpu_training import ClusterRef, GpuNodePool, GpuNodePoolArgs, GpuTrainingInCluster
from eks_gpu_training.addons import gpu_operator, karpenter
from eks_gpu_training.addons.chart_source import chart_name, release_chart
from eks_gpu_training.config import SubnetRef
from eks_gpu_training.local import build as builds
from eks_gpu_training.addons.chart_archives import CACHE_ENV, LOCK_FILE, ChartLock, archive_digest, lock_key
from eks_gpu_training.offline.chart_sources import MIRROR_ENV, ChartSources
from eks_gpu_training.offline.engine import stack_config
from tests.support.harness import PROJECT_ROOT
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.releases import stack_charts
from eks_gpu_training.platform.stack_files import stack_config_dir, stack_file_name

from tests.support.clusters import start
from tests.support.engine import Engine, changed, exists
from tests.support.environment import wait_for

PROJECT = "eks-gpu-training"
RELEASE = "kubernetes:helm.sh/v3:Release gpu-training-gpu-operator-release"
INSTALLED, UPGRADE = "v24.9.2", "v26.7.0"
"""The two GPU Operator versions the library supports: the older is installed, then upgraded. The
charts' hook Jobs (the CRD upgrade before an upgrade, NFD's prune after an uninstall) finish as on
real nodes, through KWOK's pod-complete stage narrowed to Helm's Jobs (``control_plane.kwok_stages``)."""


@dataclass(frozen=True)
class Settings:
    gpu_operator_version: str = INSTALLED
    chart_mirror: str | None = None
    """The stack's ``charts.mirror``; unset, its charts come from the local folder."""
    registry_mirrors: tuple[tuple[str, str], ...] = ()
    """The stack's ``images.registryMirrors``."""


def pulled_chart(folder: Path, chart: str, version: str, repository: str | None = None) -> None:
    """``chart`` at ``version`` in ``folder`` as ``helm pull`` leaves it, pulled the way the
    offline tools pull (the configured mirror, into the session's chart cache)."""
    archive = ChartSources.configured().locate(chart, version, repository)
    (folder / f"{chart_name(chart)}-{version}.tgz").symlink_to(archive)


def local_charts(folder: Path) -> Path:
    """A chart folder as a deployer that cannot reach the chart repositories keeps one: the pinned
    charts, by name and version."""
    folder.mkdir()
    for version in (INSTALLED, UPGRADE):
        pulled_chart(folder, gpu_operator.CHART, version, gpu_operator.CHART_REPOSITORY)
    return folder


def in_cluster_config(kubeconfig: Path, charts: Path) -> dict:
    """Dev's stack file as the in-cluster half alone, with its charts from ``charts``."""
    config = stack_config("dev")
    config[f"{PROJECT}:inCluster"] = {"enabled": True, "kubeconfig": str(kubeconfig)}
    config[f"{PROJECT}:charts"] = {"directory": str(charts)}
    config[f"{PROJECT}:kueue"] = {"enabled": False}
    config[f"{PROJECT}:karpenter"] = {"enabled": False}
    config[f"{PROJECT}:healthGate"] = {"enabled": False}
    scheduling = config[f"{PROJECT}:scheduling"]
    scheduling["teams"] = []
    scheduling["namespaces"] = scheduling["namespaces"][:1]
    scheduling["trainingApps"] = [a for a in scheduling["trainingApps"]
                                  if a.get("kind", "Job") == "Job" and a.get("namespace") is None]
    for app in scheduling["trainingApps"]:
        app["pool"] = config[f"{PROJECT}:gpuNodeGroups"][0]["name"]
    return config


def program(kubeconfig: Path, charts: Path):
    def for_settings(settings: Settings):
        config = in_cluster_config(kubeconfig, charts)
        config[f"{PROJECT}:gpuOperator"] = {**config[f"{PROJECT}:gpuOperator"], "chartVersion": settings.gpu_operator_version}
        if settings.chart_mirror:
            config[f"{PROJECT}:charts"] = {"mirror": settings.chart_mirror}
        if settings.registry_mirrors:
            config[f"{PROJECT}:images"] = {"registryMirrors": dict(settings.registry_mirrors)}
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


def release_secrets(env) -> list[str]:
    """Helm's record of each revision of the GPU Operator release (``sh.helm.release.v1.<name>.v<n>``)."""
    secrets = env.core.list_namespaced_secret(gpu_operator.NAMESPACE, label_selector="owner=helm,name=gpu-operator")
    return sorted(secret.metadata.name for secret in secrets.items)


# The tests below run in order on one stack: each starts from the state the previous one left.

def test_up_installs_the_in_cluster_half_from_local_charts_and_a_second_preview_is_empty(engine, bare_cluster):
    env = bare_cluster.env
    engine.up(Settings())
    assert release_secrets(env) == ["sh.helm.release.v1.gpu-operator.v1"]
    # Helm waited for the operator's Deployment before the release counted as installed.
    operator = client.AppsV1Api(env.api).read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    assert operator.status.available_replicas == operator.spec.replicas
    classes = {c.metadata.name for c in client.SchedulingV1Api(env.api).list_priority_class().items}
    assert {c.name for c in bare_cluster.args.scheduling.priority_classes} <= classes
    job = env.batch.read_namespaced_job("rl-training", "training")
    assert job.spec.suspend is True
    assert changed(engine.plan(Settings(), expect_no_changes=True)) == {}


def test_a_chart_version_bump_upgrades_the_release_in_place(engine, bare_cluster):
    plan = changed(engine.plan(Settings(gpu_operator_version=UPGRADE)))
    assert plan == {RELEASE: ["update"]}, plan
    engine.up(Settings(gpu_operator_version=UPGRADE))
    # A second revision of the same release (an upgrade), not a new release.
    assert release_secrets(bare_cluster.env) == ["sh.helm.release.v1.gpu-operator.v1", "sh.helm.release.v1.gpu-operator.v2"]
    operator = client.AppsV1Api(bare_cluster.env.api).read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    assert operator.metadata.labels["helm.sh/chart"] == f"gpu-operator-{UPGRADE}"
    assert changed(engine.plan(Settings(gpu_operator_version=UPGRADE), expect_no_changes=True)) == {}


def test_moving_the_charts_to_a_mirror_upgrades_the_release_in_place_and_leaves_its_objects(engine, bare_cluster):
    """The same chart and version from a mirror (the loopback Helm repository the tests serve, which
    the Kubernetes provider's Helm pulls from): the Release is updated, not replaced, and Helm's
    upgrade leaves the objects it already made as they were."""
    apps = client.AppsV1Api(bare_cluster.env.api)
    before = apps.read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE).metadata
    mirrored = Settings(gpu_operator_version=UPGRADE, chart_mirror=os.environ[MIRROR_ENV])
    plan = changed(engine.plan(mirrored))
    assert plan == {RELEASE: ["update"]}, plan
    engine.up(mirrored)
    assert release_secrets(bare_cluster.env)[-1] == "sh.helm.release.v1.gpu-operator.v3"
    after = apps.read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE).metadata
    assert (after.uid, after.generation) == (before.uid, before.generation)
    assert changed(engine.plan(mirrored, expect_no_changes=True)) == {}


def test_image_mirrors_upgrade_the_release_and_roll_its_pods_but_leave_a_training_job_alone(engine, bare_cluster):
    """``images.registryMirrors`` set on a running stack: one update of the release (its values'
    image repositories), the operator's Deployment rolled to the mirrored image as the same object
    (a new generation), and the training Job, whose pod template is immutable, untouched: the
    stack ignores its template, so the next Job pulls from the mirror."""
    apps = client.AppsV1Api(bare_cluster.env.api)
    before = apps.read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    job_before = bare_cluster.env.batch.read_namespaced_job("rl-training", "training")
    mirrored = Settings(gpu_operator_version=UPGRADE, chart_mirror=os.environ[MIRROR_ENV],
                        registry_mirrors=(("nvcr.io", "harbor.example.com/nvcr"),))
    plan = changed(engine.plan(mirrored))
    assert plan == {RELEASE: ["update"]}, plan
    engine.up(mirrored)
    after = apps.read_namespaced_deployment("gpu-operator", gpu_operator.NAMESPACE)
    assert after.metadata.uid == before.metadata.uid
    assert after.metadata.generation > before.metadata.generation
    assert after.spec.template.spec.containers[0].image.startswith("harbor.example.com/nvcr/nvidia/gpu-operator:")
    job_after = bare_cluster.env.batch.read_namespaced_job("rl-training", "training")
    assert job_after.metadata.uid == job_before.metadata.uid
    assert job_after.spec.template.spec.containers[0].image == job_before.spec.template.spec.containers[0].image
    assert changed(engine.plan(mirrored, expect_no_changes=True)) == {}


def test_destroy_uninstalls_the_release_and_removes_the_policy(engine, bare_cluster):
    env = bare_cluster.env
    engine.destroy()
    assert release_secrets(env) == []
    scheduling = client.SchedulingV1Api(env.api)
    for priority_class in bare_cluster.args.scheduling.priority_classes:
        assert not exists(lambda: scheduling.read_priority_class(priority_class.name))
    wait_for(lambda: not exists(lambda: env.core.read_namespace(gpu_operator.NAMESPACE)), timeout=120,
             what=f"namespace {gpu_operator.NAMESPACE} going")


# A Karpenter GPU pool's objects, retained when the pool leaves the configuration. The pool needs
# what only the AWS half makes (a node role, subnets, the cluster's security group): plausible IDs
# stand in for them, which the EC2NodeClass CRD checks only by pattern, and no Karpenter controller
# runs on the bare cluster to act on them. The CRDs come from the karpenter-crd chart, as in a stack.

KARPENTER_POOL = "gpu-training"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool gpu-training-pool-node-pool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass gpu-training-pool-node-class"


def karpenter_program(kubeconfig: Path, charts: Path):
    def for_pool(with_pool: bool | str):
        """The CRD release, with the pool (True), without it (False), or with it added back taking
        over what its removal retained ("adopt": ``adoptRetained``)."""
        config = stack_config("dev")
        args = platform_args_from_settings(config)
        pool = next(p for p in args.karpenter.gpu_node_pools if p.name == KARPENTER_POOL)
        if with_pool == "adopt":
            pool = pool.model_copy(update={"adopt_retained": True})
        # The retained pool of the change table: prod's setting (dev ships retainOnRemoval false).
        retain = True

        def run() -> None:
            provider = k8s.Provider("local", kubeconfig=str(kubeconfig))
            crds = k8s.helm.v3.Release(
                "karpenter-crd",
                name="karpenter-crd",
                namespace=karpenter.KARPENTER_NAMESPACE,
                **release_chart(karpenter.KARPENTER_CRD_CHART, args.karpenter.chart_version, None, str(charts), "charts"),
                values=karpenter.karpenter_crd_values(retain),
                atomic=True,
                opts=pulumi.ResourceOptions(provider=provider),
            )
            if with_pool:
                zone = pool.availability_zone or args.network.availability_zones[0]
                ref = ClusterRef(
                    name=args.cluster.name, region=args.region, partition="aws", vpc_id="vpc-0123456789abcdef0",
                    kubernetes_version=args.cluster.kubernetes_version,
                    cluster_security_group_id="sg-0123456789abcdef0", kubeconfig=str(kubeconfig), provider=provider,
                    subnets=(SubnetRef("subnet-0123456789abcdef0", zone),),
                )
                GpuNodePool("gpu-training-pool", GpuNodePoolArgs(
                    cluster=ref, pool=pool, node_role_name=f"{args.cluster.name}-karpenter-node",
                    karpenter_release=crds, retain_on_removal=retain,
                ))

        return run

    return for_pool


@pytest.fixture(scope="module")
def karpenter_engine(tools, bare_cluster, tmp_path_factory):
    charts = tmp_path_factory.mktemp("karpenter-charts") / "charts"
    charts.mkdir()
    pulled_chart(charts, karpenter.KARPENTER_CRD_CHART, platform_args_from_settings(stack_config('dev')).karpenter.chart_version)
    engine = Engine(tools, tmp_path_factory.mktemp("karpenter-state"), karpenter_program(bare_cluster.kubeconfig, charts),
                    project="karpenter-pool")
    yield engine
    engine.destroy_after_tests()


def karpenter_identities(env) -> dict[str, tuple]:
    """Each pool object's uid, generation and spec: what Karpenter acts on (a new spec drifts nodes)."""
    custom = client.CustomObjectsApi(env.api)
    objects = {
        "NodePool": custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", KARPENTER_POOL),
        "EC2NodeClass": custom.get_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", KARPENTER_POOL),
    }
    return {kind: (o["metadata"]["uid"], o["metadata"]["generation"], o["spec"]) for kind, o in objects.items()}


def karpenter_objects(env) -> dict[str, bool]:
    custom = client.CustomObjectsApi(env.api)
    return {
        "NodePool": exists(lambda: custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", KARPENTER_POOL)),
        "EC2NodeClass": exists(lambda: custom.get_cluster_custom_object(
            "karpenter.k8s.aws", "v1", "ec2nodeclasses", KARPENTER_POOL)),
    }


def test_a_karpenter_pool_removed_from_the_configuration_stays_in_the_cluster(karpenter_engine, bare_cluster):
    env = bare_cluster.env
    karpenter_engine.up(True)
    assert karpenter_objects(env) == {"NodePool": True, "EC2NodeClass": True}
    plan = changed(karpenter_engine.plan(False))
    assert plan == {NODE_POOL: ["delete"], NODE_CLASS: ["delete"],
                    "eks-gpu-training:index:GpuNodePool gpu-training-pool": ["delete"]}, plan
    karpenter_engine.up(False)
    # retainOnDelete: Pulumi forgets the objects and leaves them, so Karpenter keeps the pool's nodes.
    assert karpenter_objects(env) == {"NodePool": True, "EC2NodeClass": True}


def test_a_retained_pool_added_back_with_adopt_retained_is_imported_not_created(karpenter_engine, bare_cluster):
    # Added back as it was, the pool would fail with AlreadyExists (pulumi-kubernetes creates
    # client-side); adoptRetained imports the kept objects instead. The provider imports each one and
    # then applies the program's spec to it, which is the spec it already has: the same object, the
    # same generation (the API server counts only spec changes), so Karpenter sees no drift.
    env = bare_cluster.env
    kept = karpenter_identities(env)
    plan = changed(karpenter_engine.plan("adopt"))
    assert plan == {NODE_POOL: ["import", "update"], NODE_CLASS: ["import", "update"],
                    "eks-gpu-training:index:GpuNodePool gpu-training-pool": ["create"]}, plan
    karpenter_engine.up("adopt")
    assert karpenter_identities(env) == kept
    assert changed(karpenter_engine.plan("adopt")) == {}


def test_destroy_uninstalls_the_crd_release_and_keeps_the_crds_and_the_kept_pool(karpenter_engine, bare_cluster):
    env = bare_cluster.env
    karpenter_engine.destroy()
    assert not exists(lambda: env.core.read_namespaced_secret("sh.helm.release.v1.karpenter-crd.v1", karpenter.KARPENTER_NAMESPACE))
    extensions = client.ApiextensionsV1Api(env.api)
    assert exists(lambda: extensions.read_custom_resource_definition("nodepools.karpenter.sh"))
    assert karpenter_objects(env) == {"NodePool": True, "EC2NodeClass": True}


def test_a_bad_configuration_fails_the_preview_with_the_message_and_no_traceback(tools, bare_cluster, tmp_path_factory):
    # The Automation API's language runtime (an inline program) also reports a pulumi.RunError, which
    # ConfigError is, by its message alone; the language host's own handling is the project test below.
    def bad(_: None):
        config = in_cluster_config(bare_cluster.kubeconfig, tmp_path_factory.mktemp("no-charts") / "absent")
        config[f"{PROJECT}:s3Buckets"] = [{"name": "acme-training-data", "access": "read"}]

        def run() -> None:
            GpuTrainingInCluster("gpu-training", platform_args_from_settings(config))

        return run

    engine = Engine(tools, tmp_path_factory.mktemp("bad-config-state"), bad, project="bad-config")
    steps, output = engine.failed_plan(None)
    assert "charts.directory: '" in output
    assert "is not a folder" in output
    assert "s3Buckets: training pods reach the buckets through a Pod Identity role" in output
    assert "Traceback" not in output
    # Nothing but the stack itself was planned: the component refused before registering anything.
    assert list(steps) == ["pulumi:pulumi:Stack bad-config-local"]


# The project itself, as a user runs it: `pulumi preview` and `pulumi up` of __main__.py with a
# stack file, through the CLI, the Python language host and the Kubernetes provider built from
# source. The host (sdk/v3 v3.79.0, build.PULUMI_LANGUAGE_PYTHON) runs the `python` first on PATH.

PROJECT_FILES = ("Pulumi.yaml", "__main__.py")


class Project:
    """A copy of the project's program with one stack file, on a file backend of its own."""

    def __init__(self, tools: Path, folder: Path, stack: str, config: dict):
        self.folder, self.stack = folder, stack
        for name in PROJECT_FILES:
            shutil.copy(PROJECT_ROOT / name, folder / name)
        # The project's virtualenv runtime option: this environment, where the package is installed.
        (folder / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        # Where Pulumi looks for the stack's file: the copied Pulumi.yaml's stackConfigDir.
        stacks = stack_config_dir(folder)
        stacks.mkdir(parents=True, exist_ok=True)
        (stacks / stack_file_name(stack)).write_text(yaml.safe_dump({"config": config}))
        (folder / "backend").mkdir()
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([str(tools), str(Path(sys.executable).parent), os.environ["PATH"]]),
            "PULUMI_HOME": str(folder / "home"),
            "PULUMI_BACKEND_URL": (folder / "backend").as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": "engine-tests",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
        }
        self.pulumi("stack", "init", stack)

    def pulumi(self, *args: str) -> subprocess.CompletedProcess:
        result = subprocess.run(["pulumi", *args, "--non-interactive", "--cwd", str(self.folder)],
                                env=self.env, capture_output=True, text=True, timeout=900)
        print(result.stdout, result.stderr)
        return result


def test_the_language_host_shows_a_refused_stack_file_as_its_problems_without_a_traceback(
        tools, bare_cluster, tmp_path_factory):
    config = in_cluster_config(bare_cluster.kubeconfig, tmp_path_factory.mktemp("absent") / "charts")
    config[f"{PROJECT}:s3Buckets"] = [{"name": "acme-training-data", "access": "read"}]
    project = Project(tools, tmp_path_factory.mktemp("project-bad"), "bad", config)
    result = project.pulumi("preview", "-s", "bad")
    shown = result.stdout + result.stderr
    assert result.returncode != 0
    assert "invalid configuration (2 problems), rejected before registering any resource:" in shown
    assert "  - charts.directory: '" in shown
    assert "is not a folder" in shown
    assert "  - s3Buckets: training pods reach the buckets through a Pod Identity role" in shown
    assert "Traceback" not in shown
    assert 'File "' not in shown


def test_pulumi_up_of_the_project_deploys_the_in_cluster_half_and_destroy_removes_it(tools, bare_cluster, tmp_path_factory):
    charts = local_charts(tmp_path_factory.mktemp("project-charts") / "charts")
    project = Project(tools, tmp_path_factory.mktemp("project-good"), "local",
                      in_cluster_config(bare_cluster.kubeconfig, charts))
    try:
        assert project.pulumi("up", "-s", "local", "--yes").returncode == 0
        status = project.pulumi("stack", "output", "gpuOperatorStatus", "-s", "local")
        assert status.stdout.strip() == "deployed"
        assert release_secrets(bare_cluster.env) == ["sh.helm.release.v1.gpu-operator.v1"]
        assert project.pulumi("preview", "-s", "local", "--expect-no-changes").returncode == 0
    finally:
        destroyed = project.pulumi("destroy", "-s", "local", "--yes")
    assert destroyed.returncode == 0
    assert release_secrets(bare_cluster.env) == []


# charts.lock at `pulumi up`: the project with a lock beside its stack file and its charts from a
# mirror. A deployer whose mirror serves the reviewed archives installs them; one whose mirror
# serves another archive under the same chart version (repackaged with a changed file) is refused
# before anything changes. Each run pulls into a chart cache of its own, as a fresh machine does.

def tampered_mirror(folder: Path, chart: str, version: str, others: list[Path]):
    """A Helm repository on loopback serving ``chart`` at ``version`` repackaged with one more file
    (same name and version, other bytes), and ``others`` as they are."""
    import helm_python

    from tests.support.chart_mirror import ChartMirror

    served, work = folder / "served", folder / "work"
    served.mkdir(parents=True)
    work.mkdir()
    for archive in others:
        shutil.copy(archive, served / archive.name)
    reviewed = ChartSources.configured().locate(chart, version, gpu_operator.CHART_REPOSITORY)
    with tarfile.open(reviewed) as tar:
        tar.extractall(work, filter="data")
    (work / chart_name(chart) / "templates" / "extra-configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-reviewed\ndata:\n  served: by-the-mirror\n")
    helm_python.package(work / chart_name(chart), destination=served)
    helm_python.repo_index_generate(served)
    return ChartMirror(served)


def locked_project(tools: Path, folder: Path, config: dict, lock: dict[str, str]) -> Project:
    project = Project(tools, folder, "local", config)
    ChartLock(stack_config_dir(folder) / LOCK_FILE, lock).write()
    return project


def with_mirror(project: Project, config: dict, mirror: str, cache: Path) -> None:
    """The stack file with its charts from ``mirror``, and the chart cache ``cache`` for the next run."""
    config = {**config, f"{PROJECT}:charts": {"mirror": mirror}}
    (stack_config_dir(project.folder) / stack_file_name(project.stack)).write_text(yaml.safe_dump({"config": config}))
    project.env[CACHE_ENV] = str(cache)


def deployment(project: Project) -> list[dict]:
    """The stack's resources as ``pulumi stack export`` shows them."""
    exported = project.pulumi("stack", "export", "-s", project.stack)
    assert exported.returncode == 0
    return json.loads(exported.stdout)["deployment"].get("resources") or []


def test_pulumi_up_installs_the_locked_archive_and_refuses_a_mirror_serving_another_one_before_any_change(
        tools, bare_cluster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("project-locked")
    config = in_cluster_config(bare_cluster.kubeconfig, folder / "unused")
    del config[f"{PROJECT}:charts"]
    args = platform_args_from_settings(config)
    sources = ChartSources.configured()
    archives = {(chart, version): sources.locate(chart, version, gpu_operator.CHART_REPOSITORY if chart == gpu_operator.CHART else None)
                for chart, version in stack_charts(args)}
    lock = {lock_key(chart, version): archive_digest(path) for (chart, version), path in archives.items()}
    operator = lock_key(gpu_operator.CHART, args.gpu_operator.chart_version)
    project = locked_project(tools, folder, config, lock)
    mirror = tampered_mirror(tmp_path_factory.mktemp("tampered"), gpu_operator.CHART, args.gpu_operator.chart_version,
                             [path for (chart, _), path in archives.items() if chart != gpu_operator.CHART])
    try:
        # The reviewed mirror: each archive checked, and the release installed from its checked copy.
        cache = tmp_path_factory.mktemp("cache-reviewed")
        with_mirror(project, config, os.environ[MIRROR_ENV], cache)
        assert project.pulumi("up", "-s", "local", "--yes").returncode == 0
        assert release_secrets(bare_cluster.env) == ["sh.helm.release.v1.gpu-operator.v1"]
        [release] = [r for r in deployment(project) if r["type"] == "kubernetes:helm.sh/v3:Release"
                     and r["urn"].endswith("gpu-training-gpu-operator-release")]
        assert release["inputs"]["chart"] == str(cache / f"{operator}.tgz")
        assert archive_digest(Path(release["inputs"]["chart"])) == lock[operator]
        before = deployment(project)

        # Another deployer, whose mirror serves other bytes under the same version.
        fresh = tmp_path_factory.mktemp("cache-tampered")
        with_mirror(project, config, mirror.url, fresh)
        refused = project.pulumi("up", "-s", "local", "--yes")
        shown = refused.stdout + refused.stderr
        assert refused.returncode != 0
        assert f"charts.lock[{operator}]: the mirror {mirror.url} holds gpu-operator {args.gpu_operator.chart_version} as sha256:" in shown
        assert f"not the {lock[operator]}" in shown
        assert "Traceback" not in shown
        assert deployment(project) == before
        assert release_secrets(bare_cluster.env) == ["sh.helm.release.v1.gpu-operator.v1"]
        assert not (fresh / f"{operator}.tgz").exists()
        assert not exists(lambda: bare_cluster.env.core.read_namespaced_config_map("not-reviewed", gpu_operator.NAMESPACE))
    finally:
        mirror.stop()
        with_mirror(project, config, os.environ[MIRROR_ENV], cache)
        destroyed = project.pulumi("destroy", "-s", "local", "--yes")
    assert destroyed.returncode == 0
    assert release_secrets(bare_cluster.env) == []
