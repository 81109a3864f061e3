"""``up`` as named stages of data, and ``up --dry-run`` printing them: the dev stack rendered with
its charts (from the session's loopback mirror), planned against a fixed layout, without Go."""

from __future__ import annotations

import pytest
import yaml

from tests.support.harness import REFERENCE

from eks_gpu_training.local import build as builds
from eks_gpu_training.local.__main__ import main
from eks_gpu_training.local.cluster import LocalCluster
from eks_gpu_training.local.layout import PORTS, Layout
from eks_gpu_training.local.platform import collect, describe
from eks_gpu_training.local.stages import ObjectFile, describe_plan

pytestmark = pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"the stages are planned from dev's charts, served from {REFERENCE}")


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    """dev's render, and the cluster that planned it."""
    folder = tmp_path_factory.mktemp("dev-stages")
    cluster = LocalCluster("dev", folder / "state", log=lambda line: None)
    render = cluster._render(folder / "render")
    layout = Layout(folder / "state", {name: 30000 + index for index, name in enumerate(PORTS)}, cache=folder / "cache")
    return cluster, render, layout


def _names(objects) -> list[str]:
    return [f"{obj.kind} {obj.name}" if isinstance(obj, ObjectFile) else describe(obj) for obj in objects]


def test_up_runs_its_stages_in_the_order_the_platform_needs(dev):
    cluster, render, layout = dev
    stages = cluster.plan(render, layout).stages
    assert [stage.name for stage in stages] == [
        "control-plane", "eks-system", "fleet", "crds", "namespaces", "webhooks", "karpenter", "health-gate", "platform",
        "node-repair", "node-health"]
    assert [stage.name for stage in cluster.plan(render, layout, bare=True).stages] == ["control-plane", "eks-system", "fleet"]


def test_every_object_of_the_render_is_applied_once_or_left_out_with_its_reason(dev):
    cluster, render, layout = dev
    planned = cluster.plan(render, layout)
    applied = [name for stage in planned.stages[3:] for name in _names(stage.objects)]
    assert len(applied) == len(set(applied))
    left_out = {reason.split(":")[0] for reason in planned.platform.left_out}
    rendered = {describe(obj) for obj in collect(render["stack_objects"], render["chart_objects"]).all()}
    # The loopback certificate Secret replaces the chart's; the KWOK node class and its CRD are the local cluster's own.
    own = {"Secret kueue-system/kueue-webhook-server-cert", "CustomResourceDefinition kwoknodeclasses.karpenter.kwok.sh",
           "KWOKNodeClass default"}
    assert set(applied) - own == rendered - left_out


def test_kueue_starts_once_its_secret_and_webhooks_are_in_and_they_point_at_its_port(dev):
    cluster, render, layout = dev
    webhooks = next(stage for stage in cluster.plan(render, layout).stages if stage.name == "webhooks")
    assert [obj["kind"] for obj in webhooks.objects][:1] == ["Secret"]
    configurations = {obj["metadata"]["name"]: obj for obj in webhooks.objects if obj["kind"].endswith("WebhookConfiguration")}
    # dev's finetune is a JobSet: JobSet's webhooks too, at the layout's jobset-webhook port (no TrainJob, no Trainer)
    assert sorted(configurations) == ["jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration",
                                      "kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"]
    for name, configuration in configurations.items():
        port = 30006 if name.startswith("kueue-") else 30010
        assert all(hook["clientConfig"]["url"].startswith(f"https://127.0.0.1:{port}/") for hook in configuration["webhooks"]), name
    processes = {process.name: process for process in webhooks.processes}
    assert sorted(processes) == ["jobset", "kueue"]
    kueue = processes["kueue"]
    assert kueue.ready.url == "http://127.0.0.1:30007/readyz"
    config = next(file for file in webhooks.files if file.path == layout.kueue_config)
    assert b"port: 30006" in config.data
    assert f"--config={layout.kueue_config}" in kueue.args


def test_karpenter_gets_the_charts_settings_and_the_layouts_ports(dev):
    cluster, render, layout = dev
    stage = next(stage for stage in cluster.plan(render, layout).stages if stage.name == "karpenter")
    [karpenter] = stage.processes
    assert karpenter.env["HEALTH_PROBE_PORT"] == "30009"
    assert karpenter.env["METRICS_PORT"] == "30008"
    assert karpenter.env["INSTANCE_TYPES_FILE_PATH"] == str(layout.karpenter_instance_types)
    assert "FEATURE_GATES" in karpenter.env  # from the chart's Deployment
    assert _names(stage.objects) == ["KWOKNodeClass default"]


