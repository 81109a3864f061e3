"""Which build of an EKS add-on a stack installs: the one it pins, else the newest EKS offers for
the cluster's Kubernetes version, looked up at deployment (EKS ``DescribeAddonVersions`` through
``aws.eks.get_addon_version``, ``most_recent``). Add-on builds are made per Kubernetes minor, so a
build pinned once does not follow a version upgrade, while a looked-up one moves with it: a
``cluster.kubernetesVersion`` change updates every add-on in the same `pulumi up`."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_aws as aws

ADDON_VERSION_PATTERN = r"^v\d+\.\d+\.\d+-eksbuild\.\d+$"
"""An EKS add-on build, e.g. ``v1.12.4-eksbuild.1``."""


def addon_version(
    addon_name: str, kubernetes_version: pulumi.Input[str], pinned: Optional[str], parent: pulumi.Resource,
    region: Optional[pulumi.Input[str]] = None,
) -> pulumi.Input[str]:
    """``pinned`` when set, else the newest build of ``addon_name`` for ``kubernetes_version`` in
    ``region`` (the cluster's; EKS publishes add-on builds per region)."""
    if pinned is not None:
        return pinned
    return aws.eks.get_addon_version_output(
        addon_name=addon_name,
        kubernetes_version=kubernetes_version,
        most_recent=True,
        region=region,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version
