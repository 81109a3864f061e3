"""EKS add-on configuration values against the schema the add-on publishes.

EKS refuses an add-on whose ``configurationValues`` do not meet the add-on version's configuration
schema (``aws eks describe-addon-configuration``); offline, the schema is the one the package ships,
generated from the add-on's upstream source (the node monitoring agent's
``charts/configuration.schema.json`` at its release tag, ``offline.agent_data``).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterator, Optional

import jsonschema

from ..agent_data import AGENT_VERSION, configuration_schema
from ..render.markers import is_placeholder

ADDON_TYPE = "aws:eks/addon:Addon"
SCHEMA_FILE = "configuration.schema.json"
_VERSION = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+)(?:-eksbuild\.\d+)?$")


@functools.cache
def _validator(addon: str, version: Optional[str]) -> tuple[Optional[jsonschema.protocols.Validator], str]:
    schema, reason = configuration_schema(addon, version)
    if schema is None:
        return None, reason
    return jsonschema.validators.validator_for(schema)(schema), ""


def check_addon(resource: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``("fail" | "skip", line)`` for an EKS add-on's configuration values."""
    if resource["type"] != ADDON_TYPE:
        return
    inputs = resource.get("inputs") or {}
    addon, configuration = inputs.get("addonName"), inputs.get("configurationValues")
    what = f"{ADDON_TYPE} {resource['name']} ({addon})"
    if not configuration:
        return
    if not isinstance(configuration, str) or is_placeholder(configuration):
        yield "skip", f"{what}: configuration values are known only at deployment"
        return
    try:
        values = json.loads(configuration)
    except json.JSONDecodeError as not_json:
        yield "fail", f"{what}: configurationValues is not JSON: {not_json}"
        return
    # An add-on version known only at deployment (EKS picks the build for the cluster's Kubernetes
    # version) is checked against the schema the package ships.
    version = inputs.get("addonVersion")
    match = _VERSION.match(version) if isinstance(version, str) else None
    validator, reason = _validator(str(addon), match.group("version") if match else None)
    if validator is None:
        yield "skip", f"{what}: configuration values not checked: {reason}"
        return
    for error in sorted(validator.iter_errors(values), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(map(str, error.absolute_path)) or "(top level)"
        yield "fail", f"{what}: configurationValues.{where}: {error.message} ({addon} {AGENT_VERSION} {SCHEMA_FILE})"
