"""Which build of an EKS add-on a stack installs: the one it pins, else EKS's default build for the
cluster's Kubernetes version, looked up at deployment (EKS ``DescribeAddonVersions`` through
``aws.eks.get_addon_version``).

The default, not the newest: EKS publishes new builds of an add-on for a Kubernetes minor at any
time, so the newest build moved under every `pulumi up` and rolled CoreDNS, the Pod Identity agent,
the FSx CSI driver and the node monitoring agent during unrelated changes. The default build is the
one DescribeAddonVersions marks ``defaultVersion`` for that minor (botocore eks ``Compatibility``;
the one EKS installs when none is named), which is what pulumi-aws's look-up returns without
``most_recent`` (its doc: "Determines if the most recent or default version of the addon should be
returned"). Add-on builds are made per Kubernetes minor, so a pinned build does not follow a
version upgrade, while a looked-up one moves with it: a ``cluster.kubernetesVersion`` change
updates every unpinned add-on in the same `pulumi up`. EKS may still move its default for a minor;
a stack that must not move at all pins its builds.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_aws as aws

NEWEST_BUILD = False
"""``most_recent`` of the look-up: False asks for EKS's default build of the Kubernetes minor, True
for the newest (see the module docstring for why not)."""


def addon_version(
    addon_name: str, kubernetes_version: pulumi.Input[str], pinned: Optional[str], parent: pulumi.Resource,
    region: Optional[pulumi.Input[str]] = None,
) -> pulumi.Input[str]:
    """``pinned`` when set, else EKS's default build of ``addon_name`` for ``kubernetes_version`` in
    ``region`` (the cluster's; EKS publishes add-on builds per region)."""
    if pinned is not None:
        return pinned
    return aws.eks.get_addon_version_output(
        addon_name=addon_name,
        kubernetes_version=kubernetes_version,
        most_recent=NEWEST_BUILD,
        region=region,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    ).version
