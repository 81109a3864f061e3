"""The registrations of every stack file, as plain JSON data: what a refactoring must leave as it is.

``tests/unit/platform/test_program_registration_snapshot.py`` compares each stack's run under the mock
engine with the committed ``tests/unit/platform/registration_snapshot.json``. After a change that
is meant to change what a stack registers, write the file again and review its diff::

    .venv/bin/python -m tests.support.registration_snapshot --write
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from tests.support.harness import PROJECT_ROOT, Graph, run_stack

SNAPSHOT = PROJECT_ROOT / "tests" / "unit" / "platform" / "registration_snapshot.json"
SNAPSHOT_STACKS = ("dev", "prod")
"""The stack files the snapshot holds."""

_SOURCE_TAG = re.compile(r"\bsrc-[0-9a-f]{16}\b")
"""The labeler image's tag, a hash of its build context (``aws.labeler_image.build_context_tag``):
it changes with every edit of the labeler's code, which is not a change of the graph's shape."""


def _normalised(value: Any) -> Any:
    if isinstance(value, str):
        return _SOURCE_TAG.sub("src-<build-context-hash>", value)
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalised(item) for item in value]
    return value


def registrations(graph: Graph) -> list[dict[str, Any]]:
    """Each registration's identity, inputs, parent, provider(s), dependencies and options, by URN."""
    rows = [
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "custom": r.custom,
            "remote": r.remote,
            "read": r.read,
            "parent": r.parent,
            "provider": r.provider,
            "providers": r.providers,
            "inputs": r.inputs,
            "dependencies": sorted(set(r.dependencies)),
            "propertyDependencies": {key: sorted(set(urns)) for key, urns in sorted(r.property_dependencies.items())},
            "ignoreChanges": r.ignore_changes,
            "protect": r.protect,
            "retainOnDelete": r.retain_on_delete,
            "deleteBeforeReplace": r.delete_before_replace,
            "replaceOnChanges": r.replace_on_changes,
            "importId": r.import_id,
            "aliases": sorted(r.aliases),
        }
        for r in graph.resources
    ]
    # Options left at their defaults are left out, to keep the file short.
    rows = [{key: value for key, value in row.items() if value or key in ("inputs", "custom")} for row in rows]
    return _normalised(sorted(rows, key=lambda row: row["urn"]))


def current() -> dict[str, list[dict[str, Any]]]:
    """Every snapshot stack run now, as the snapshot holds it (JSON round-tripped)."""
    result = {}
    for stack in SNAPSHOT_STACKS:
        graph = run_stack(stack)
        if graph.error is not None:
            raise graph.error
        result[stack] = registrations(graph)
    return json.loads(json.dumps(result, default=str))


def text(snapshot: dict[str, list[dict[str, Any]]]) -> str:
    """The file's text: one line per registration, so a diff names the registrations that changed."""
    stacks = [
        f"{json.dumps(stack)}: [\n" + ",\n".join(json.dumps(row, sort_keys=True) for row in rows) + "\n]"
        for stack, rows in sorted(snapshot.items())
    ]
    return "{\n" + ",\n".join(stacks) + "\n}\n"


def write(path: Path = SNAPSHOT) -> None:
    path.write_text(text(current()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SNAPSHOT.relative_to(PROJECT_ROOT)}")
    if parser.parse_args().write:
        write()
        print(f"wrote {SNAPSHOT.relative_to(PROJECT_ROOT)}")
    else:
        parser.print_help()
