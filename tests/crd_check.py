"""Check a custom resource against its CRD the way the API server does on create.

The API server applies the schema's defaults, then validates the object against the
``openAPIV3Schema`` (types, enums, patterns, bounds, required fields) and evaluates every
``x-kubernetes-validations`` CEL rule on the value it sits on. ``jsonschema`` covers the first part
and ignores the CEL rules, so this module evaluates them too, with cel-python plus the two
Kubernetes CEL library functions the Karpenter CRDs call (``split``, ``find``).

Transition rules (those that read ``oldSelf``) are only evaluated on update; on create, which is
what Pulumi does first, the API server skips them, and so does this check: they are returned as
skipped so a test can name them.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes


def crd_schema(path: Path) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the served version of a CRD file."""
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served") and v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def _split(value: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(value).split(str(separator))])


def _find(value: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    match = re.search(str(pattern), str(value))
    return celtypes.StringType(match.group(0) if match else "")


KUBERNETES_CEL_FUNCTIONS = {"split": _split, "find": _find}
"""Kubernetes CEL library functions (strings and regex extensions) used by the Karpenter CRDs."""


def plain_numbers(value: Any) -> Any:
    """Integral floats as ints: Pulumi hands numbers back as doubles, JSON (and CEL) keeps 1 an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_numbers(v) for v in value]
    return value


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """The value with the schema's defaults filled in, as the API server stores it."""
    if isinstance(value, dict):
        result = dict(value)
        for key, sub in schema.get("properties", {}).items():
            if key not in result and "default" in sub:
                result[key] = copy.deepcopy(sub["default"])
            if key in result:
                result[key] = apply_defaults(sub, result[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in result:
                if key not in schema.get("properties", {}):
                    result[key] = apply_defaults(extra, result[key])
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


@dataclass
class CrdReport:
    """What checking one object found."""

    schema_errors: list[str] = field(default_factory=list)
    cel_failures: list[str] = field(default_factory=list)
    cel_evaluated: list[str] = field(default_factory=list)
    cel_skipped: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.schema_errors + self.cel_failures


class CrdChecker:
    """Validates objects of one CRD."""

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema
        self.validator = jsonschema.Draft7Validator(schema)
        self.environment = celpy.Environment()
        self._programs: dict[str, Any] = {}

    def _program(self, rule: str):
        if rule not in self._programs:
            self._programs[rule] = self.environment.program(self.environment.compile(rule), functions=KUBERNETES_CEL_FUNCTIONS)
        return self._programs[rule]

    def check(self, obj: dict[str, Any]) -> CrdReport:
        report = CrdReport()
        stored = apply_defaults(self.schema, plain_numbers(obj))
        for error in self.validator.iter_errors(stored):
            location = "/".join(str(p) for p in error.absolute_path)
            report.schema_errors.append(f"{location}: {error.message}")
        self._cel(self.schema, stored, "", report)
        return report

    def _cel(self, schema: dict[str, Any], value: Any, path: str, report: CrdReport) -> None:
        for validation in schema.get("x-kubernetes-validations", []):
            rule = validation["rule"]
            where = f"{path or '/'}: {rule}"
            if "oldSelf" in rule:
                report.cel_skipped.append(where)
                continue
            result = self._program(rule).evaluate({"self": celpy.json_to_cel(value)})
            report.cel_evaluated.append(where)
            if result is not True and result != celtypes.BoolType(True):
                report.cel_failures.append(f"{path or '/'}: {validation.get('message', rule)} ({result!r})")
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            for key, item in value.items():
                if key in properties:
                    self._cel(properties[key], item, f"{path}/{key}", report)
                elif isinstance(schema.get("additionalProperties"), dict):
                    self._cel(schema["additionalProperties"], item, f"{path}/{key}", report)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                self._cel(schema["items"], item, f"{path}/{index}", report)


def unknown_values_keys(values: Any, chart_defaults: Any, free_form: set[str], path: str = "") -> list[str]:
    """Keys of Helm ``values`` that the chart's values.yaml does not have.

    Below a key whose chart default is a non-empty map, every key must exist in it; below an empty
    map, a list or a scalar default (``resources: {}``), the chart takes whatever is given. Paths in
    ``free_form`` are maps of the user's own keys although the chart ships a default entry
    (``nodeSelector``).
    """
    if not isinstance(values, dict) or path in free_form:
        return []
    if not isinstance(chart_defaults, dict) or not chart_defaults:
        return []
    unknown = []
    for key, value in values.items():
        key_path = f"{path}.{key}" if path else key
        if key not in chart_defaults:
            unknown.append(key_path)
        else:
            unknown.extend(unknown_values_keys(value, chart_defaults[key], free_form, key_path))
    return unknown
