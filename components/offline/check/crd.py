"""A custom resource against its CustomResourceDefinition, the way the API server takes it on create.

The API server fills in the schema's defaults, validates the object against the
``openAPIV3Schema`` (types, enums, patterns, bounds, required fields) and evaluates every
``x-kubernetes-validations`` CEL rule on the value it sits on. JSON schema covers the first part;
the CEL rules run with cel-python plus the two Kubernetes CEL library functions the Karpenter CRDs
call (``split``, ``find``). Transition rules (those that read ``oldSelf``) apply only on update, so
they are left out, and said so.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import celpy
from celpy import celtypes
from celpy.evaluation import CELFunction


def _split(value: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(value).split(str(separator))])


def _find(value: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    match = re.search(str(pattern), str(value))
    return celtypes.StringType(match.group(0) if match else "")


KUBERNETES_CEL_FUNCTIONS: dict[str, CELFunction] = {"split": _split, "find": _find}
"""Kubernetes CEL library functions (strings and regex extensions) used by the Karpenter CRDs."""


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """The value with the schema's defaults filled in, as the API server stores it (so a field that
    is required but defaulted may be left out)."""
    if isinstance(value, dict):
        result = dict(value)
        properties = schema.get("properties", {})
        for key, sub in properties.items():
            if key not in result and "default" in sub:
                result[key] = copy.deepcopy(sub["default"])
            if key in result:
                result[key] = apply_defaults(sub, result[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in result:
                if key not in properties:
                    result[key] = apply_defaults(extra, result[key])
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def strict_schema(schema: Any) -> Any:
    """A CRD ``openAPIV3Schema`` as a JSON schema that, like ``kubectl``'s strict field validation,
    refuses fields the CRD does not declare; ``nullable`` and ``x-kubernetes-int-or-string`` spelled
    out in JSON-schema terms."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict_schema(value) for key, value in schema.items() if key != "properties"}
    if "properties" in schema:
        result["properties"] = {name: strict_schema(sub) for name, sub in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            result["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in schema:
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable") and "type" in schema:
        result["type"] = [schema["type"], "null"]
    if isinstance(schema.get("pattern"), str):
        result["pattern"] = python_pattern(schema["pattern"])
    return result


GO_INLINE_FLAGS = re.compile(r"^\^\(\?([ims]+)\)")
"""A Go (RE2) pattern's flags right after its anchor, ``^(?i)...`` (Kueue's AdmissionCheck and
MultiKueueCluster CRDs); Python's ``re`` takes global flags only at the very start."""


def python_pattern(pattern: str) -> str:
    """A CRD's Go pattern as Python's ``re`` reads it the same: leading inline flags moved before the anchor."""
    return GO_INLINE_FLAGS.sub(lambda m: f"(?{m.group(1)})^", pattern)


@dataclass
class CelOutcome:
    """What evaluating a schema's CEL rules on a value found (paths like ``/spec/template``)."""

    failures: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    excused: list[str] = field(default_factory=list)
    """Failed rules whose value holds a placeholder: they cannot be judged before deployment."""


RESULTS_KEPT = 4096
"""Results a ``CelRules`` remembers, by rule and value, before it starts afresh."""


def _value_key(value: Any) -> str | None:
    """The value as canonical JSON, which keys its rules' results; None when it is not JSON (a
    timestamp, keys of mixed types): its rules are then evaluated each time."""
    try:
        return json.dumps(value, sort_keys=True)
    except TypeError:
        return None


class CelRules:
    """Evaluates ``x-kubernetes-validations`` rules, compiling each rule once and evaluating it once
    per value: a rule reads only ``self`` (transition rules are left out), so its result on an equal
    value is the same. cel-python interprets a rule by walking its parse tree, and Karpenter's rule
    pairing each of an EC2NodeClass's network interfaces with every other takes over half a second
    on a p5's 32; a stack's pools, and the tests' objects, repeat such values."""

    def __init__(self, undecidable: Callable[[Any], bool] = lambda value: False):
        self._environment = celpy.Environment()
        self._programs: dict[str, Any] = {}
        self._results: dict[tuple[str, str], Any] = {}
        self._undecidable = undecidable

    def _program(self, rule: str):
        if rule not in self._programs:
            self._programs[rule] = self._environment.program(
                self._environment.compile(rule), functions=KUBERNETES_CEL_FUNCTIONS
            )
        return self._programs[rule]

    def _result(self, rule: str, value: Any, value_key: str | None) -> Any:
        if value_key is None:
            return self._evaluated(rule, value)
        key = (rule, value_key)
        if key not in self._results:
            if len(self._results) >= RESULTS_KEPT:
                self._results.clear()
            self._results[key] = self._evaluated(rule, value)
        return self._results[key]

    def _evaluated(self, rule: str, value: Any) -> Any:
        try:
            return self._program(rule).evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError as error:
            # A rule that reads a field the object lacks is an error, and the API server refuses
            # the object for it (Kueue's flavor rule ``self.nodeLabels.size() >= 1`` without nodeLabels).
            return error

    def evaluate(self, schema: dict[str, Any], value: Any, path: str = "", outcome: CelOutcome | None = None) -> CelOutcome:
        """Every rule of ``schema`` and its sub-schemas on ``value`` (defaults already applied)."""
        outcome = outcome if outcome is not None else CelOutcome()
        validations = schema.get("x-kubernetes-validations", [])
        value_key = _value_key(value) if validations else None
        for validation in validations:
            rule = validation["rule"]
            where = f"{path or '/'}: {rule}"
            if "oldSelf" in rule:
                outcome.skipped.append(where)
                continue
            result = self._result(rule, value, value_key)
            outcome.evaluated.append(where)
            if result is not True and result != celtypes.BoolType(True):
                failure = f"{path or '/'}: {validation.get('message', rule)} ({result!r})"
                (outcome.excused if self._undecidable(value) else outcome.failures).append(failure)
        if isinstance(value, dict):
            properties = schema.get("properties", {})
            for key, item in value.items():
                if key in properties:
                    self.evaluate(properties[key], item, f"{path}/{key}", outcome)
                elif isinstance(schema.get("additionalProperties"), dict):
                    self.evaluate(schema["additionalProperties"], item, f"{path}/{key}", outcome)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                self.evaluate(schema["items"], item, f"{path}/{index}", outcome)
        return outcome
