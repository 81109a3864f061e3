"""Teams sharing the GPU fleet: each a Kueue ClusterQueue of its own in one cohort, with a nominal GPU
quota per pool, limits on what it borrows and lends, and a weight for fair sharing."""

from __future__ import annotations

import re
import zlib
from typing import Annotated, Optional

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from ..facts.iam_principals import iam_principal
from .base import _DNS_LABEL, _Model
from .problems import Problem

TEAM_COHORT = "gpu-teams"
"""The Kueue cohort every team's ClusterQueue joins: unused quota of one team is lent to the others."""

TEAM_WEIGHT_MAX = 1000
"""Largest fair-sharing weight a team may have."""

TEAM_GID_MIN, TEAM_GID_MAX = 10000, 2_000_000_000
"""IDs a team's containers may run as: above the IDs images and distributions give their own users
and groups (below 10000 by convention), within the 31 bits every filesystem and runtime accepts."""
TEAM_GID_DEFAULT_BASE, TEAM_GID_DEFAULT_SPAN = 100_000, 900_000
"""A team without a `gid` gets ``base + crc32(name) % span``: stable while teams are added, removed
or reordered, since the files it owns keep that ID."""

TEAM_DATA_ROOT = "teams"
"""Each team's data lives under ``teams/<team>/``: its FSx directory and its prefix of every S3 bucket."""

TEAM_GROUP_PREFIX = "eks-gpu-training-team-"
"""Kubernetes groups named so are the stack's own, one per team (``team_group``): a member's access
entry carries its team's, and no member may name one."""

KUBERNETES_GROUP = re.compile(r"^(?!system:)(?!arn:)[A-Za-z0-9][A-Za-z0-9:._@=+/-]{0,252}$")
"""A Kubernetes group a member may name: no ``system:`` group (the API server's own, such as
``system:authenticated``, which every caller has), nothing read as an ARN, no spaces."""


def team_gid(team: "TeamConfig") -> int:
    """The user and group ID of the team's containers and files: ``gid``, else derived from its name."""
    if team.gid is not None:
        return team.gid
    return TEAM_GID_DEFAULT_BASE + zlib.crc32(team.name.encode()) % TEAM_GID_DEFAULT_SPAN


def team_data_path(team: str) -> str:
    """The team's directory of the file system and its key prefix in each bucket (no slashes around)."""
    return f"{TEAM_DATA_ROOT}/{team}"


def team_id_problems(teams: "list[TeamConfig]") -> list[Problem]:
    """Two teams with one ID would share each other's files: each ID (``team_gid``) is one team's."""
    problems: list[Problem] = []
    owner: dict[int, str] = {}
    for i, team in enumerate(teams):
        gid = team_gid(team)
        if gid in owner:
            problems.append(Problem(
                f"scheduling.teams[{i}].gid",
                f"{gid} is team {owner[gid]}'s too{' (derived from the names)' if team.gid is None else ''}: "
                f"its files would be this team's; set a gid of its own, {TEAM_GID_MIN}-{TEAM_GID_MAX}"))
        owner.setdefault(gid, team.name)
    return problems


def team_group(team: str) -> str:
    """The Kubernetes group of a team's IAM members: their access entries carry it, and the team's
    RoleBindings bind it."""
    return f"{TEAM_GROUP_PREFIX}{team}"


def is_principal_arn(member: str) -> bool:
    """Whether a member is an IAM principal (an ARN) rather than a Kubernetes group."""
    return member.startswith("arn:")


def _member(member: str) -> str:
    if is_principal_arn(member):
        if iam_principal(member) is None:
            raise PydanticCustomError("member", f"'{member}' is not an IAM role or user ARN (arn:<partition>:iam::<account>:role/<name> or :user/<name>)")
    elif not KUBERNETES_GROUP.match(member) or member.startswith(TEAM_GROUP_PREFIX):
        raise PydanticCustomError(
            "member", f"'{member}' is neither an IAM role/user ARN nor a Kubernetes group of your own (no spaces, not a "
            f"'system:' group, not an '{TEAM_GROUP_PREFIX}' group: those are the stack's)")
    return member


Member = Annotated[str, AfterValidator(_member)]
"""A team member: an IAM role or user ARN, or a Kubernetes group."""


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
    priority_classes: Optional[list[str]] = None
    """PriorityClasses its pods may use, among `scheduling.priorityClasses`; a pod of any other class, the `system-` ones included, is refused in its namespaces (a ResourceQuota allowing none of them). Default: every class of `scheduling.priorityClasses`."""
    members: list[Member] = []
    """Who submits and watches the team's jobs, in its namespaces only (the `eks-gpu-training-team-member` role): IAM role/user ARNs, each given an EKS access entry with the team's group, and/or Kubernetes groups, bound as they are. Default: none (admins only)."""
    gid: Optional[int] = Field(default=None, ge=TEAM_GID_MIN, le=TEAM_GID_MAX)
    """User and group ID its training containers run as (never root), owner of its FSx directory `/teams/<name>`; one per team. Changing it leaves the files owned by the old ID. Default: derived from the name (`team_gid`)."""
