"""Kubernetes objects against their schemas: built-in kinds against the Kubernetes OpenAPI schema at
the stack's version (kubernetes-validate's strict schemas: an unknown field is an error), custom
resources against their CustomResourceDefinition (``crd``): defaults applied, the
``openAPIV3Schema`` made strict the same way (a field the CRD does not declare is an error unless
it preserves unknown fields), and the CRD's CEL rules.

CRDs come from the render itself: its ``CustomResourceDefinition`` manifests, among them the ones
the stack's charts install (Karpenter's karpenter-crd chart, Kueue's chart templates).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

import jsonschema
from kubernetes_validate import utils as kubernetes_validate
from referencing import Registry, Resource

from ...facts import yaml_io
from ..render.markers import is_placeholder
from .crd import CelRules, apply_defaults, strict_schema

OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
MAX_ERRORS_PER_OBJECT = 10
"""Beyond this many errors in one object, the rest are summed up in one line."""


def group_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> (``apps``, ``v1``); ``v1`` -> (``""``, ``v1``)."""
    group, _, version = api_version.rpartition("/")
    return group, version


def is_builtin_group(group: str) -> bool:
    """Groups the Kubernetes API itself serves: the core group, dot-less groups (``apps``, ``batch``)
    and ``*.k8s.io`` groups. ``*.x-k8s.io`` and other domains are custom resources."""
    return "." not in group or group.endswith(".k8s.io")


def describe(obj: dict[str, Any]) -> str:
    """``DaemonSet kube-system/gpu-labeler``."""
    metadata = obj.get("metadata") or {}
    name = "/".join(str(p) for p in (metadata.get("namespace"), metadata.get("name")) if p)
    return f"{obj.get('kind')} {name}"


def _path(error: jsonschema.ValidationError) -> str:
    parts = []
    for part in error.absolute_path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


def _messages(errors: Iterable[jsonschema.ValidationError]) -> list[str]:
    """One message per schema error, leaving out type errors on a placeholder (a value that only
    exists after deployment has no type yet)."""
    found = []
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        if is_placeholder(error.instance):
            continue
        found.append(f"{_path(error)}: {error.message}")
    if len(found) > MAX_ERRORS_PER_OBJECT:
        found = found[:MAX_ERRORS_PER_OBJECT] + [f"... and {len(found) - MAX_ERRORS_PER_OBJECT} more errors"]
    return found


class KubernetesSchemas:
    """The strict OpenAPI schemas of one Kubernetes version, as kubernetes-validate ships them."""

    def __init__(self, kubernetes_version: str):
        wanted = kubernetes_validate.major_minor(kubernetes_version.lstrip("v"))
        available = [v for v in kubernetes_validate.all_versions() if _key(kubernetes_validate.major_minor(v)) <= _key(wanted)]
        if not available or _key(wanted) > _key(kubernetes_validate.major_minor(kubernetes_validate.latest_version())):
            raise ValueError(
                f"kubernetes-validate has no schemas for Kubernetes {wanted} "
                f"(it has {kubernetes_validate.all_versions()[0]} to {kubernetes_validate.latest_version()})"
            )
        self.version = kubernetes_validate.major_minor(available[-1])
        self._folder = f"kubernetes-json-schema/v{available[-1]}-local-strict"
        definitions = self._load("_definitions.json")
        self._registry = Resource.from_contents(definitions) @ Registry()
        # Cached per instance: a cache on the method would keep every instance's schemas alive.
        self._validator = functools.cache(self._new_validator)

    def _load(self, filename: str) -> Any:
        return kubernetes_validate.schema_contents(f"{self._folder}/{filename}", self.version)

    def _new_validator(self, api_version: str, kind: str) -> Optional[jsonschema.Draft202012Validator]:
        # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1.
        api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        try:
            schema = self._load(f"{kind.lower()}-{api}.json")
        except FileNotFoundError:
            return None
        return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ self._registry)

    def knows(self, api_version: str, kind: str) -> bool:
        return self._validator(api_version, kind) is not None

    def errors(self, obj: dict[str, Any]) -> list[str]:
        """Schema errors of a built-in object (``knows`` it first)."""
        validator = self._validator(obj["apiVersion"], obj["kind"])
        assert validator is not None  # noqa: S101 - callers ask `knows` first
        return _messages(validator.iter_errors(obj))

    @functools.cached_property
    def _object_meta(self) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator({"$ref": OBJECT_META}, registry=self._registry)

    def metadata_errors(self, metadata: Any) -> list[str]:
        """Errors of an object's ``metadata`` against ObjectMeta (for custom resources, whose CRD
        schema says only ``type: object``)."""
        return [f"metadata.{m}" for m in _messages(self._object_meta.iter_errors(metadata))]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _holds_placeholder(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_placeholder(v) for v in value)
    return is_placeholder(value)


