"""An add-on's namespace and its Helm release in it: the one recipe the GPU Operator, the EFA device
plugin, Kueue, JobSet, Trainer and Karpenter are installed with. Both are children of the add-on's component,
so they take its Kubernetes provider from its ``opts``."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import pulumi
import pulumi_kubernetes as k8s

AddonNamespace = Union[k8s.core.v1.Namespace, k8s.core.v1.NamespacePatch]
"""The namespace an add-on creates (or, retained, applies)."""


def addon_namespace(component: pulumi.Resource, name: str, *, namespace: str, labels: Mapping[str, str],
                    ready: Sequence[pulumi.Resource], retained: bool = False) -> AddonNamespace:
    """Namespace ``{name}-namespace``, waiting for ``ready`` (the cluster, its system nodes).

    ``retained``: it outlives its removal from the stack, and is a ``NamespacePatch``. A
    ``Namespace`` resource is created with a create call, which the API server answers AlreadyExists
    (pulumi-kubernetes 4.29 and later create with client-side create unless the provider sets
    ``upsertExistingObjects``: provider/pkg/await/await.go, ``Creation``); a ``NamespacePatch`` is
    always a server-side apply, which creates the namespace when it is missing and takes a retained
    one over, labels included (same await.go branch: ``kinds.IsPatchResource``)."""
    if retained:
        return k8s.core.v1.NamespacePatch(
            f"{name}-namespace", metadata={"name": namespace, "labels": dict(labels)},
            opts=pulumi.ResourceOptions(parent=component, depends_on=list(ready), retain_on_delete=True))
    return k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": namespace, "labels": dict(labels)},
                                 opts=pulumi.ResourceOptions(parent=component, depends_on=list(ready)))


def addon_release(
    component: pulumi.Resource, name: str, *, release_name: str, chart: Mapping[str, Any], values: Any, timeout: int,
    ready: Sequence[pulumi.Resource], namespace: Union[str, AddonNamespace], retained: bool = False,
    after: Sequence[pulumi.Resource] = (), role: str = "release", skip_crds: Optional[bool] = None,
    create_namespace: Optional[bool] = False,
) -> k8s.helm.v3.Release:
    """The atomic release ``{name}-{role}`` of ``chart`` (``release_chart``) in ``namespace`` (one
    that exists, by name, or the ``addon_namespace``), waiting for ``ready``, the namespace and
    ``after``; ``retained``: it outlives its removal from the stack. ``create_namespace`` None leaves
    the input unset, as Karpenter's releases in ``kube-system`` have always had it: an input that
    appears is a diff, and the next ``up`` would upgrade the release for nothing."""
    created = [] if isinstance(namespace, str) else [namespace]
    return k8s.helm.v3.Release(
        f"{name}-{role}",
        name=release_name,
        **chart,
        namespace=namespace if isinstance(namespace, str) else namespace.metadata.name,
        create_namespace=create_namespace,
        skip_crds=skip_crds,
        values=values,
        atomic=True,
        cleanup_on_fail=True,
        timeout=timeout,
        opts=pulumi.ResourceOptions(parent=component, depends_on=[*ready, *created, *after],
                                    retain_on_delete=True if retained else None),
    )
