"""The gate's round: each node's actions in order, stopping at the first the API server refuses;
the nodes' side by side; the log in the plan's order whatever order the writes finished in. And its
rounds: the next at once after one that did something, else on a change of what it watches."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from eks_gpu_training.healthgate import gate_loop
from eks_gpu_training.healthgate.decide import CreateCheck, DeleteCheck, SetCondition, SetTaints
from eks_gpu_training.healthgate.gate_settings import SettingsError


class Refused(Exception):
    pass


class FakeCluster:
    """Records the actions applied; refuses the ones named, and holds the first node's writes back
    a moment so the others finish first."""

    def __init__(self, refuse=()):
        self.refuse, self.applied, self.lock = set(refuse), [], threading.Lock()
        self.last_settings = None

    def settings(self, config_map):
        return None

    def nodes(self):
        return []

    def check_jobs(self):
        return []

    def check_pods(self):
        return []

    def nodeclaims(self, settings):
        return []

    def replacements(self, settings):
        return []

    def apply(self, action, settings, now):
        if getattr(action, "node", None) == "gpu-0":
            time.sleep(0.05)
        if action in self.refuse:
            raise Refused("409 Conflict")
        with self.lock:
            self.applied.append(action)


def _plan(monkeypatch, actions):
    monkeypatch.setattr(gate_loop, "plan", lambda *args: list(actions))


def test_a_refused_write_stops_that_nodes_later_actions_only(monkeypatch):
    taints = SetTaints("gpu-0", "7", (), "checks passed")
    actions = [SetCondition("gpu-0", "True", "ChecksPassed", "passed"), taints, DeleteCheck("check-0"),
               SetCondition("gpu-1", "True", "ChecksPassed", "passed"), SetTaints("gpu-1", "8", (), "checks passed"),
               CreateCheck("gpu-2", "uid-2", "p5")]
    refused = SetCondition("gpu-0", "True", "ChecksPassed", "passed")
    _plan(monkeypatch, actions)
    cluster = FakeCluster(refuse={refused})
    lines = gate_loop.run_round(cluster, "health-gate")
    assert refused not in cluster.applied
    assert taints not in cluster.applied
    assert set(cluster.applied) == set(actions[2:])
    # The log follows the plan: the refusal first, then the rest as planned.
    assert lines[0].startswith("not done, SetCondition(node='gpu-0'")
    assert "409 Conflict" in lines[0]
    assert lines[1:] == [str(action) for action in actions[2:]]


def test_a_refused_action_of_no_node_stops_nothing_else(monkeypatch):
    actions = [DeleteCheck("check-0"), DeleteCheck("check-1")]
    _plan(monkeypatch, actions)
    cluster = FakeCluster(refuse={actions[0]})
    lines = gate_loop.run_round(cluster, "health-gate")
    assert cluster.applied == [actions[1]]
    assert lines[0].startswith("not done, DeleteCheck(job='check-0')")
    assert lines[1] == str(actions[1])


def test_one_nodes_actions_run_in_their_order(monkeypatch):
    actions = [SetCondition("gpu-0", "True", "ChecksPassed", "passed"), SetTaints("gpu-0", "7", (), "checks passed")]
    _plan(monkeypatch, actions)
    cluster = FakeCluster()
    assert gate_loop.run_round(cluster, "health-gate") == [str(action) for action in actions]
    assert cluster.applied == actions


class Rounds:
    """What ``serve`` did, round by round: the rounds' plans come from ``plans`` (an exception is
    raised), the last ends the loop; every wait for a change is recorded and says nothing changed."""

    def __init__(self, monkeypatch, plans, settings=None, settings_by_round=()):
        self.plans, self.waits, self.followed, self.stop = list(plans), [], [], threading.Event()
        self.cluster = FakeCluster()
        self.cluster.last_settings = settings
        self.settings_by_round = list(settings_by_round)

        def plan(*args):
            if self.settings_by_round:
                self.cluster.last_settings = self.settings_by_round.pop(0)
            step = self.plans.pop(0)
            if not self.plans:
                self.stop.set()
            if isinstance(step, Exception):
                raise step
            return step

        monkeypatch.setattr(gate_loop, "plan", plan)

    def wait(self, timeout):
        self.waits.append(timeout)
        return False

    def follow(self, open_watch):
        stopped = threading.Event()
        self.followed.append((open_watch, stopped))
        return stopped

    def serve(self):
        gate_loop.serve(self.cluster, "health-gate", self, self.stop, karpenter_watches=lambda: ["nodeclaims", "events"],
                        interval=0.01, idle=60)
        return self


@pytest.mark.parametrize(("plans", "waits"), [
    ([[DeleteCheck("check-0")], [DeleteCheck("check-1")], []], []),  # each did something: no wait for a change
    ([[], [], []], [60, 60]),  # nothing to do: each next round waits for a change, or a minute
    ([RuntimeError("503"), []], []),  # failed: tried again after the interval
    ([SettingsError("bad"), []], [60]),  # bad settings: read again once the ConfigMap changes
])
def test_the_next_round_waits_for_a_change_only_after_one_with_nothing_to_do(plans, waits, monkeypatch):
    assert Rounds(monkeypatch, plans).serve().waits == waits


def test_the_karpenter_watches_start_once_the_settings_name_a_karpenter_pool(monkeypatch):
    rounds = Rounds(monkeypatch, [[], [], []], settings=SimpleNamespace(karpenter_pools=("gpu-spot",))).serve()
    assert [(watch, stopped.is_set()) for watch, stopped in rounds.followed] == [("nodeclaims", False), ("events", False)]
    assert Rounds(monkeypatch, [[], []], settings=SimpleNamespace(karpenter_pools=())).serve().followed == []


def test_the_karpenter_watches_stop_once_the_settings_drop_the_karpenter_pools_and_start_again_with_them(monkeypatch):
    """The ClusterRole allows NodeClaims only while the settings name a Karpenter pool: a watch kept
    after the pools went would be refused every few seconds for as long as the gate runs."""
    with_pools, without = SimpleNamespace(karpenter_pools=("gpu-spot",)), SimpleNamespace(karpenter_pools=())
    rounds = Rounds(monkeypatch, [[]] * 5, settings_by_round=[with_pools, without, without, None, with_pools]).serve()
    assert [(watch, stopped.is_set()) for watch, stopped in rounds.followed] == [
        ("nodeclaims", True), ("events", True),  # the pools dropped: stopped
        ("nodeclaims", False), ("events", False),  # named again: followed anew (unreadable settings change nothing)
    ]


def test_a_stop_ends_the_loop_before_the_next_round(monkeypatch):
    rounds = Rounds(monkeypatch, [[], [], []])
    rounds.stop.set()
    rounds.serve()
    assert len(rounds.plans) == 3


def test_the_watch_client_keeps_a_connection_for_every_watch_the_gate_holds_open():
    """``WATCHES`` sizes the watch client's pool; each open watch holds one of its connections."""
    from kubernetes.client import ApiClient

    from eks_gpu_training.healthgate.gate_api import Cluster

    watching = Cluster(ApiClient(), "health-gate")
    assert len(watching.watches("health-gate")) + len(watching.karpenter_watches()) == gate_loop.WATCHES
