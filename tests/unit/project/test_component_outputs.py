"""Every component declares what it hands out: each attribute it sets is annotated on the class
with a docstring (as pulumi-eks does), so editors and ``help()`` show it."""

from __future__ import annotations

import ast
import inspect

import pulumi
import pytest

import eks_gpu_training
from eks_gpu_training.config.documented import field_docstrings

COMPONENTS = sorted(
    (c for c in (getattr(eks_gpu_training, name) for name in eks_gpu_training.__all__) if isinstance(c, type) and issubclass(c, pulumi.ComponentResource)),
    key=lambda c: c.__name__,
)


def _assigned_attributes(component: type) -> set[str]:
    tree = ast.parse(inspect.getsource(component).lstrip())
    return {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
    }


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_attribute_a_component_sets_is_declared_with_a_docstring(component):
    documented = field_docstrings(component)
    assert sorted(_assigned_attributes(component) - set(documented)) == []
