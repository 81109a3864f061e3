"""The Kubernetes minor versions EKS runs that this library supports, and what each one needs.

Dates are the EKS Kubernetes release calendar's
(docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html): the release on EKS, the end of
standard support (after which EKS charges for extended support) and the end of extended support
(after which EKS upgrades the control plane itself), as endoflife.date/amazon-eks tabulates that
calendar. EKS publishes no Amazon Linux 2 AMI from 1.33 on (EKS user guide, "Review release notes
for Kubernetes versions", Kubernetes 1.33). A minor without a recorded EKS release is one
this library accepts for clusters that already run it, not one it ships as the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Optional


@dataclass(frozen=True)
class EksKubernetesVersion:
    """One Kubernetes minor on EKS."""

    released: Optional[date]
    """Release on EKS; None when not recorded from the calendar."""
    end_of_standard_support: Optional[date]
    """Last day of standard support."""
    needs: str
    """What a cluster of this minor needs from the stack (AMIs, node OS)."""


_AL2023_ONLY = (
    "AL2023 or Bottlerocket node AMIs: EKS publishes no Amazon Linux 2 AMI from 1.33 on "
    "(AL2 EKS AMIs ended on 2025-11-26); AL2023_x86_64_NVIDIA for GPU pools"
)

EKS_KUBERNETES_VERSIONS: dict[str, EksKubernetesVersion] = {
    "1.32": EksKubernetesVersion(date(2025, 1, 25), date(2026, 3, 23), "the last minor with AL2 AMIs; this stack refuses AL2 anyway (end of support)"),
    "1.33": EksKubernetesVersion(date(2025, 5, 28), date(2026, 7, 29), _AL2023_ONLY),
    "1.34": EksKubernetesVersion(date(2025, 10, 6), date(2026, 12, 2), _AL2023_ONLY),
    "1.35": EksKubernetesVersion(
        date(2026, 1, 28),
        date(2027, 3, 27),
        _AL2023_ONLY + "; cgroup v2 nodes (the 1.35 kubelet refuses to start on cgroup v1, its "
        "failCgroupV1 now on by default: Kubernetes v1.35 release notes; AL2023 and Bottlerocket use cgroup v2)",
    ),
    "1.36": EksKubernetesVersion(None, None, _AL2023_ONLY + "; no NVIDIA AL2023 AMI release for 1.36 is cited here, so it is not the default"),
}
"""Every supported minor, oldest first."""

DEFAULT_KUBERNETES_VERSION = "1.35"
"""The newest minor EKS has released with NVIDIA AL2023 AMIs that this library cites; a created
cluster gets it unless the stack sets ``cluster.kubernetesVersion``. ``EKS_KUBERNETES_VERSIONS``
holds each minor's release and end of standard support."""


def version_table() -> str:
    """The table of docs/operations.md, "Kubernetes versions" (markdown)."""
    rows = ["| minor | on EKS since | standard support ends | needs |", "|---|---|---|---|"]
    for minor, row in EKS_KUBERNETES_VERSIONS.items():
        label = f"{minor} (default)" if minor == DEFAULT_KUBERNETES_VERSION else minor
        rows.append(f"| {label} | {row.released or 'not recorded'} | {row.end_of_standard_support or 'not recorded'} | {row.needs} |")
    return "\n".join(rows)
