"""Check a custom resource against its CRD the way the API server does on create.

The API server applies the schema's defaults, then validates the object against the
``openAPIV3Schema`` (types, enums, patterns, bounds, required fields) and evaluates every
``x-kubernetes-validations`` CEL rule on the value it sits on. The defaults and the CEL rules come
from ``eks_gpu_training.offline.check.crd``, which the render check (``eks-gpu-training-check``) uses too; this
module keeps the JSON-schema part lenient (undeclared fields are the check's business).

Transition rules (those that read ``oldSelf``) are only evaluated on update; on create, which is
what Pulumi does first, the API server skips them, and so does this check: they are returned as
skipped so a test can name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from eks_gpu_training.facts import yaml_io
from eks_gpu_training.offline.check.crd import CelRules, apply_defaults


def crd_schema(path: Path) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the served version of a CRD file."""
    crd = yaml_io.load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served") and v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def plain_numbers(value: Any) -> Any:
    """Integral floats as ints: Pulumi hands numbers back as doubles, JSON (and CEL) keeps 1 an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_numbers(v) for v in value]
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
    """Validates objects of one CRD (the render check's CRD logic, ``eks_gpu_training.offline.check.crd``)."""

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema
        self.validator = jsonschema.Draft7Validator(schema)
        self.rules = CelRules()

    def check(self, obj: dict[str, Any]) -> CrdReport:
        report = CrdReport()
        stored = apply_defaults(self.schema, plain_numbers(obj))
        for error in self.validator.iter_errors(stored):
            location = "/".join(str(p) for p in error.absolute_path)
            report.schema_errors.append(f"{location}: {error.message}")
        outcome = self.rules.evaluate(self.schema, stored)
        report.cel_failures, report.cel_evaluated, report.cel_skipped = outcome.failures, outcome.evaluated, outcome.skipped
        return report
