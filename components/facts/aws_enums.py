"""AWS enumerations read from botocore's own service models.

Configuration is checked against the EC2 and EKS API models that ship with botocore, so the
set of valid instance types, AMI types, capacity types, taint effects and placement strategies is
exactly what the AWS API accepts for the installed botocore, never a list typed by hand here.

The models are read with botocore's own loader (its search path, ``AWS_DATA_PATH`` included, and
its choice of the latest API version), without a botocore session: a session imports botocore's
client machinery, which nothing here uses, and every render and check starts by reading these.

Each answer is also kept on disk, per botocore version, in
``$XDG_CACHE_HOME/eks-gpu-training/aws-models/`` (``~/.cache/...``): a later process reads the
answers it needs from there and loads neither botocore's loader nor a model (the 4 MB EC2 model
among them), work every render, check and program run would otherwise repeat. A botocore of another
version reads its own file, and with ``AWS_DATA_PATH`` set (models botocore's version does not
name) nothing is kept. Deleting the folder is always safe.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, cast

if TYPE_CHECKING:
    import botocore.loaders
    from botocore.model import ServiceModel
    from botocore.regions import EndpointResolver

MEMO_FORMAT = 1
"""Bumped whenever the kept answers' layout or meaning changes."""

_T = TypeVar("_T")


def memo_path() -> Optional[Path]:
    """The file the answers of the installed botocore are kept in; None when none is kept (``AWS_DATA_PATH`` set)."""
    if os.environ.get("AWS_DATA_PATH"):
        return None
    import botocore  # its package only: a version string, not the loader or the models

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eks-gpu-training" / "aws-models" / f"botocore-{botocore.__version__}.json"


@functools.cache
def _memo() -> dict[str, Any]:
    """The kept answers (empty when there is no file, or one of another format or unreadable)."""
    path = memo_path()
    try:
        kept = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return kept.get("answers", {}) if isinstance(kept, dict) and kept.get("format") == MEMO_FORMAT else {}


def _remembered(key: str, answer: Callable[[], _T]) -> _T:
    """The answer kept under ``key``, else ``answer()`` from the models, then kept (a JSON value)."""
    memo = _memo()
    if key not in memo:
        memo[key] = answer()
        path = memo_path()
        if path is not None:
            import tempfile

            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".answers-", delete=False) as stream:
                    json.dump({"format": MEMO_FORMAT, "answers": memo}, stream)
                os.replace(stream.name, path)
            except OSError:
                pass  # a read-only cache folder: the answers are read from the models next time too
    return cast(_T, memo[key])


@functools.cache
def _loader() -> botocore.loaders.Loader:
    import botocore.loaders

    class PlainJSONFileLoader(botocore.loaders.JSONFileLoader):
        """botocore's JSON file loader, parsing into plain dicts: its ``OrderedDict`` hook (dicts
        keep insertion order anyway) makes parsing the EC2 model, a 4 MB document, about twice as slow."""

        def _load_file(self, full_path: str, open_method: Any) -> Any:
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read().decode("utf-8"))

    loader = botocore.loaders.create_loader(os.environ.get("AWS_DATA_PATH"))
    loader.file_loader = PlainJSONFileLoader()
    return loader


@functools.cache
def _service_model(service: str) -> ServiceModel:
    """The latest API version's model of an AWS service, as ``botocore.session.get_service_model`` gives it."""
    from botocore.model import ServiceModel

    return ServiceModel(_loader().load_service_model(service, "service-2"), service_name=service)


@functools.cache
def _endpoint_resolver() -> EndpointResolver:
    """botocore's partitions and regions (``endpoints.json``), as a session resolves them."""
    from botocore.regions import EndpointResolver

    endpoints, path = _loader().load_data_with_path("endpoints")
    return EndpointResolver(endpoints, uses_builtin_data=_loader().is_builtin_path(path))


@functools.cache
def enum_values(service: str, shape: str) -> frozenset[str]:
    """The values of an enumeration shape of an AWS service model (``ec2``, ``InstanceType``)."""

    def answer() -> list[str]:
        from botocore.model import StringShape

        # An enumeration is a string shape in botocore's models.
        return sorted(cast(StringShape, _service_model(service).shape_for(shape)).enum)

    return frozenset(_remembered(f"enum {service} {shape}", answer))


_enum = enum_values


def ec2_instance_types() -> frozenset[str]:
    """Every EC2 instance type name (EC2 model, shape ``InstanceType``)."""
    return _enum("ec2", "InstanceType")


