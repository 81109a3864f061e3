"""Each GPU instance type's instance-store size (``facts/instance_store.py``), checked against
Karpenter's instance-type reference."""

from __future__ import annotations



from eks_gpu_training.facts.instance_store import LOCAL_NVME_GB, ephemeral_storage_request
from eks_gpu_training.facts.catalog import GPU_INSTANCE_TYPES


def test_every_catalog_type_has_its_instance_store_size():
    assert sorted(LOCAL_NVME_GB) == sorted(GPU_INSTANCE_TYPES)
    assert ephemeral_storage_request(["p5.48xlarge", "p4de.24xlarge"]) == "3725Gi"  # p4de's 8000 GB / 2
    assert ephemeral_storage_request(["m7i.large"]) is None


def test_instance_store_sizes_match_karpenters_instance_type_reference(instance_type_docs):
    docs = instance_type_docs
    for instance_type, size in LOCAL_NVME_GB.items():
        assert int(docs[instance_type]["karpenter.k8s.aws/instance-local-nvme"]) == size, instance_type
