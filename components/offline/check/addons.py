"""EKS add-on configuration values against the schema the add-on publishes.

EKS refuses an add-on whose ``configurationValues`` do not meet the add-on version's configuration
schema (``aws eks describe-addon-configuration``); offline, the schema comes from the add-on's
upstream source in the reference folder (``<addon>-<version>/configuration.schema.json``, e.g. the
node monitoring agent's ``charts/configuration.schema.json`` at its release tag).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Iterator, Optional

import jsonschema

from ..render.markers import is_placeholder

ADDON_TYPE = "aws:eks/addon:Addon"
SCHEMA_FILE = "configuration.schema.json"
_VERSION = re.compile(r"^v?(?P<version>\d+\.\d+\.\d+)(?:-eksbuild\.\d+)?$")


def schema_path(reference: Path, addon: str, addon_version: Any) -> tuple[Optional[Path], str]:
    """The configuration schema of ``addon`` at ``addon_version`` (``v1.7.0-eksbuild.1``) in the
    reference folder, or why there is none. An add-on version known only at deployment (EKS picks
    the build for the cluster's Kubernetes version) is matched when the reference holds one version."""
    candidates = sorted(reference.glob(f"{addon}-*/{SCHEMA_FILE}"))
    match = _VERSION.match(addon_version) if isinstance(addon_version, str) else None
    if match:
        wanted = reference / f"{addon}-{match.group('version')}" / SCHEMA_FILE
        return (wanted, "") if wanted.is_file() else (None, f"no {addon} {match.group('version')} {SCHEMA_FILE} in {reference}")
    if len(candidates) == 1:
        return candidates[0], ""
    return None, f"add-on version {addon_version!r} is not known before deployment and {reference} holds {len(candidates)} schemas of {addon}"


@functools.cache
def _validator(path: Path) -> jsonschema.protocols.Validator:
    schema = json.loads(path.read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def check_addon(resource: dict[str, Any], reference: Optional[Path]) -> Iterator[tuple[str, str]]:
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
    except json.JSONDecodeError as error:
        yield "fail", f"{what}: configurationValues is not JSON: {error}"
        return
    if reference is None:
        yield "skip", f"{what}: configuration values not checked: the upstream reference folder is absent"
        return
    path, reason = schema_path(reference, str(addon), inputs.get("addonVersion"))
    if path is None:
        yield "skip", f"{what}: configuration values not checked: {reason}"
        return
    for error in sorted(_validator(path).iter_errors(values), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(map(str, error.absolute_path)) or "(top level)"
        yield "fail", f"{what}: configurationValues.{where}: {error.message} ({path.parent.name}/{SCHEMA_FILE})"
