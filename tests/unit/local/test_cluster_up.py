"""The local cluster's plain parts, without Go: the wrappers' pins, the simulated fleet built from a
stack's render, and what changes for the processes that run beside the cluster. The cluster tier
(tests/cluster) runs the real thing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.harness import stack_config

from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES
from eks_gpu_training.facts.gpu_nodes import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_RESOURCE, network_layer_key
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.fleet import (
    KWOK_NODE_ANNOTATION, ephemeral_storage, karpenter_instance_types, managed_nodes,
    topology_labels,
)
from eks_gpu_training.local.instance_types import instance_type
from eks_gpu_training.local.scale import STACK_TOPOLOGY
from eks_gpu_training.local.platform import KWOK_NODE_CLASS, PlatformObjects, collect, localize
from eks_gpu_training.offline.engine import PlausibleMocks
from eks_gpu_training.offline.render.registrations import render_stack
from eks_gpu_training.platform.loading import platform_args_from_settings
from eks_gpu_training.platform.stack_files import stack_file_name


WRAPPED = (*builds.CONTROL_PLANE, *(c for c in builds.KUBERNETES_BY_MINOR.values() if c is not builds.KUBERNETES))


@pytest.mark.parametrize("component", WRAPPED, ids=lambda c: c.name)
def test_each_wrapper_pins_its_upstream_module_and_every_hash(component):
    go_mod = (component.wrapper / "go.mod").read_text()
    assert re.match(r"^v\d+\.\d+\.\d+$", component.version), component.version
    go_sum = (component.wrapper / "go.sum").read_text()
    assert f"{component.module} {component.version} h1:" in go_sum
    assert not list(component.wrapper.glob("*.go")), "wrappers hold no Go source"
    assert "module eks-gpu-training.local/" in go_mod


def _go_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.removeprefix("go").split("."))


def test_a_wrapper_needing_a_newer_go_is_built_with_its_named_toolchain_and_only_it():
    # Karpenter core v1.14.3 says `go 1.26.10`; the Go everything else builds with is older.
    go_line = re.search(r"^go (\S+)$", (builds.KARPENTER_KWOK.wrapper / "go.mod").read_text(), re.M)[1]
    assert builds.KARPENTER_KWOK.toolchain is not None
    assert _go_version(builds.KARPENTER_KWOK.toolchain) >= _go_version(go_line)
    assert builds._go_env(builds.KARPENTER_KWOK)["GOTOOLCHAIN"] == builds.KARPENTER_KWOK.toolchain
    assert {builds._go_env(c)["GOTOOLCHAIN"] for c in WRAPPED if c is not builds.KARPENTER_KWOK} == {"local"}


@pytest.mark.parametrize("minor", builds.KUBERNETES_BY_MINOR)
def test_each_kubernetes_wrapper_pins_its_minor_and_every_staging_module_to_the_matching_release(minor):
    component = builds.KUBERNETES_BY_MINOR[minor]
    assert component.version.startswith(f"v{minor}.")
    go_mod = (component.wrapper / "go.mod").read_text()
    minor_patch = component.version.removeprefix("v1.")
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => (\S+) (v\S+)$", go_mod, re.M)
    assert len(replaced) >= 30
    assert all(left == right and version == f"v0.{minor_patch}" for left, right, version in replaced)


def test_the_local_cluster_runs_the_stacks_minor_and_refuses_one_it_cannot_build(tmp_path, chart_sources):
    import yaml

    from eks_gpu_training.local.cluster import LocalCluster

    assert builds.control_plane_for("1.34")[1] is builds.KUBERNETES_BY_MINOR["1.34"]
    assert builds.control_plane_for("1.35") == builds.CONTROL_PLANE
    config = stack_config("dev")
    config["eks-gpu-training:cluster"] = {**config["eks-gpu-training:cluster"], "kubernetesVersion": "1.33"}
    stack_path = tmp_path / stack_file_name("old")
    stack_path.write_text(yaml.safe_dump({"config": config}))
    cluster = LocalCluster("old", tmp_path / "state", stack_path=stack_path, log=lambda line: None)
    with pytest.raises(builds.BuildError) as refused:
        cluster.up()
    assert str(refused.value).startswith("the local control plane cannot run Kubernetes 1.33: it is built at 1.34 (v1.34.")
    assert not (tmp_path / "state").exists()  # refused before anything started


def test_binaries_are_cached_by_component_and_version(tmp_path):
    folder = builds.bin_dir(builds.KUEUE, tmp_path)
    assert folder == tmp_path / "bin" / f"kueue-{builds.KUEUE.version}"
    assert not builds.is_built(builds.KUEUE, tmp_path)


@pytest.fixture(scope="module")
def prod_render():
    result = render_stack("prod", mocks=PlausibleMocks())
    args = platform_args_from_settings(stack_config("prod"))
    return args, [r.as_json() for r in result.resources]


def test_each_managed_pool_node_carries_what_its_node_group_registers(prod_render):
    args, resources = prod_render
    nodes = managed_nodes(args, resources)
    gpu = [n for n in nodes if n.pool == "p5-training"]
    assert len(gpu) == 2
    manifest = gpu[0].manifest()
    labels = manifest["metadata"]["labels"]
    assert labels["role"] == "gpu-training"
    assert labels["eks-gpu-training/pool"] == "p5-training"
    assert labels["topology.kubernetes.io/zone"] == "us-west-2b"
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    # prod gates its nodes: each joins with the health gate's startup taint too, as EKS registers it (no value).
    assert manifest["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                                          {"key": "eks-gpu-training/unverified", "effect": "NoSchedule"}]
    assert manifest["metadata"]["annotations"] == {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]}
    assert all(network_layer_key(layer) in labels for layer in (1, 2, 3))
    allocatable = manifest["status"]["allocatable"]
    assert allocatable[GPU_RESOURCE] == str(GPU_INSTANCE_TYPES["p5.48xlarge"].gpus)
    assert allocatable[EFA_RESOURCE] == str(GPU_INSTANCE_TYPES["p5.48xlarge"].efa_interfaces)
    assert allocatable[HUGEPAGES_RESOURCE] == "10256Mi"
    system = [n for n in nodes if n.pool == "system"]
    assert len(system) == 3
    assert all(n.labels["role"] == "system" and not n.taints for n in system)


def test_the_instance_store_array_is_the_gpu_nodes_ephemeral_storage(prod_render):
    args, resources = prod_render
    node = next(n for n in managed_nodes(args, resources) if n.pool == "p5-training")
    assert node.capacity["ephemeral-storage"] == str(30400 * 10**9)


def test_ephemeral_storage_keeps_the_eks_amis_reserve_as_karpenters_table_does():
    # Karpenter's table lists 17Gi allocatable for its 20Gi default root volume.
    _, allocatable = ephemeral_storage(20 * 2**30)
    assert allocatable == 17 * 2**30
    assert instance_type("m7i.large").allocatable["ephemeral-storage"] == "17Gi"


def test_pool_nodes_are_laid_out_in_blocks_under_one_spine():
    layouts = [topology_labels("pool", index) for index in range(STACK_TOPOLOGY.nodes_per_block * 2)]
    assert len({layout[network_layer_key(1)] for layout in layouts}) == 1
    assert len({layout[network_layer_key(3)] for layout in layouts}) == 2
    assert layouts[0][network_layer_key(3)] == layouts[STACK_TOPOLOGY.nodes_per_block - 1][network_layer_key(3)]
    assert all(re.fullmatch(r"nn-[0-9a-f]{17}", value) for layout in layouts for value in layout.values())


def test_karpenter_is_offered_only_the_types_zones_and_capacity_its_nodepools_allow():
    args = platform_args_from_settings(stack_config("dev"))
    nodepool = {"metadata": {"name": "gpu-training"}, "spec": {"template": {"spec": {"requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6e.xlarge"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
    ]}}}}
    [offered] = karpenter_instance_types(args, [nodepool])
    assert offered["name"] == "g6e.xlarge"
    assert offered["resources"][GPU_RESOURCE] == "1"
    zones = sorted(o["Requirements"][1]["values"][0] for o in offered["offerings"])
    assert zones == ["us-west-2a", "us-west-2b"]


def _webhook_config(kind: str) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "kueue"},
            "webhooks": [{"name": "w", "clientConfig": {"service": {"namespace": "kueue-system",
                                                                    "name": "kueue-webhook-service", "path": "/mutate"}}}]}


def test_webhooks_served_beside_the_cluster_point_at_loopback_and_others_are_left_out():
    platform = collect([], [_webhook_config("MutatingWebhookConfiguration"), {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "other"},
        "webhooks": [{"name": "x", "clientConfig": {"service": {"namespace": "a", "name": "b"}}}]}])
    result = localize(platform, out_of_cluster={("kueue-system", "kueue-webhook-service"): ("https://127.0.0.1:9", "Q0E=")})
    [kept] = result.objects
    assert kept["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9/mutate", "caBundle": "Q0E="}
    assert any("ValidatingWebhookConfiguration other" in reason for reason in result.left_out)


def test_nodepools_keep_everything_but_their_node_class():
    nodepool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
                "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                "name": "p"}, "requirements": []}}, "limits": {"x": 1}}}
    [local] = localize(PlatformObjects(objects=[nodepool]), out_of_cluster={}).objects
    assert local["spec"]["template"]["spec"]["nodeClassRef"] == KWOK_NODE_CLASS
    assert local["spec"]["limits"] == {"x": 1}


def test_helm_hooks_an_install_does_not_run_are_left_out_with_the_reason():
    hook = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "cleanup", "namespace": "n",
                                                                  "annotations": {"helm.sh/hook": "pre-delete"}}}
    platform = collect([], [hook])
    assert platform.objects == []
    assert "pre-delete hook" in platform.left_out[0]


def _wait_gone(pid: int, seconds: float = 60) -> bool:
    """Whether ``pid`` ends within ``seconds``: a hang guard, returned from as soon as it has."""
    import os
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z":
            return True
        time.sleep(0.05)
    return False


def test_attached_processes_end_with_the_process_that_started_them_even_when_it_is_killed(tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    starter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from eks_gpu_training.local.processes import Process, Supervisor
        supervisor = Supervisor(Path({str(tmp_path)!r}), attached=True)
        supervisor.start(Process("sleeper", Path("/bin/sleep"), ("300",)))
        print("started", flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True)
    assert starter.stdout.readline().strip() == "started"
    pid = json.loads((tmp_path / "pids.json").read_text())["sleeper"]["pid"]
    os.kill(starter.pid, signal.SIGKILL)
    starter.wait()
    assert _wait_gone(pid), "the attached process outlived its starter"


def test_stop_all_stops_each_recorded_process_and_never_a_pid_running_another_binary(tmp_path):
    import json
    import subprocess

    from eks_gpu_training.local.processes import Process, Supervisor

    supervisor = Supervisor(tmp_path)
    started = supervisor.start(Process("sleeper", Path("/bin/sleep"), ("300",)))
    stranger = subprocess.Popen(["/bin/sleep", "300"])
    try:
        record = json.loads((tmp_path / "pids.json").read_text())
        record["stranger"] = {"pid": stranger.pid, "binary": "/usr/bin/not-sleep", "log": str(tmp_path / "x.log")}
        (tmp_path / "pids.json").write_text(json.dumps(record))
        again = Supervisor(tmp_path)
        again.load()
        assert again.status() == {"sleeper": True, "stranger": False}
        again.stop_all()
        started.popen.wait(timeout=60)
        assert stranger.poll() is None, "a pid whose binary differs from the record is left alone"
        assert not (tmp_path / "pids.json").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_without_go_a_missing_component_fails_saying_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(builds.BuildError) as refused:
        builds.build_all(root=tmp_path, log=lambda line: None)
    assert str(refused.value) == (
        f"cannot build etcd {builds.ETCD.version}: the Go toolchain (`go`, 1.26 or newer) is not on PATH"
    )


def test_a_simulated_node_is_created_with_its_status_in_one_call(prod_render):
    """KWOK gives a node it sees without allocatable its own defaults (1k CPU, 1Ti); a status
    written after the create could lose that race, so the node is created whole."""
    from eks_gpu_training.local.node_registration import create_node

    calls = []

    class Core:
        def create_node(self, body, **options):
            calls.append(("create", body))

    class Applier:
        core = Core()

    node = next(n for n in managed_nodes(*prod_render) if n.pool == "p5-training")
    create_node(Applier(), node.manifest())
    assert [kind for kind, _ in calls] == ["create"]
    assert calls[0][1]["status"]["allocatable"] == node.allocatable


def test_simulated_nodes_are_created_side_by_side_each_whole(prod_render):
    """A thousand nodes one after the other were most of ``up``'s time."""
    import threading

    from eks_gpu_training.local.node_registration import create_nodes

    together = threading.Barrier(2, timeout=60)  # broken unless two creates are under way at once
    created = []

    class Core:
        def create_node(self, body, **options):
            together.wait()
            created.append(body["metadata"]["name"])

    class Applier:
        core = Core()

    nodes = [node.manifest() for node in managed_nodes(*prod_render)]
    create_nodes(Applier(), nodes[:4])
    assert sorted(created) == sorted(node["metadata"]["name"] for node in nodes[:4])