def test_the_dry_run_prints_each_command_line_and_object_in_the_order_up_takes_them(dev):
    cluster, render, layout = dev
    lines = describe_plan(cluster.plan(render, layout), layout)
    starts = [line.split(":")[0].strip() for line in lines if line.startswith("  start ")]
    assert starts == ["start etcd", "start kube-apiserver after etcd", "start kube-controller-manager after kube-apiserver",
                      "start kube-scheduler after kube-apiserver", "start kwok after kube-apiserver",
                      "start kueue after kube-apiserver", "start jobset after kube-apiserver",
                      "start karpenter after kube-apiserver", "start health-gate after kube-apiserver",
                      "start node-health after kube-apiserver", "start node-repair after kube-apiserver"]
    etcd = next(line for line in lines if line.startswith("  start etcd: "))
    assert etcd.startswith(f"  start etcd: {layout.cache}/bin/etcd-{builds.ETCD.version}/etcd --name=local ")
    kueue = next(line for line in lines if line.startswith("  start kueue "))
    assert f": KUBECONFIG={layout.kubeconfig} {layout.cache}/bin/kueue-{builds.KUEUE.version}/kueue " in kueue
    webhooks = lines.index("stage webhooks: Kueue's webhook Secret, the webhook configurations and the JobSet and Kubeflow "
                           "Trainer ServiceAccounts' RBAC, then Kueue, JobSet and Kubeflow Trainer beside the cluster")
    assert lines[webhooks + 1] == f"  write {layout.kueue_config}"
    assert "  apply Node dev-gpu-0" in lines
    assert lines.index("  apply Namespace kueue-system") < lines.index("  apply Secret kueue-system/kueue-webhook-server-cert")
    assert "  wait until every CRD of the stage is Established" in lines


def test_up_dry_run_builds_starts_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(builds.CACHE_ENV, str(tmp_path / "cache"))
    state = tmp_path / "state"
    assert main(["up", "dev", "--dry-run", "--bare", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "dry run of up dev: nothing is built, started or applied"
    assert f"component etcd {builds.ETCD.stamp} in {tmp_path / 'cache' / 'bin'}/etcd-{builds.ETCD.version} (not built: up builds it first)" in out
    assert "stage eks-system: the DaemonSets EKS itself runs on every node" in out
    assert not state.exists()
    assert not (tmp_path / "cache" / "bin").exists()


def test_the_jobset_controller_acts_as_its_service_account_whose_rbac_and_fence_come_before_it(dev):
    cluster, render, layout = dev
    stages = cluster.plan(render, layout).stages
    webhooks = next(stage for stage in stages if stage.name == "webhooks")
    [jobset] = [process for process in webhooks.processes if process.name == "jobset"]
    kubeconfig = yaml.safe_load(next(f for f in webhooks.files if str(f.path) == jobset.env["KUBECONFIG"]).data)
    assert kubeconfig["users"][0]["user"]["as"] == "system:serviceaccount:jobset-system:jobset-controller"
    applied = _names(webhooks.objects)
    for name in ("ServiceAccount jobset-system/jobset-controller", "ClusterRole jobset-controller",
                 "ClusterRoleBinding jobset-controller", "Role jobset-system/jobset-leader-election-role",
                 "RoleBinding jobset-system/jobset-leader-election-rolebinding",
                 "ValidatingAdmissionPolicy jobset-controller-fence", "ValidatingAdmissionPolicyBinding jobset-controller-fence"):
        assert name in applied, name
    assert applied.index("ValidatingAdmissionPolicy jobset-controller-fence") < applied.index(
        "ValidatingAdmissionPolicyBinding jobset-controller-fence")
    platform = _names(next(stage for stage in stages if stage.name == "platform").objects)
    assert "ClusterRole jobset-controller" not in platform
    assert "ClusterRole kueue-manager-role" in platform, "only the job controllers' RBAC moves"


def test_the_gates_own_program_runs_beside_the_cluster_as_its_service_account_before_the_platform(dev):
    cluster, render, layout = dev
    stages = cluster.plan(render, layout).stages
    gate = next(stage for stage in stages if stage.name == "health-gate")
    processes = {process.name: process for process in gate.processes}
    assert sorted(processes) == ["health-gate", "node-health"]
    assert processes["health-gate"].args[:2] == ("-m", "eks_gpu_training.healthgate")
    assert "--as=system:serviceaccount:health-gate:health-gate" in processes["health-gate"].args
    # The reporter started here (it writes the check verdicts) is not started again for the agent's condition.
    assert next(stage for stage in stages if stage.name == "node-health").processes == ()


def test_eks_node_auto_repair_is_simulated_beside_the_cluster_for_the_pools_that_turn_it_on(dev):
    import json

    cluster, render, layout = dev
    stage = next(stage for stage in cluster.plan(render, layout).stages if stage.name == "node-repair")
    (process,) = stage.processes
    assert process.args[:2] == ("-m", "eks_gpu_training.local.node_repair")
    (config_file,) = stage.files
    config = json.loads(config_file.data)
    assert sorted(config) == ["dev-gpu"]
    assert config["dev-gpu"]["settings"] == {"enabled": True, "max_unhealthy_node_threshold_percentage": 50,
                                             "max_parallel_nodes_repaired_count": 1}
    template = config["dev-gpu"]["template"]
    assert {"key": "eks-gpu-training/unverified", "effect": "NoSchedule"} in template["spec"]["taints"]
