"""Both stack files register what the committed snapshot says: the same resources (type, name,
parent), with the same inputs, providers, dependencies and options. A change meant to change them
writes the snapshot again (``tests/support/registration_snapshot.py``) and has a change-table row."""

from __future__ import annotations

import json

import pytest

from tests.support.registration_snapshot import SNAPSHOT, SNAPSHOT_STACKS, registrations


@pytest.fixture(scope="module")
def committed():
    return json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("stack", SNAPSHOT_STACKS)
def test_stack_registers_what_the_committed_snapshot_holds(stack, committed, request):
    now = {row["urn"]: row for row in json.loads(json.dumps(registrations(request.getfixturevalue(f"{stack}_graph")), default=str))}
    before = {row["urn"]: row for row in committed[stack]}
    assert sorted(now.keys() - before.keys()) == [], "registered now, not in the snapshot"
    assert sorted(before.keys() - now.keys()) == [], "in the snapshot, no longer registered"
    changed = {urn: sorted(key for key in now[urn].keys() | before[urn].keys() if now[urn].get(key) != before[urn].get(key))
               for urn in now if now[urn] != before[urn]}
    assert changed == {}, "registrations whose fields changed (regenerate: python -m tests.support.registration_snapshot --write)"
