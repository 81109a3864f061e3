"""The README's layer table is generated from the layer test's ``LAYERS`` (``tests/support/layer_table.py``):
one row per layer, bottom to top, each with what it holds, its components and its commands."""

from __future__ import annotations

import pytest

from tests.support.layer_table import BEGIN, END, README, assigned, holds, table, updated

WRITE = "python -m tests.support.layer_table --write"


def test_the_readmes_layer_table_is_the_generated_one():
    text = README.read_text()
    assert updated(text) == text, f"the README's layer table is stale: run {WRITE}"


def test_the_table_has_one_row_per_layer_bottom_to_top():
    rows = table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [f"components/{layer}/" for layer in assigned("LAYERS")]


@pytest.mark.parametrize("layer", assigned("LAYERS"))
def test_every_layer_says_what_it_holds_in_its_package_docstring(layer):
    title = holds(layer)
    assert 0 < len(title) <= 80, "start the layer's __init__ docstring with '<what it holds>: <details>'"


def test_a_stale_table_is_replaced_between_its_markers():
    stale = f"intro\n{BEGIN}\n| old |\n{END}\nafter\n"
    assert updated(stale) == f"intro\n{BEGIN}\n{table()}\n{END}\nafter\n"
