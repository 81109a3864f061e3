"""Teams sharing the GPU fleet through one Kueue cohort (``scheduling.teams``): what each team may
use on each pool, the quotas of its ClusterQueue, the ResourceQuota of its namespaces, and the rules
that keep them admissible.

Who decides what (Kueue docs, "Cluster Queue": Cohort, BorrowingLimit, LendingLimit, Preemption):

- **nominal quota**: what a team is guaranteed on a pool. The teams' quotas on a pool sum to at most
  what the pool provides, so every team can have its own at once;
- **borrowing**: a team may use more than its own while other teams leave theirs idle, up to its
  borrowing limit; what it can borrow is what the others hold there (Kueue lends only nominal quota,
  never capacity no team holds), each up to its lending limit;
- **reclaim**: a team that needs its own GPUs back preempts the workloads borrowing them
  (``reclaimWithinCohort: Any``), fair sharing (use beyond quota over weight) choosing whose;
  within a team, priority decides (``withinClusterQueue: LowerPriority``);
- **hard cap**: each namespace's ResourceQuota allows what its team can reach at most, its quotas
  plus what it may borrow, so Kueue never admits a pod the quota would then refuse
  (kubernetes-sigs/kueue#1403).

CPU and memory follow the GPUs: a team's share of a pool's vCPUs and memory is its share of the
pool's GPUs (the pool's vCPUs and memory per GPU, rounded down).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from ..config import GpuTrainingPlatformArgs, Problem, TeamConfig, TeamQuotaConfig, TrainingNamespaceConfig
from ..facts.gpu_nodes import GPU_RESOURCE
from ..facts.quantity import cpu_quantity, memory_quantity
from .fleet_capacity import PoolCapacity, ResolvedQuota, fleet_capacity, resolve_quota
from .training_storage import stack_claims
from .team_access import member_problems


@dataclass(frozen=True)
class TeamPool:
    """A team's GPUs on one pool, every default filled in."""

    capacity: PoolCapacity
    """The pool."""
    gpus: int
    """Nominal quota."""
    borrowing_limit: Optional[int]
    """GPUs it may borrow beyond ``gpus``; None: whatever the others lend."""
    lending_limit: Optional[int]
    """GPUs of ``gpus`` it lends while idle; None: all of them."""
    reachable: int
    """The most it can use at once: ``gpus`` plus what it can borrow (its limit, and what the others lend)."""

    @property
    def lendable(self) -> int:
        return self.gpus if self.lending_limit is None else min(self.lending_limit, self.gpus)


def _configured(team: TeamConfig, pool: str) -> Optional[TeamQuotaConfig]:
    return next((q for q in team.quotas if q.pool == pool), None)


def team_pools(args: GpuTrainingPlatformArgs, team: TeamConfig) -> list[TeamPool]:
    """The team's GPUs on every pool of the fleet (a pool its quotas leave out: none of its own,
    borrowing what the others lend). Call it on arguments that passed ``validate_teams``."""
    result = []
    for capacity in fleet_capacity(args):
        name = capacity.pool.name
        own = _configured(team, name)
        gpus = own.gpus if own is not None else 0
        borrowing = own.borrowing_limit if own is not None else None
        lending = own.lending_limit if own is not None else None
        others = 0
        for other in args.scheduling.teams:
            quota = _configured(other, name) if other.name != team.name else None
            if quota is not None:
                others += quota.gpus if quota.lending_limit is None else min(quota.lending_limit, quota.gpus)
        borrowable = others if borrowing is None else min(borrowing, others)
        result.append(TeamPool(capacity, gpus, borrowing, lending, gpus + borrowable))
    return result


def _per_gpu(capacity: PoolCapacity) -> tuple[Fraction, Fraction]:
    """The pool's millicores and MiB per GPU."""
    if capacity.gpus == 0:
        return Fraction(0), Fraction(0)
    return (Fraction(1000 * capacity.nodes * capacity.vcpus_per_node, capacity.gpus),
            Fraction(capacity.nodes * capacity.memory_mib_per_node, capacity.gpus))


def gpu_share(capacity: PoolCapacity, gpus: int) -> dict[str, str]:
    """``gpus`` of the pool with their share of its CPU and memory, as quantities (rounded down)."""
    millicores, mebibytes = _per_gpu(capacity)
    return {"cpu": cpu_quantity(int(gpus * millicores)), "memory": memory_quantity(int(gpus * mebibytes)), GPU_RESOURCE: str(gpus)}


def team_of(args: GpuTrainingPlatformArgs, namespace: str) -> Optional[TeamConfig]:
    """The team a namespace belongs to, if any."""
    return next((t for t in args.scheduling.teams if namespace in t.namespaces), None)


def namespace_quota(namespace: TrainingNamespaceConfig, args: GpuTrainingPlatformArgs) -> ResolvedQuota:
    """The namespace's ResourceQuota: its team's reach (quotas plus what it may borrow, on every
    pool, with their CPU and memory) when it belongs to a team; else its own quota, defaults from the
    fleet (``resolve_quota``)."""
    team = team_of(args, namespace.name)
    if team is None:
        return resolve_quota(namespace.quota, args)
    pools = team_pools(args, team)
    millicores = sum(int(p.reachable * _per_gpu(p.capacity)[0]) for p in pools)
    mebibytes = sum(int(p.reachable * _per_gpu(p.capacity)[1]) for p in pools)
    return ResolvedQuota(
        gpus=sum(p.reachable for p in pools),
        cpu=cpu_quantity(millicores),
        memory=memory_quantity(mebibytes),
        persistent_volume_claims=namespace.quota.persistent_volume_claims + stack_claims(args),
    )


# --- rules ----------------------------------------------------------------------------------------


