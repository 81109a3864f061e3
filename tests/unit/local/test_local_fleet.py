"""A local MultiKueue fleet's plain parts: its members, their stack files, ``fleet.json`` and the
command's refusals. Starting and wiring the clusters is judged in tests/cluster/test_multikueue.py."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.harness import PROJECT_ROOT

from eks_gpu_training.config import ConfigError
from eks_gpu_training.local.__main__ import main
from eks_gpu_training.local.errors import LocalClusterError
from eks_gpu_training.local.local_fleet import (
    FLEET_FILE, FleetMember, FleetMembers, LocalFleet, fleet_members, member_stack_file, parse_workers, running_fleet,
    side_by_side,
)
from eks_gpu_training.platform.stack_files import locate_stack


def _problems(error: ConfigError) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in error.problems]


def test_the_manager_gets_the_workers_nodes_together_and_each_member_a_folder(tmp_path):
    members = fleet_members("dev", tmp_path, {"east": 1, "west": 2})
    assert [(m.name, m.nodes, m.state) for m in members.all()] == [
        ("manager", 3, tmp_path / "manager"), ("east", 1, tmp_path / "east"), ("west", 2, tmp_path / "west")]
    assert members.manager.kubeconfig == tmp_path / "manager" / "kubeconfig"


def test_refuses_a_fleet_without_workers_and_names_each_bad_worker(tmp_path):
    with pytest.raises(ConfigError) as refused:
        fleet_members("dev", tmp_path, {})
    assert [path for path, _ in _problems(refused.value)] == ["--worker"]
    with pytest.raises(ConfigError) as refused:
        fleet_members("dev", tmp_path, {"manager": 1, "East_1": 2, "west": 0})
    assert [path for path, _ in _problems(refused.value)] == ["--worker manager", "--worker East_1", "--worker west"]
    assert "at least one GPU node; got 0" in _problems(refused.value)[2][1]


def test_worker_options_keep_their_order_and_refuse_a_bad_or_repeated_one():
    assert list(parse_workers(["west=4", "east=2"]).items()) == [("west", 4), ("east", 2)]
    with pytest.raises(ConfigError) as refused:
        parse_workers(["east", "west=x", "north=1", "north=2"])
    assert _problems(refused.value) == [
        ("--worker east", "is NAME=NODES, e.g. east=2"), ("--worker west=x", "is NAME=NODES, e.g. east=2"),
        ("--worker north=2", "names worker 'north' twice")]


def test_a_members_stack_file_sizes_the_gpu_pool_and_the_quotas_that_follow_it(tmp_path):
    dev = locate_stack("dev", PROJECT_ROOT)
    member = FleetMember("west", 4, tmp_path / "west")
    path = member_stack_file(dev, member, tmp_path)
    assert path.name == "Pulumi.dev-west.yaml"
    args = locate_stack(path, PROJECT_ROOT).platform_args()
    (pool,) = args.gpu_node_groups
    assert (pool.min_size, pool.desired_size, pool.max_size) == (4, 4, 4)
    research = next(team for team in args.scheduling.teams if team.name == "research")
    assert {q.pool: q.gpus for q in research.quotas} == {"dev-gpu": 4, "gpu-training": 1}
    assert args.cluster.name == dev.platform_args().cluster.name


def test_the_managers_pools_reach_the_fleets_size_with_the_stacks_own_nodes_running(tmp_path):
    dev = locate_stack("dev", PROJECT_ROOT)
    manager = fleet_members("dev", tmp_path, {"east": 1, "west": 2}).manager
    args = locate_stack(member_stack_file(dev, manager, tmp_path), PROJECT_ROOT).platform_args()
    (pool,) = args.gpu_node_groups
    (own,) = dev.platform_args().gpu_node_groups
    assert (pool.min_size, pool.desired_size, pool.max_size) == (own.min_size, own.desired_size, 3)
    research = next(team for team in args.scheduling.teams if team.name == "research")
    assert {q.pool: q.gpus for q in research.quotas} == {"dev-gpu": 3, "gpu-training": 1}


def test_fleet_json_names_the_members_and_reads_back(tmp_path):
    members = fleet_members("dev", tmp_path, {"east": 1, "west": 2})
    (tmp_path / FLEET_FILE).write_text(json.dumps(members.as_json()))
    assert FleetMembers.read(tmp_path) == members
    assert json.loads((tmp_path / FLEET_FILE).read_text())["workers"][1]["kubeconfig"] == str(tmp_path / "west" / "kubeconfig")
    assert FleetMembers.read(tmp_path / "absent") is None


def test_a_fleet_that_is_not_running_is_said_so(tmp_path):
    with pytest.raises(LocalClusterError, match="no local fleet of dev"):
        running_fleet("dev", tmp_path)
    members = fleet_members("dev", tmp_path, {"east": 1})
    (tmp_path / FLEET_FILE).write_text(json.dumps(members.as_json()))
    with pytest.raises(LocalClusterError, match="is not running: manager, east"):
        running_fleet("dev", tmp_path)


def test_up_refuses_while_a_member_of_the_fleet_runs_and_starts_nothing(tmp_path):
    members = fleet_members("dev", tmp_path, {"east": 1})
    (tmp_path / FLEET_FILE).write_text(json.dumps(members.as_json()))
    (tmp_path / "east").mkdir()
    (tmp_path / "east" / "pids.json").write_text("{}")
    fleet = LocalFleet("dev", tmp_path, workers={"east": 1}, project_root=PROJECT_ROOT)
    with pytest.raises(LocalClusterError, match="already runs .*east"):
        fleet.up()
    assert not (tmp_path / "manager").exists()
    assert fleet.clusters == {}


def test_down_removes_the_state_of_a_fleet_with_nothing_running(tmp_path):
    state = tmp_path / "fleet"
    state.mkdir()
    (state / FLEET_FILE).write_text(json.dumps(fleet_members("dev", state, {"east": 1}).as_json()))
    assert LocalFleet("dev", state).down() == []
    assert not state.exists()


def test_the_command_refuses_bad_workers_before_starting_anything(tmp_path, capsys):
    assert main(["fleet", "up", "dev", "--worker", "manager=1", "--state-dir", str(tmp_path / "fleet")]) == 1
    assert "--worker manager" in capsys.readouterr().err
    assert main(["fleet", "up", "dev", "--worker-lost-timeout", "0", "--state-dir", str(tmp_path / "fleet")]) == 1
    assert "--worker-lost-timeout: must be 1 second or more; got 0" in capsys.readouterr().err
    assert not (tmp_path / "fleet").exists()
    assert main(["fleet", "status", "dev", "--state-dir", str(tmp_path / "fleet")]) == 1
    assert "no local fleet of dev" in capsys.readouterr().out


def test_side_by_side_awaits_every_start_and_raises_the_first_members_failure():
    ended = []

    def failing(name):
        def call():
            time.sleep(0.05 if name == "manager" else 0)
            ended.append(name)
            raise LocalClusterError(f"{name} did not start", "look at its log")
        return call

    parked = threading.Event()
    with pytest.raises(LocalClusterError, match="manager did not start"):
        side_by_side({"manager": failing("manager"), "east": failing("east"), "west": lambda: ended.append("west")},
                     parked_until=parked)
    assert sorted(ended) == ["east", "manager", "west"]
    starters = [t for t in threading.enumerate() if t.name.startswith("start-")]
    assert len(starters) == 3, "a starting thread ended before it was let go: what it started would get SIGTERM"
    parked.set()
    for thread in starters:
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in starters)
