"""Where the cluster's monitoring runs: the one namespace whose pods may scrape the controllers'
metrics (the Kueue, JobSet and Kubeflow Trainer namespaces' NetworkPolicies)."""

from __future__ import annotations

from pydantic import Field

from .base import _DNS_LABEL, _Model


class MonitoringConfig(_Model):
    """The cluster's monitoring, as the controllers' NetworkPolicies see it."""

    namespace: str = Field(default="monitoring", pattern=_DNS_LABEL)
    """The namespace whose pods (Prometheus, an agent) may reach the Kueue, JobSet and Trainer controllers' metrics port; no other pod may. Default: `monitoring`."""