TEAM_SIZED = ("gpus", "cpu", "memory")
"""Quota keys a team's namespace takes from its team instead."""


def validate_teams(args: GpuTrainingPlatformArgs) -> list[Problem]:  # noqa: C901, PLR0915 - one independent check per team rule, each a row of the Refused-by table under this name
    """Teams that could not all be served: a team without a namespace or with one that is not a
    training namespace, a namespace of two teams or of none, a member of two teams or also an admin
    (``team_access.member_problems``), a quota on an unknown pool, quotas that sum beyond a pool,
    limits beyond what can be lent or borrowed."""
    scheduling = args.scheduling
    teams = scheduling.teams
    if not teams:
        return []
    problems = []
    if not args.kueue.enabled:
        problems.append(Problem("scheduling.teams", "needs kueue.enabled: true: Kueue's cohort is what lends one team's idle GPUs to another"))
    namespaces = [ns.name for ns in scheduling.namespaces]
    owner: dict[str, str] = {}
    names: dict[str, int] = {}
    capacities = fleet_capacity(args)
    fleet = {c.pool.name: c for c in capacities}
    for i, team in enumerate(teams):
        path = f"scheduling.teams[{i}]"
        if team.name in names:
            problems.append(Problem(f"{path}.name", f"'{team.name}' is used by scheduling.teams[{names[team.name]}] too"))
        names.setdefault(team.name, i)
        if not team.namespaces:
            problems.append(Problem(f"{path}.namespaces", f"is empty: team {team.name}'s jobs run in its namespaces; list at least one of scheduling.namespaces ({', '.join(namespaces) or 'none'})"))
        for j, namespace in enumerate(team.namespaces):
            if namespace not in namespaces:
                problems.append(Problem(f"{path}.namespaces[{j}]", f"'{namespace}' is not in scheduling.namespaces; allowed: {', '.join(namespaces) or 'none'}"))
            elif namespace in owner and owner[namespace] != team.name:
                problems.append(Problem(f"{path}.namespaces[{j}]", f"'{namespace}' belongs to team {owner[namespace]} already; a namespace has one team"))
            owner.setdefault(namespace, team.name)
        seen: dict[str, int] = {}
        for j, quota in enumerate(team.quotas):
            quota_path = f"{path}.quotas[{j}]"
            shared = [c.path for c in capacities if c.pool.name == quota.pool]
            if quota.pool not in fleet:
                problems.append(Problem(f"{quota_path}.pool", f"'{quota.pool}' is not the name of a GPU pool; allowed: {', '.join(fleet) or 'none'}"))
            elif len(shared) > 1:
                problems.append(Problem(f"{quota_path}.pool", f"'{quota.pool}' names {' and '.join(shared)}; rename one of them"))
            elif quota.pool in seen:
                problems.append(Problem(f"{quota_path}.pool", f"'{quota.pool}' is listed in {path}.quotas[{seen[quota.pool]}] too"))
            seen.setdefault(quota.pool, j)
            if quota.lending_limit is not None and quota.lending_limit > quota.gpus:
                problems.append(Problem(f"{quota_path}.lendingLimit", f"{quota.lending_limit} exceeds the team's own {quota.gpus} GPUs on the pool (gpus): a team lends only its quota"))
    for i, training in enumerate(scheduling.namespaces):
        if training.name not in owner:
            problems.append(Problem(f"scheduling.namespaces[{i}].name", f"'{training.name}' is in no team: with scheduling.teams every training namespace belongs to one, whose ClusterQueue admits its jobs"))
            continue
        for key in TEAM_SIZED:
            if getattr(training.quota, key) is not None:
                problems.append(Problem(f"scheduling.namespaces[{i}].quota.{key}", f"is sized from team {owner[training.name]}'s quotas plus its borrowing limits; remove it (or set the team's quotas)"))
    problems.extend(member_problems(args))
    if problems:
        return problems
    for name, capacity in fleet.items():
        quotas = [(i, j, q) for i, t in enumerate(teams) for j, q in enumerate(t.quotas) if q.pool == name]
        total = sum(q.gpus for _, _, q in quotas)
        if total > capacity.gpus:
            i, j, _ = quotas[-1]
            parts = " + ".join(f"{teams[a].name} {q.gpus}" for a, _, q in quotas)
            problems.append(Problem(f"scheduling.teams[{i}].quotas[{j}].gpus", f"the teams' quotas on {name} sum to {total} ({parts}), beyond the {capacity.gpus} GPUs it provides ({capacity}); every team must be able to have its own at once"))
        for i, j, quota in quotas:
            others = total - quota.gpus
            if quota.borrowing_limit is not None and quota.borrowing_limit > others:
                problems.append(Problem(f"scheduling.teams[{i}].quotas[{j}].borrowingLimit", f"{quota.borrowing_limit} exceeds the {others} GPUs the other teams hold on {name}: a team borrows only their quota"))
    return problems


def team_fit_problems(args: GpuTrainingPlatformArgs, namespace: str, pool: str, gpus: int, path: str, what: str) -> list[Problem]:
    """``gpus`` at once on ``pool`` for a job of ``namespace``, beyond what its team can reach
    there, would never be admitted."""
    team = team_of(args, namespace)
    if team is None:
        return []
    reach = next((p for p in team_pools(args, team) if p.capacity.pool.name == pool), None)
    if reach is None or gpus <= reach.reachable:
        return []
    borrowing = "what the others lend" if reach.borrowing_limit is None else f"a borrowing limit of {reach.borrowing_limit}"
    return [Problem(path, f"{what} needs {gpus} GPUs on {pool} at once, but team {team.name} reaches {reach.reachable} there "
                    f"(its quota {reach.gpus}, {borrowing}): it could never be admitted")]
