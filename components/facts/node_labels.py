"""Which node labels a kubelet may set on its own Node object.

GPU pools hand their labels to the kubelet (``--node-labels``, which EKS managed node groups and
Karpenter's nodeadm user data both use). With the NodeRestriction admission plugin, which EKS runs, a
kubelet may set a label in the ``kubernetes.io`` or ``k8s.io`` namespaces (or their subdomains) only
when it is one of the labels below or lies in an allowed namespace; any other such label makes the
kubelet refuse to start, so the node never joins. Source: Kubernetes ``pkg/kubelet/apis/well_known_labels.go``
(``IsKubeletLabel``) and the NodeRestriction section of
kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#noderestriction.
"""

from __future__ import annotations

KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
})
"""Keys in the Kubernetes namespaces a kubelet may set on itself (``kubeletLabels``)."""

KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""Namespaces (and their subdomains) a kubelet may set labels in (``kubeletLabelNamespaces``)."""

_KUBERNETES_NAMESPACES = ("kubernetes.io", "k8s.io")


def _in(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def kubelet_may_set(key: str) -> bool:
    """Whether a kubelet may register its node with label ``key``."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if not any(_in(namespace, domain) for domain in _KUBERNETES_NAMESPACES):
        return True
    return key in KUBELET_LABELS or any(_in(namespace, allowed) for allowed in KUBELET_LABEL_NAMESPACES)
