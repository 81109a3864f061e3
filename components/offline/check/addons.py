"""EKS add-on configuration values against the configuration schema the add-on publishes.

EKS refuses an add-on whose ``configurationValues`` do not match its schema (``aws eks
describe-addon-configuration``), and only when ``pulumi up`` creates it. The schemas here are the
unmodified upstream files in ``../shared/reference``; the add-on version EKS resolves at deployment
is unknown offline, so each add-on is checked against the version the reference holds, and the
line says which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Optional

from ..render.markers import is_placeholder

ADDON_SCHEMAS: dict[str, tuple[str, str]] = {
    "eks-node-monitoring-agent": ("1.7.0", "eks-node-monitoring-agent-1.7.0/configuration.schema.json"),
}
"""Add-on name -> (version, configuration schema under the reference folder)."""


def check_addon_configuration(resource: dict[str, Any], reference: Optional[Path]) -> Iterator[tuple[str, str]]:
    """("fail" | "skip", line) for an ``aws:eks/addon:Addon`` whose configuration this check knows."""
    if resource["type"] != "aws:eks/addon:Addon":
        return
    inputs = resource.get("inputs") or {}
    name, values = inputs.get("addonName"), inputs.get("configurationValues")
    if name not in ADDON_SCHEMAS or values is None:
        return
    version, schema_file = ADDON_SCHEMAS[name]
    where = f"{resource['type']} {resource['name']}: configurationValues"
    if reference is None or not (reference / schema_file).is_file():
        yield "skip", f"{where}: the {name} {version} configuration schema is not in the reference folder"
        return
    if is_placeholder(values):
        yield "skip", f"{where}: known only at deployment"
        return
    try:
        import jsonschema
    except ImportError:
        yield "skip", f"{where}: jsonschema is not installed (pip install 'eks-gpu-training[check]')"
        return
    schema = json.loads((reference / schema_file).read_text())
    for error in jsonschema.Draft7Validator(schema).iter_errors(json.loads(values)):
        path = ".".join(str(p) for p in error.absolute_path) or "(root)"
        yield "fail", f"{where}: {path}: {error.message} ({name} {version} configuration.schema.json)"
