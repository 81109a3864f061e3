"""The gate's round: each node's actions in order, stopping at the first the API server refuses;
the nodes' side by side; the log in the plan's order whatever order the writes finished in."""

from __future__ import annotations

import threading
import time

from eks_gpu_training.healthgate import gate_loop
from eks_gpu_training.healthgate.decide import CreateCheck, DeleteCheck, SetCondition, SetTaints


class Refused(Exception):
    pass


class FakeCluster:
    """Records the actions applied; refuses the ones named, and holds the first node's writes back
    a moment so the others finish first."""

    def __init__(self, refuse=()):
        self.refuse, self.applied, self.lock = set(refuse), [], threading.Lock()

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
