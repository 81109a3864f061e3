"""The security scan's configuration: checkov's Kubernetes checks, offline, every skip explained."""

from __future__ import annotations

import re

import yaml

from harness import PROJECT_ROOT

CHECKOV_CONFIG = PROJECT_ROOT / ".checkov.yaml"


def skipped_checks_with_reasons(text: str) -> dict[str, str]:
    """Each ``skip-check`` entry with the comment on its line (empty when it has none)."""
    listed = yaml.safe_load(text).get("skip-check") or []
    reasons = {}
    for check in listed:
        line = next((l for l in text.splitlines() if re.match(rf"^\s*-\s*{re.escape(check)}\b", l)), "")
        reasons[check] = line.partition("#")[2].strip()
    return reasons


def test_every_skipped_check_says_why_it_does_not_apply():
    reasons = skipped_checks_with_reasons(CHECKOV_CONFIG.read_text())
    assert [check for check, reason in reasons.items() if len(reason.split()) < 3] == []


def test_the_rule_catches_a_skip_without_a_reason():
    text = "skip-check:\n  - CKV_K8S_8  # a node daemon whose health the kubelet sees anyway\n  - CKV_K8S_9\n"
    assert skipped_checks_with_reasons(text) == {
        "CKV_K8S_8": "a node daemon whose health the kubelet sees anyway",
        "CKV_K8S_9": "",
    }


def test_the_scan_runs_kubernetes_checks_offline():
    config = yaml.safe_load(CHECKOV_CONFIG.read_text())
    assert config["framework"] == ["kubernetes"]
    assert config["skip-download"] is True


def test_the_scanner_version_is_pinned():
    requirements = (PROJECT_ROOT / ".ci" / "scan-requirements.txt").read_text()
    assert re.search(r"^checkov==\d+\.\d+\.\d+$", requirements, re.M)