def test_the_allocatable_check_lists_the_nodes_once_and_names_each_whose_figures_were_replaced(prod_render):
    import json
    from types import SimpleNamespace

    from eks_gpu_training.local.cluster import LocalClusterError
    from eks_gpu_training.local.node_registration import check_allocatable

    nodes = [node.manifest() for node in managed_nodes(*prod_render)]
    live = [{"metadata": node["metadata"], "status": {"allocatable": dict(node["status"]["allocatable"])}} for node in nodes]
    live[-1]["status"]["allocatable"]["memory"] = "1Ti"  # KWOK's default, had it won the race
    lists = []

    class Core:  # no read_node: one list is all the check may ask for
        def list_node(self, **options):
            lists.append(options)
            return SimpleNamespace(data=json.dumps({"items": live}).encode())

    class Applier:
        core = Core()

    with pytest.raises(LocalClusterError) as replaced:
        check_allocatable(Applier(), nodes)
    wanted = nodes[-1]["status"]["allocatable"]["memory"]
    assert str(replaced.value).startswith(f"simulated nodes do not allocate what their instance types do: "
                                          f"{nodes[-1]['metadata']['name']}: memory 1Ti instead of {wanted}")
    assert len(lists) == 1
    live[-1]["status"]["allocatable"]["memory"] = wanted
    check_allocatable(Applier(), nodes)