def ec2_placement_strategies() -> frozenset[str]:
    """Placement group strategies (EC2 model, shape ``PlacementStrategy``)."""
    return _enum("ec2", "PlacementStrategy")


def eks_ami_types() -> frozenset[str]:
    """Managed node group AMI types (EKS model, shape ``AMITypes``)."""
    return _enum("eks", "AMITypes")


def eks_capacity_types() -> frozenset[str]:
    """Managed node group capacity types (EKS model, shape ``CapacityTypes``)."""
    return _enum("eks", "CapacityTypes")


def eks_taint_effects() -> frozenset[str]:
    """Managed node group taint effects (EKS model, shape ``TaintEffect``)."""
    return _enum("eks", "TaintEffect")


def eks_log_types() -> frozenset[str]:
    """Control-plane log types (EKS model, shape ``LogType``)."""
    return _enum("eks", "LogType")


def eks_repair_actions() -> frozenset[str]:
    """Node auto repair actions (EKS model, shape ``RepairAction``)."""
    return _enum("eks", "RepairAction")


def eks_support_types() -> frozenset[str]:
    """Cluster upgrade policies (EKS model, shape ``SupportType``: ``UpgradePolicyRequest.supportType``)."""
    return _enum("eks", "SupportType")


def eks_update_strategies() -> frozenset[str]:
    """Managed node group update strategies (EKS model, shape ``NodegroupUpdateStrategies``)."""
    return _enum("eks", "NodegroupUpdateStrategies")


@functools.cache
def aws_regions() -> frozenset[str]:
    """Regions botocore knows for EC2, across the commercial, China and GovCloud partitions."""

    def answer() -> list[str]:
        resolver = _endpoint_resolver()
        endpoint_prefix = _service_model("ec2").metadata.get("endpointPrefix", "ec2")
        return sorted(
            region
            for partition in resolver.get_available_partitions()
            for region in resolver.get_available_endpoints(endpoint_prefix, partition)
        )

    return frozenset(_remembered("regions", answer))


def partition_of(region: str) -> str:
    """The ARN partition of a region (``aws``, ``aws-cn``, ``aws-us-gov``), from botocore's endpoints data."""
    return _remembered(f"partition {region}", lambda: str(_endpoint_resolver().get_partition_for_region(region)))


def suggestion(value: str, allowed: frozenset[str]) -> str:
    """A ``did you mean`` hint for a near miss, or an empty string."""
    close = difflib.get_close_matches(value, sorted(allowed), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


@functools.cache
def string_limits(service: str, shape: str) -> tuple[int, int, str]:
    """``(min length, max length, pattern)`` of a string shape of an AWS service model, e.g. IAM's
    ``roleNameType`` (1, 64, ...) or ``tagValueType``."""

    def answer() -> list[Any]:
        metadata = _service_model(service).shape_for(shape).metadata
        return [metadata.get("min", 0), metadata["max"], metadata.get("pattern", "")]

    low, high, pattern = _remembered(f"string {service} {shape}", answer)
    return low, high, pattern


_UNICODE_CLASSES = {"L": "letters", "Z": "separators (spaces)", "N": "numbers"}


@functools.cache
def iam_tag_characters() -> tuple[frozenset[str], frozenset[str]]:
    """The characters IAM accepts in tag keys and values, from botocore's ``tagKeyType`` pattern
    ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]+``: ``(Unicode general categories, other characters)``. IAM's is
    the narrowest tag alphabet of the services the stack tags (EC2 and EKS model none), and the same
    tags go on IAM roles, so a comma that EC2 takes makes CreateRole fail."""
    _, _, pattern = string_limits("iam", "tagKeyType")
    body = pattern[pattern.index("[") + 1 : pattern.rindex("]")]
    categories = frozenset(c for c in _UNICODE_CLASSES if f"\\p{{{c}}}" in body)
    for c in categories:
        body = body.replace(f"\\p{{{c}}}", "")
    return categories, frozenset(body.replace("\\", ""))


def iam_tag_text_ok(text: str) -> bool:
    """Whether every character of ``text`` is one IAM accepts in a tag key or value."""
    import unicodedata

    categories, others = iam_tag_characters()
    return all(ch in others or unicodedata.category(ch)[0] in categories for ch in text)


def iam_tag_alphabet() -> str:
    """IAM's tag alphabet in words, for messages."""
    categories, others = iam_tag_characters()
    return ", ".join(_UNICODE_CLASSES[c] for c in sorted(categories)) + " and " + " ".join(sorted(others))
