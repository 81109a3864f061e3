"""The controller namespaces' NetworkPolicies (``addons/controller_ingress.py``) on prod's cluster:
the API server takes each as the stack renders it. The local cluster has no CNI (KWOK's pods have no
network), so nothing enforces them here; on EKS the VPC CNI's network policy agent does
(docs/operations.md)."""

from __future__ import annotations

from eks_gpu_training.addons import controller_ingress as ci


def test_each_controller_namespace_holds_its_network_policy_as_rendered(prod_cluster):
    env = prod_cluster.env
    for namespace in ("kueue-system", "jobset-system", "kubeflow-system"):
        rendered = next(o for o in prod_cluster.cluster.platform.objects
                        if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == namespace)
        stored = env.get("networking.k8s.io/v1", "NetworkPolicy", ci.NAME, namespace)
        assert stored is not None, namespace
        assert stored["spec"] == rendered["spec"], namespace
