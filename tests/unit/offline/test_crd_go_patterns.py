"""A CRD's Go (RE2) pattern read by Python's ``re`` as the API server reads it: Kueue's AdmissionCheck
and MultiKueueCluster CRDs write ``^(?i)...``, which ``re`` refuses unless the flags come first."""

from __future__ import annotations

import re

from eks_gpu_training.offline.check.crd import python_pattern, strict_schema

KUEUE_NAME = "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"
"""The pattern of an AdmissionCheck's ``spec.parameters.kind`` (kueue.x-k8s.io v1beta2, Kueue 0.19.2)."""


def test_leading_inline_flags_move_before_the_anchor_and_keep_their_meaning():
    pattern = python_pattern(KUEUE_NAME)
    assert pattern == "(?i)^[a-z]([-a-z0-9]*[a-z0-9])?$"
    assert re.search(pattern, "MultiKueueConfig")
    assert not re.search(pattern, "1-config")


def test_a_pattern_without_inline_flags_is_left_as_it_is():
    assert python_pattern("^[a-z]+$") == "^[a-z]+$"
    assert strict_schema({"type": "string", "pattern": KUEUE_NAME})["pattern"] == "(?i)^[a-z]([-a-z0-9]*[a-z0-9])?$"
