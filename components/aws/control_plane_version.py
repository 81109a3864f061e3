"""The version a created cluster's control plane is sent: ``cluster.kubernetesVersion``, unless EKS
has upgraded the running cluster past it itself.

A cluster whose upgrade policy is ``STANDARD`` is upgraded by EKS, control plane only, when its
version's standard support ends (docs.aws.amazon.com/eks/latest/userguide/view-upgrade-policy.html).
Its stack file still names the old version, and an upgraded cluster cannot go back ("you can't
downgrade to a previous version": docs.aws.amazon.com/eks/latest/userguide/update-cluster.html). Sending the stack file's version would be a
downgrade, and the roll check would refuse every `pulumi up` for it. Sending the running version is
no better while Pulumi's state holds the old one: the provider would call UpdateClusterVersion for
the version the cluster already runs, which EKS refuses as no update. So the stack sends no version
at all and warns: ``version`` of ``aws_eks_cluster`` is optional and computed
(hashicorp/terraform-provider-aws ``internal/service/eks/cluster.go``), so an absent one keeps what
runs, with or without a refresh. Node groups and add-ons stay on ``cluster.kubernetesVersion``
(a node may run up to three minors behind its control plane: kubernetes.io/releases/version-skew-policy)
until the stack file names the new version, whose node-group roll is then an ordinary one.
"""

from __future__ import annotations

from typing import Optional

UPGRADED_BY_EKS = "STANDARD"
"""The ``supportType`` with which EKS upgrades the control plane at the end of standard support."""


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def upgraded_by_eks(configured: str, running: Optional[str], support_type: str) -> bool:
    """Whether EKS moved the running control plane past ``configured`` itself: a ``STANDARD``
    cluster running a newer version than the stack file names."""
    return support_type == UPGRADED_BY_EKS and running is not None and _minor(running) > _minor(configured)


def control_plane_version(configured: str, running: Optional[str], support_type: str) -> Optional[str]:
    """The version the control plane is sent: none when EKS upgraded it (``upgraded_by_eks``), so it
    stays where it runs, else ``configured``."""
    return None if upgraded_by_eks(configured, running, support_type) else configured


def upgraded_by_eks_warning(configured: str, running: str) -> str:
    """What `pulumi up` says while the stack file lags a control plane EKS upgraded."""
    return (
        f"cluster.kubernetesVersion is {configured}, but EKS upgraded the running control plane to {running} at the end "
        f"of standard support (cluster.supportType STANDARD). The stack sends the control plane no version, so it stays "
        f"at {running} (EKS cannot downgrade one), and keeps the node groups and EKS add-ons at {configured}. Set cluster.kubernetesVersion: "
        f"'{running}' in the stack file; the next `pulumi up` then moves them to {running}, which rolls the GPU pools "
        "(refused for a running pool without forceUpdateVersion)"
    )