def test_an_efa_nodes_hugepages_come_out_of_its_allocatable_memory(prod_render):
    from eks_gpu_training.facts.gpu_nodes import EFA_NODE_HUGEPAGES_MIB

    node = next(n for n in managed_nodes(*prod_render) if n.pool == "p5-training")
    table = instance_type(node.instance_type).allocatable["memory"]
    assert node.allocatable[HUGEPAGES_RESOURCE] == f"{EFA_NODE_HUGEPAGES_MIB}Mi"
    assert node.allocatable["memory"] == f"{int(table.removesuffix('Mi')) - EFA_NODE_HUGEPAGES_MIB}Mi"


def test_a_bare_cluster_renders_the_stacks_node_groups_but_none_of_its_charts(tmp_path, monkeypatch):
    from eks_gpu_training.local import cluster as local_cluster

    def no_charts(*args, **kwargs):
        raise AssertionError("a bare cluster applies no chart, so it renders none")

    monkeypatch.setattr(local_cluster, "write_render", no_charts)
    lines = local_cluster.LocalCluster("prod", tmp_path / "state", log=lambda line: None).dry_run(bare=True)
    nodes = [line.removeprefix("  apply Node ") for line in lines if line.startswith("  apply Node ")]
    assert nodes == ["system-0", "system-1", "system-2", "p5-training-0", "p5-training-1"]
    assert lines[-1] == "  wait until every pod is bound to a node and every Deployment and DaemonSet has made its pods"


