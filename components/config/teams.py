"""Teams sharing the GPU fleet: each a Kueue ClusterQueue of its own in one cohort, with a nominal GPU
quota per pool, limits on what it borrows and lends, and a weight for fair sharing."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from .base import _DNS_LABEL, _Model

TEAM_COHORT = "gpu-teams"
"""The Kueue cohort every team's ClusterQueue joins: unused quota of one team is lent to the others."""

TEAM_WEIGHT_MAX = 1000
"""Largest fair-sharing weight a team may have."""


class TeamQuotaConfig(_Model):
    """A team's GPUs on one pool: its own, what it may borrow beyond them, what it lends while idle."""

    pool: str
    """The pool: a `gpuNodeGroups[].name` or `karpenter.gpuNodePools[].name` (required)."""
    gpus: int = Field(ge=0)
    """Nominal quota: GPUs the team is guaranteed on the pool; the teams' quotas on a pool sum to at most what it provides (required)."""
    borrowing_limit: Optional[int] = Field(default=None, ge=0)
    """GPUs the team may use beyond `gpus` on the pool while other teams leave theirs idle; at most what the other teams hold there. Default: all the others lend."""
    lending_limit: Optional[int] = Field(default=None, ge=0)
    """GPUs of `gpus` other teams may borrow while this team leaves them idle (reclaimed by preemption when it needs them); at most `gpus`. Default: all of them."""


class TeamConfig(_Model):
    """A team: its namespaces share one Kueue ClusterQueue with the team's quotas, in the cohort of all teams."""

    name: str = Field(pattern=_DNS_LABEL, max_length=63)
    """Team name, also its ClusterQueue's (required)."""
    namespaces: list[str] = []
    """Its training namespaces, among `scheduling.namespaces`; each belongs to one team, and its ResourceQuota is sized from the team's quotas plus borrowing limits (at least one)."""
    quotas: list[TeamQuotaConfig] = []
    """Its GPUs per pool; on a pool not listed it has no quota of its own and may borrow what the others lend. Default: none."""
    weight: float = Field(default=1.0, ge=0, le=TEAM_WEIGHT_MAX)
    """Fair-sharing weight: idle GPUs go to the team using the least of the fleet for its weight, and a team above its fair share is preempted first. Default: 1."""
