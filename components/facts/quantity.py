"""Kubernetes resource quantities ("400", "500m", "4Ti", "1.5Gi"): parse, compare and write them.

Quota arithmetic compares what training apps request with what a namespace may use, so it needs
exact numbers; ``Fraction`` keeps ``0.1`` and ``100m`` equal without float rounding.
"""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIXES = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

QUANTITY_PATTERN = r"^(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$"
"""Non-negative Kubernetes quantities (apimachinery ``resource.Quantity`` without a sign)."""

_QUANTITY = re.compile(QUANTITY_PATTERN)
MIB = 2**20


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity; ``ValueError`` for text that is not one."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 400, 500m, 4Ti, 1.5Gi)")
    number, suffix = Fraction(match.group(1)), match.group(3) or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


def cpu_quantity(millicores: int) -> str:
    """CPU in the shortest exact form: whole cores as ``"173"``, else ``"1500m"``."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def memory_quantity(mebibytes: int) -> str:
    """Memory in the largest binary unit that keeps it whole: ``"4Ti"``, ``"28Gi"``, ``"1887437Mi"``."""
    for suffix, size in (("Ti", 2**20), ("Gi", 2**10)):
        if mebibytes and mebibytes % size == 0:
            return f"{mebibytes // size}{suffix}"
    return f"{mebibytes}Mi"
