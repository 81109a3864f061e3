"""The local cluster's processes as records: the pure builders, the start order their ``after``
names give, and the supervisor starting them in it and stopping them in reverse. No Go: the
records are compared as data, and the supervisor runs small shell and Python processes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from eks_gpu_training.local import build as builds
from eks_gpu_training.local.control_plane import (
    apiserver_process, control_plane_processes, controller_manager_process, etcd_process, kwok_process,
    scheduler_process,
)
from eks_gpu_training.local.layout import PORTS, Layout, free_ports
from eks_gpu_training.local.processes import (
    Process, ProcessFailed, ProcessOrderError, Ready, Supervisor, start_order,
)


@pytest.fixture
def layout(tmp_path):
    return Layout(tmp_path / "state", {name: 20000 + index for index, name in enumerate(PORTS)},
                  builds.KUBERNETES_BY_MINOR["1.34"], cache=tmp_path / "cache")


def test_each_port_is_chosen_once_below_the_ports_outgoing_connections_take(tmp_path):
    ports = free_ports(reservations=tmp_path / "ports.json")
    assert set(ports) == set(PORTS)
    assert len(set(ports.values())) == len(PORTS)
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(10000 <= port < ephemeral_low for port in ports.values())


@pytest.fixture
def narrow_range(monkeypatch):
    """Thirty ports to choose from: two clusters' fourteen each fit only if neither takes the other's."""
    from eks_gpu_training.local import layout as layouts

    ports = range(23100, 23130)
    monkeypatch.setattr(layouts, "_listen_range", lambda: ports)
    return ports


def test_a_second_cluster_never_draws_the_ports_a_first_has_chosen_but_not_yet_listens_on(tmp_path, narrow_range):
    reservations = tmp_path / "ports.json"
    first = free_ports(reservations=reservations)
    second = free_ports(reservations=reservations)
    assert set(first.values()) <= set(narrow_range)
    assert set(second.values()) <= set(narrow_range)
    assert not set(first.values()) & set(second.values())


def test_reservations_end_after_their_time_and_a_broken_file_is_read_as_none(tmp_path, narrow_range):
    import json

    reservations = tmp_path / "ports.json"
    reservations.write_text(json.dumps({str(port): 1.0 for port in narrow_range}))
    assert set(free_ports(reservations=reservations).values()) <= set(narrow_range)
    reservations.write_text("{not json")
    assert set(free_ports(reservations=reservations).values()) <= set(narrow_range)


def test_ports_are_reserved_for_longer_than_the_last_process_takes_to_listen():
    from eks_gpu_training.local.layout import RESERVED_SECONDS

    # Kueue and Karpenter listen last, about a minute after the ports are chosen on an idle machine.
    assert RESERVED_SECONDS >= 600


def test_the_control_plane_is_built_from_the_layout_alone_and_the_same_layout_gives_the_same_records(layout):
    assert control_plane_processes(layout) == control_plane_processes(layout)
    names = [process.name for process in control_plane_processes(layout)]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]


def test_etcd_listens_where_the_layout_says_and_is_ready_when_healthy(layout):
    etcd = etcd_process(layout)
    assert etcd.binary == builds.bin_dir(builds.ETCD, layout.cache) / "etcd"
    assert "--listen-client-urls=http://127.0.0.1:20000" in etcd.args
    assert f"--data-dir={layout.state / 'etcd'}" in etcd.args
    assert etcd.ready == Ready("http://127.0.0.1:20000/health", body='"health":"true"')
    assert etcd.after == ()


def test_the_controllers_and_the_scheduler_are_not_held_to_the_default_client_rates_20_and_50(layout):
    from eks_gpu_training.local.control_plane import CLIENT_BURST, CLIENT_QPS

    assert CLIENT_QPS > 50
    assert CLIENT_BURST > 100
    for process in (controller_manager_process(layout), scheduler_process(layout)):
        assert tuple(a for a in process.args if a.startswith("--kube-api-")) == (
            f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_BURST}")


def test_the_api_server_runs_the_stacks_minor_after_etcd_and_is_probed_with_the_admin_certificate(layout):
    apiserver = apiserver_process(layout)
    assert apiserver.binary == builds.bin_dir(builds.KUBERNETES_BY_MINOR["1.34"], layout.cache) / "kube-apiserver"
    assert apiserver.after == ("etcd",)
    assert "--etcd-servers=http://127.0.0.1:20000" in apiserver.args
    assert "--secure-port=20002" in apiserver.args
    pki = layout.pki
    assert apiserver.ready == Ready("https://127.0.0.1:20002/readyz", body="ok", ca=pki.ca_cert,
                                    client=(pki.admin_cert, pki.admin_key))


def test_kwok_manages_only_the_annotated_nodes_and_reads_its_stages_from_the_state_folder(layout):
    kwok = kwok_process(layout)
    assert kwok.after == ("kube-apiserver",)
    assert f"--config={layout.state / 'kwok.yaml'}" in kwok.args
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in kwok.args


def test_a_command_line_names_its_environment_first_quoted_as_a_shell_would():
    process = Process("p", Path("/bin/echo"), ("a b",), env={"KEY": "v w"})
    assert process.command_line() == "'KEY=v w' /bin/echo 'a b'"


def _process(name: str, *after: str) -> Process:
    return Process(name, Path("/bin/true"), after=after)


def test_processes_start_after_what_they_name_and_otherwise_in_the_order_given():
    ordered = start_order([_process("scheduler", "apiserver"), _process("apiserver", "etcd"), _process("etcd"),
                           _process("kwok", "apiserver")])
    assert [p.name for p in ordered] == ["etcd", "apiserver", "scheduler", "kwok"]


def test_a_process_may_start_after_one_already_running():
    assert [p.name for p in start_order([_process("kueue", "apiserver")], started=["apiserver"])] == ["kueue"]


def test_an_after_naming_no_process_is_refused_naming_it():
    with pytest.raises(ProcessOrderError) as refused:
        start_order([_process("kueue", "apiserver")])
    assert refused.value.what == "processes start after processes there are not: kueue after apiserver"


def test_processes_waiting_for_each_other_are_refused_as_a_cycle():
    with pytest.raises(ProcessOrderError) as refused:
        start_order([_process("etcd"), _process("a", "b"), _process("b", "a", "etcd")])
    assert refused.value.what == "processes wait for each other in a cycle: a after b, b after a+etcd"


def _server(port: int) -> Process:
    """A Python HTTP server on loopback, ready when it answers."""
    return Process("server", Path(sys.executable), ("-m", "http.server", "--bind", "127.0.0.1", str(port)),
                   ready=Ready(f"http://127.0.0.1:{port}/", timeout=30))


def _trap(name: str, record: Path, *after: str) -> Process:
    """A shell that writes its name to ``record`` once it listens for the signal to stop, and again
    when it gets it."""
    script = f'trap "echo {name} stopped >> {record}; exit 0" TERM; echo {name} up >> {record}; while :; do sleep 0.05; done'
    return Process(name, Path("/bin/sh"), ("-c", script), after=after)


def test_the_supervisor_starts_in_dependency_order_each_ready_first_and_stops_in_reverse(tmp_path):
    port = free_ports(("server",), reservations=tmp_path / "ports.json")["server"]
    record = tmp_path / "stopped"
    supervisor = Supervisor(tmp_path)
    said = []
    try:
        started = supervisor.start_all([_trap("last", record, "server"), _server(port), _trap("first", record)],
                                       log=said.append)
        assert [p.name for p in started] == ["server", "last", "first"]
        assert said[0] == f"starting server, ready when http://127.0.0.1:{port}/ answers 200"
        deadline = time.monotonic() + 60  # a hang guard: the loop ends as soon as both shells are up
        while not {"first up", "last up"} <= _lines(record) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {"first up", "last up"} <= _lines(record)
    finally:
        supervisor.stop_all()
    assert [line for line in record.read_text().splitlines() if line.endswith("stopped")] == ["first stopped", "last stopped"]


def _lines(path: Path) -> set[str]:
    return set(path.read_text().splitlines()) if path.is_file() else set()


def test_a_process_that_exits_before_it_is_ready_fails_naming_its_log(tmp_path):
    supervisor = Supervisor(tmp_path)
    failing = Process("broken", Path("/bin/sh"), ("-c", "echo no config; exit 3"),
                      ready=Ready("http://127.0.0.1:9/", timeout=30))
    with pytest.raises(ProcessFailed) as failed:
        supervisor.start_all([failing], log=lambda line: None)
    supervisor.stop_all()
    log = tmp_path / "logs" / "broken.log"
    assert failed.value.line() == f"broken exited before ready — read its log, {log}"
    assert failed.value.details == f"the last lines of {log}:\nno config"


def test_launched_processes_start_at_once_and_start_all_then_only_waits_for_them(tmp_path):
    # up launches etcd and the API server before the render; the control-plane stage's start_all
    # then waits until they are ready instead of starting them twice.
    port = free_ports(("server",), reservations=tmp_path / "ports.json")["server"]
    server = _server(port)
    supervisor = Supervisor(tmp_path)
    said: list[str] = []
    try:
        launched = supervisor.launch([server], log=said.append)
        started = supervisor.start_all([server, _trap("after", tmp_path / "record", "server")], log=said.append)
        assert [p.name for p in started] == ["server", "after"]
        assert started[0].pid == launched[0].pid
        assert server.ready is not None
        assert server.ready.probe()
    finally:
        supervisor.stop_all()
    assert said == ["starting server", f"waiting for server: ready when http://127.0.0.1:{port}/ answers 200",
                    "starting after"]

