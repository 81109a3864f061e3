"""What the local fleet applies on its manager: the same objects a manager stack makes, one kubeconfig
Secret and MultiKueueCluster per worker, the MultiKueueConfig listing them in order, the check."""

from __future__ import annotations

from eks_gpu_training.local.multikueue_wiring import manager_objects


def test_the_manager_gets_a_secret_and_a_cluster_per_worker_then_the_config_and_the_check():
    objects = manager_objects({"east": "kubeconfig-of-east", "west": "kubeconfig-of-west"})
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "multikueue-east"), ("Secret", "multikueue-west"), ("MultiKueueCluster", "east"), ("MultiKueueCluster", "west"),
        ("MultiKueueConfig", "eks-gpu-training-workers"), ("AdmissionCheck", "multikueue")]
    assert objects[0]["stringData"] == {"kubeconfig": "kubeconfig-of-east"}
    assert objects[0]["metadata"]["namespace"] == "kueue-system"
    assert objects[4]["spec"] == {"clusters": ["east", "west"]}
