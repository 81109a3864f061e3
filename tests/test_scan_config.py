"""The security scan's configuration: checkov's Kubernetes checks, offline, every skip explained."""

from __future__ import annotations

import re

import pytest
import yaml

from harness import PROJECT_ROOT

CHECKOV_CONFIG = PROJECT_ROOT / ".checkov.yaml"
WORKLOADS_CONFIG = PROJECT_ROOT / ".checkov-workloads.yaml"
CONFIGS = pytest.mark.parametrize("config", [CHECKOV_CONFIG, WORKLOADS_CONFIG], ids=lambda p: p.name)


def skipped_checks_with_reasons(text: str) -> dict[str, str]:
    """Each ``skip-check`` entry with the comment on its line (empty when it has none)."""
    listed = yaml.safe_load(text).get("skip-check") or []
    reasons = {}
    for check in listed:
        line = next((l for l in text.splitlines() if re.match(rf"^\s*-\s*{re.escape(check)}\b", l)), "")
        reasons[check] = line.partition("#")[2].strip()
    return reasons


@CONFIGS
def test_every_skipped_check_says_why_it_does_not_apply(config):
    reasons = skipped_checks_with_reasons(config.read_text())
    assert [check for check, reason in reasons.items() if len(reason.split()) < 3] == []


def test_the_rule_catches_a_skip_without_a_reason():
    text = "skip-check:\n  - CKV_K8S_8  # a node daemon whose health the kubelet sees anyway\n  - CKV_K8S_9\n"
    assert skipped_checks_with_reasons(text) == {
        "CKV_K8S_8": "a node daemon whose health the kubelet sees anyway",
        "CKV_K8S_9": "",
    }


@CONFIGS
def test_the_scan_runs_kubernetes_checks_offline(config):
    settings = yaml.safe_load(config.read_text())
    assert settings["framework"] == ["kubernetes"]
    assert settings["skip-download"] is True


def test_training_workload_templates_are_left_to_their_own_scan():
    # The platform scan leaves out exactly the files the workload scan is given (.ci/run: job_*.yaml).
    (skipped,) = yaml.safe_load(CHECKOV_CONFIG.read_text())["skip-path"]
    assert re.search(skipped, "out/prod/manifests/job_training_rl-training.yaml")
    assert not re.search(skipped, "out/prod/manifests/daemonset_topology-labeler_topology-labeler.yaml")
    assert "job_*.yaml" in (PROJECT_ROOT / ".ci" / "run").read_text()


def test_the_scanner_version_is_pinned():
    requirements = (PROJECT_ROOT / ".ci" / "scan-requirements.txt").read_text()
    assert re.search(r"^checkov==\d+\.\d+\.\d+$", requirements, re.M)
