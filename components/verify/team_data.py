"""With ``--stack`` and teams: each team's data is its own, as far as the cluster shows it.

Per team (``team-data/<team>``): with FSx, each of its namespaces holds the claim of its team's
directory (``fsx-lustre-<team>``), Bound to the volume the stack made for it, and no claim of the
whole file system (the one a namespace had before teams: while it exists, a job there still reaches
every team's files); and its running training pods run as the team's user and group, never root.
Its S3 prefix is IAM's to hold (the team's role), which the cluster does not show.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..config import GpuTrainingPlatformArgs
from ..config.team_settings import team_gid
from ..workloads.training_storage import FSX_CLAIM, claim_name, persistent_volume_name
from ..workloads.training_spec import COMPONENT_LABEL, TRAINING_COMPONENT
from .objects import labels, name, namespace
from .rows import Row, failed, listing, passed, skipped
from .snapshot import Snapshot

FINISHED_PHASES = ("Succeeded", "Failed")


def _runs_as(pod: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    context = (pod.get("spec") or {}).get("securityContext") or {}
    return context.get("runAsUser"), context.get("runAsGroup"), context.get("runAsNonRoot")


def team_data(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """One row per team: its claims and its training pods' user."""
    if not args.scheduling.teams:
        return [skipped("team-data", "scheduling.teams is empty in the stack.")]
    rows = []
    fsx = args.storage.fsx.enabled
    for team in args.scheduling.teams:
        item, gid = f"team-data/{team.name}", team_gid(team)
        problems = []
        for ns in team.namespaces:
            claims = {name(c): c for c in snapshot.persistent_volume_claims if namespace(c) == ns}
            if not fsx:
                continue
            own = claims.get(claim_name(team.name))
            volume = persistent_volume_name(ns, team.name)
            if own is None or (own.get("status") or {}).get("phase") != "Bound" or (own.get("spec") or {}).get("volumeName") != volume:
                problems.append(f"{ns}/{claim_name(team.name)} is not Bound to {volume}")
            if FSX_CLAIM in claims:
                problems.append(f"{ns}/{FSX_CLAIM} (the whole file system) still exists")
        pods = [
            p for p in snapshot.pods
            if namespace(p) in team.namespaces and labels(p).get(COMPONENT_LABEL) == TRAINING_COMPONENT
            and (p.get("status") or {}).get("phase") not in FINISHED_PHASES
        ]
        strays = [f"{namespace(p)}/{name(p)}" for p in pods if _runs_as(p) != (gid, gid, True)]
        if strays:
            problems.append(f"training pods not run as the team's user and group {gid}: {listing(strays)}")
        if problems:
            rows.append(failed(
                item, "; ".join(problems) + ".",
                "run `pulumi up` (TrainingStorage makes the team's claim and removes the whole file system's once no pod "
                "uses it); resubmit training jobs from the library's templates, which run a team's pods as its user and group.",
            ))
        else:
            claims_said = f"{', '.join(f'{ns}/{claim_name(team.name)}' for ns in team.namespaces)} Bound to the team's directory; " if fsx else ""
            rows.append(passed(item, f"{claims_said}{len(pods)} running training pods run as {gid}:{gid}, non-root."))
    return rows
