"""The Go components only the cluster tier runs, from its catalogue (``tests/cluster/go/catalogue.json``),
built by the package's builder into the same cache as the control plane."""

from __future__ import annotations

from pathlib import Path

from eks_gpu_training.local import build as builds

CATALOGUE = Path(__file__).resolve().parents[1] / "cluster" / "go" / "catalogue.json"
TEST_TOOLS = builds.load_catalogue(CATALOGUE)["test-tools"]
DISTRIBUTION, PULUMI_YAML, PULUMI_LANGUAGE_NODEJS, PULUMI_NODEJS_CODEGEN = TEST_TOOLS
"""The OCI registry; the YAML and Node.js language hosts of the plugin package's programs, and the
older CLI that generates the package's Node.js SDK."""
