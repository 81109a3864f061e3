"""A ValidatingAdmissionPolicy evaluated offline with cel-python, the way the API server does."""

from __future__ import annotations

import celpy
from celpy import celtypes


class Policy:
    """A ValidatingAdmissionPolicy evaluated the way the API server does: match conditions, then
    variables in order, then every validation; an evaluation error denies (failurePolicy Fail)."""

    def __init__(self, manifest):
        self.spec = manifest["spec"]
        self.env = celpy.Environment()

    def _eval(self, expression, activation):
        program = self.env.program(self.env.compile(expression))
        return program.evaluate(activation)

    def admit(self, req, old, new):
        """(applies, denial messages)."""
        base = {
            "request": celpy.json_to_cel(req),
            "object": celpy.json_to_cel(new) if new is not None else None,
            "oldObject": celpy.json_to_cel(old) if old is not None else None,
        }
        base = {k: v for k, v in base.items() if v is not None} | {
            k: celtypes.NullType() for k in ("object", "oldObject") if base.get(k) is None
        }
        if not all(self._eval(c["expression"], base) == celtypes.BoolType(True) for c in self.spec.get("matchConditions", [])):
            return False, []
        variables = {}
        for variable in self.spec["variables"]:
            value = self._eval(variable["expression"], {**base, "variables": celtypes.MapType(variables)})
            variables[celtypes.StringType(variable["name"])] = value
        activation = {**base, "variables": celtypes.MapType(variables)}
        denied = []
        for validation in self.spec["validations"]:
            try:
                result = self._eval(validation["expression"], activation)
            except Exception:  # noqa: BLE001 - evaluation error: failurePolicy Fail denies
                result = None
            if result != celtypes.BoolType(True):
                denied.append(validation["message"])
        return True, denied