class CustomResourceSchemas:
    """CustomResourceDefinitions by group and kind."""

    def __init__(self) -> None:
        self._crds: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        self._rules = CelRules(undecidable=_holds_placeholder)
        # Cached per instance, as KubernetesSchemas's.
        self._validator = functools.cache(self._new_validator)

    def add(self, crd: dict[str, Any], source: str) -> None:
        spec = crd.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        if spec.get("group") and kind:
            self._crds[(spec["group"], kind)] = (crd, source)

    def add_files(self, paths: Iterable[Path]) -> None:
        for path in paths:
            text = path.read_text()
            if "CustomResourceDefinition" not in text:
                continue
            for document in yaml_io.load_all(text):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    self.add(document, str(path))

    def knows(self, group: str, kind: str) -> bool:
        return (group, kind) in self._crds

    def _schema(self, group: str, kind: str, version: str) -> Optional[dict[str, Any]]:
        crd, _ = self._crds[(group, kind)]
        for entry in crd["spec"].get("versions") or []:
            if entry.get("name") == version and entry.get("served", True):
                return (entry.get("schema") or {}).get("openAPIV3Schema") or {}
        return None

    def _new_validator(self, group: str, kind: str, version: str) -> jsonschema.Draft202012Validator:
        schema = strict_schema(self._schema(group, kind, version))
        # Every object has these, whether or not its CRD's schema spells them out.
        for field, type_ in (("apiVersion", "string"), ("kind", "string"), ("metadata", "object")):
            schema.setdefault("properties", {}).setdefault(field, {"type": type_})
        return jsonschema.Draft202012Validator(schema)

    def errors(self, obj: dict[str, Any]) -> list[str]:
        group, version = group_version(obj["apiVersion"])
        crd, source = self._crds[(group, obj["kind"])]
        schema = self._schema(group, obj["kind"], version)
        if schema is None:
            served = [v.get("name") for v in crd["spec"].get("versions") or [] if v.get("served", True)]
            return [f"apiVersion: {obj['apiVersion']} is not served by the CRD ({source}); served: {', '.join(served)}"]
        validator = self._validator(group, obj["kind"], version)
        stored = apply_defaults(schema, obj)
        problems = _messages(validator.iter_errors(stored))
        # A rule that fails on a value holding a placeholder cannot be judged before deployment.
        problems += [f"CEL rule at {failure}" for failure in self._rules.evaluate(schema, stored).failures]
        if crd["spec"].get("scope") == "Cluster" and (obj.get("metadata") or {}).get("namespace"):
            problems.append(f"metadata.namespace: {obj['kind']} is cluster-scoped; it takes no namespace")
        return problems


def check_manifests(
    manifests: Iterable[tuple[str, dict[str, Any]]],
    kubernetes_version: str,
    crds: CustomResourceSchemas,
    reference_note: str,
) -> Iterator[tuple[str, str]]:
    """``("fail" | "skip", line)`` for each problem or unchecked object among ``(file, object)`` pairs."""
    try:
        schemas = KubernetesSchemas(kubernetes_version)
    except ValueError as error:
        yield "fail", f"Kubernetes {kubernetes_version}: {error}"
        return
    for filename, obj in manifests:
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            yield "fail", f"{filename}: not a Kubernetes object (no apiVersion/kind)"
            continue
        what = f"{filename}: {describe(obj)}"
        group, _ = group_version(obj["apiVersion"])
        if crds.knows(group, obj["kind"]):
            problems = crds.errors(obj) + schemas.metadata_errors(obj.get("metadata") or {})
        elif schemas.knows(obj["apiVersion"], obj["kind"]):
            problems = schemas.errors(obj)
        elif is_builtin_group(group):
            problems = [f"{obj['apiVersion']} {obj['kind']} is not a kind of Kubernetes {schemas.version}"]
        else:
            yield "skip", f"{what}: no CRD schema for {obj['apiVersion']} {obj['kind']} ({reference_note})"
            continue
        for problem in problems:
            yield "fail", f"{what}: {problem}"
