"""The health gate's image: built from its folder alone, on the labeler's base, with the labeler's
pins of the Kubernetes client and its dependencies (hashes included), and no AWS SDK."""

from __future__ import annotations

import re

from tests.support.harness import PROJECT_ROOT

GATE = PROJECT_ROOT / "components" / "healthgate"
LABELER = PROJECT_ROOT / "components" / "labeler"


def _blocks(path):
    """Each requirement of a hashed requirements file: its first line and its hashes."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in path.read_text().splitlines():
        if re.match(r"^[A-Za-z0-9_.-]+==", line):
            current = line.split(" ")[0]
            blocks[current] = []
        elif current and line.strip().startswith("--hash="):
            blocks[current].append(line.strip())
    return blocks


def test_every_pin_of_the_gate_is_the_labelers_with_the_same_hashes():
    gate, labeler = _blocks(GATE / "requirements.txt"), _blocks(LABELER / "requirements.txt")
    assert gate
    assert {pin: labeler.get(pin) for pin in gate} == gate


def test_the_gate_installs_the_kubernetes_client_and_no_aws_sdk():
    names = {pin.split("==")[0] for pin in _blocks(GATE / "requirements.txt")}
    assert "kubernetes" in names
    assert not names & {"boto3", "botocore", "s3transfer"}


def test_the_gate_image_has_the_labelers_base_by_tag_and_runs_as_a_non_root_user():
    gate, labeler = (GATE / "Dockerfile").read_text(), (LABELER / "Dockerfile").read_text()
    base = re.compile(r"^ARG PYTHON_IMAGE=(python:[\w.-]+)$", re.M)
    assert base.search(gate).group(1) == base.search(labeler).group(1)
    assert "USER 65532:65532" in gate
    assert 'ENTRYPOINT ["python", "-m", "healthgate"]' in gate
