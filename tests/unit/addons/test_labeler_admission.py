"""The admission policy that holds the topology labeler to its own node's topology labels: its
manifests against the Kubernetes OpenAPI schema. What the policy allows and denies is the API
server's verdict, in the cluster tier (``tests/cluster/test_admission_policies.py``)."""

from __future__ import annotations

import kubernetes_validate
import pytest

from eks_gpu_training.addons import topology_labeler as tl
from eks_gpu_training.config import SUPPORTED_KUBERNETES_VERSIONS


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_policy_and_its_binding_pass_the_kubernetes_schema(version):
    for manifest in (tl.node_policy_manifest(), tl.node_policy_binding_manifest()):
        assert kubernetes_validate.validate(manifest, version, strict=True) == version
    assert tl.node_policy_binding_manifest()["spec"] == {"policyName": "topology-labeler", "validationActions": ["Deny"]}
