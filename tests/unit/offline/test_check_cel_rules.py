"""A CRD's CEL rules evaluated once per rule and value (``CelRules``), each failure still reported at
every path it occurs at."""

from __future__ import annotations

import datetime

import pytest

from eks_gpu_training.offline.check import crd
from eks_gpu_training.offline.check.crd import CelRules

INTERFACES = {
    "type": "array",
    "items": {"type": "object"},
    "x-kubernetes-validations": [{"rule": "self.all(x, self.filter(y, x.index == y.index).size() == 1)",
                                  "message": "interface indexes must be unique"}],
}
SCHEMA = {"type": "object", "properties": {"primary": INTERFACES, "spare": INTERFACES}}


@pytest.fixture
def conversions(monkeypatch):
    """How many values were converted for an evaluation: one per rule actually run."""
    calls = []
    convert = crd.celpy.json_to_cel
    monkeypatch.setattr(crd.celpy, "json_to_cel", lambda value: calls.append(value) or convert(value))
    return calls


def test_a_rule_runs_once_on_equal_values_and_fails_at_each_path(conversions):
    repeated = [{"index": 0}, {"index": 0}]
    outcome = CelRules().evaluate(SCHEMA, {"primary": repeated, "spare": list(repeated)})
    assert len(conversions) == 1
    assert outcome.evaluated == [f"/{key}: {INTERFACES['x-kubernetes-validations'][0]['rule']}" for key in ("primary", "spare")]
    assert [failure.split(" (")[0] for failure in outcome.failures] == [
        "/primary: interface indexes must be unique", "/spare: interface indexes must be unique"]


def test_a_different_value_is_judged_on_its_own(conversions):
    rules = CelRules()
    assert rules.evaluate(SCHEMA, {"primary": [{"index": 0}, {"index": 0}]}).failures
    assert not rules.evaluate(SCHEMA, {"primary": [{"index": 0}, {"index": 1}]}).failures
    rules.evaluate(SCHEMA, {"primary": [{"index": 0}, {"index": 1.0}]})  # 1.0 is a double in CEL, not 1
    assert len(conversions) == 3


def test_a_value_json_cannot_key_is_evaluated_each_time(conversions):
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "has(self.start)"}]}
    rules = CelRules()
    for _ in range(2):
        assert rules.evaluate(schema, {"start": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), 1: "a"}).evaluated
    assert len(conversions) == 2
