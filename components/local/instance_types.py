"""What a node of an EC2 instance type reports to Kubernetes, as the package ships it.

Source: Karpenter's "Instance Types" reference (aws/karpenter-provider-aws v1.14.1,
website/content/en/v1.14/reference/instance-types.md), which lists for every type the labels
Karpenter gives its nodes and the allocatable resources of a node of that type: cpu and memory
after the EKS AMI's kube-reserved, system-reserved and eviction threshold, ``pods`` from the
type's ENI limits, ``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa`` as the device plugins report
them. ``scripts/generate_package_data.py`` reads it with ``parse_table`` into
``data/instance-types.json`` for every type the stacks can use (the GPU catalog's and the system
node group's); the local cluster's simulated nodes report exactly these numbers.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .errors import LocalError

TABLE = Path(__file__).parent / "data" / "instance-types.json"
"""The shipped table (package data), generated from the upstream reference."""

_HEADING = re.compile(r"^### `(?P<name>[^`]+)`\s*$")
_ROW = re.compile(r"^\s*\|(?P<key>[^|]+)\|(?P<value>[^|]*)\|\s*$")


@dataclass(frozen=True)
class InstanceTypeFacts:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    """Karpenter's well-known labels of the type (``karpenter.k8s.aws/instance-*``, arch, os)."""
    allocatable: dict[str, str] = field(default_factory=dict)
    """Resource name -> quantity, as the table writes them."""

    @property
    def vcpus(self) -> int:
        return int(self.labels["karpenter.k8s.aws/instance-cpu"])

    @property
    def memory_mib(self) -> int:
        return int(self.labels["karpenter.k8s.aws/instance-memory"])


class UnknownInstanceType(LocalError, KeyError):
    """An instance type the shipped table has no figures for, so no node of it can be simulated."""

    fix = "name an instance type the table lists, or regenerate it (scripts/generate_package_data.py)"


def parse_table(text: str) -> dict[str, InstanceTypeFacts]:
    """Every instance type of the upstream reference's Markdown ``text``."""
    types: dict[str, InstanceTypeFacts] = {}
    current: InstanceTypeFacts | None = None
    section = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = InstanceTypeFacts(heading["name"])
            types[current.name] = current
            section = None
            continue
        if current is None:
            continue
        if line.startswith("#### "):
            section = line[5:].strip().lower()
            continue
        row = _ROW.match(line)
        if not row or set(row["key"].strip()) <= {"-"} or row["key"].strip() in ("Label", "Resource"):
            continue
        key, value = row["key"].strip(), row["value"].strip()
        if section == "labels":
            current.labels[key] = value
        elif section == "resources":
            current.allocatable[key] = value
    return types


@lru_cache(maxsize=1)
def shipped_table() -> dict[str, InstanceTypeFacts]:
    """The table the package ships."""
    document = json.loads(TABLE.read_text())
    return {name: InstanceTypeFacts(name, facts["labels"], facts["allocatable"]) for name, facts in document["types"].items()}


def instance_type(name: str) -> InstanceTypeFacts:
    try:
        return shipped_table()[name]
    except KeyError:
        raise UnknownInstanceType(f"{name} is not among the instance types the package knows ({TABLE.name})") from None