def test_with_everything_built_etcd_and_the_api_server_start_before_the_render_and_stop_if_it_fails(tmp_path, monkeypatch):
    from eks_gpu_training.local import cluster as local_cluster
    from eks_gpu_training.local.processes import Supervisor

    events: list[str] = []
    monkeypatch.setattr(builds, "is_built", lambda component, root=None: True)
    monkeypatch.setattr(Supervisor, "launch", lambda self, processes, log: events.append(
        "launch " + " ".join(p.name for p in processes)) or [])
    monkeypatch.setattr(Supervisor, "stop_all", lambda self: events.append("stop") or [])
    # The control plane's files read KWOK's stages from its build, which the unit tier has not made.
    monkeypatch.setattr(local_cluster, "write_control_plane_files", lambda layout: None)

    def broken_chart(self, located, out, *, bare):
        events.append("render")
        raise local_cluster.LocalClusterError("charts not rendered: x 1.0: broken", "fix the chart")

    monkeypatch.setattr(local_cluster.LocalCluster, "_render_located", broken_chart)
    cluster = local_cluster.LocalCluster("dev", tmp_path / "state", log=lambda line: None)
    with pytest.raises(local_cluster.LocalClusterError):
        cluster.up()
    assert events == ["launch etcd kube-apiserver", "render", "stop"]
