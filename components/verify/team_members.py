"""With ``--stack`` and teams: each team's people reach its namespaces alone.

Read from the RBAC bindings (who is bound to what), never from what anyone may do: each of the
team's groups (its own ``eks-gpu-training-team-<team>``, which its IAM members' access entries carry,
and the Kubernetes groups it lists) is bound by the member RoleBinding in every team namespace, to
the member ClusterRole, and by no other binding anywhere: no RoleBinding in another namespace, no
ClusterRoleBinding. EKS access policies associated with an entry outside the stack are not visible
to the API server's RBAC objects; ``aws eks list-associated-access-policies`` shows them.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..config import GpuTrainingPlatformArgs
from ..workloads.team_access import TEAM_MEMBER_ROLE, member_groups
from .objects import name, namespace
from .rows import Row, failed, listing, passed, skipped
from .snapshot import Snapshot


def _groups(binding: Mapping[str, Any]) -> set[str]:
    return {s.get("name", "") for s in binding.get("subjects") or [] if s.get("kind") == "Group"}


def _member_binding(binding: Mapping[str, Any]) -> bool:
    ref = binding.get("roleRef") or {}
    return name(binding) == TEAM_MEMBER_ROLE and ref.get("kind") == "ClusterRole" and ref.get("name") == TEAM_MEMBER_ROLE


def team_members(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """Per team (``team-members/<team>``): its groups bound to the member role in each of its
    namespaces, and by nothing else in the cluster."""
    if not args.scheduling.teams:
        return [skipped("team-members", "scheduling.teams is empty in the stack.")]
    rows = []
    for team in args.scheduling.teams:
        item = f"team-members/{team.name}"
        groups = member_groups(team)
        problems = []
        for home in team.namespaces:
            binding = next((b for b in snapshot.role_bindings if namespace(b) == home and name(b) == TEAM_MEMBER_ROLE), None)
            if binding is None:
                problems.append(f"no RoleBinding {TEAM_MEMBER_ROLE} in {home}")
            elif not _member_binding(binding):
                ref = binding.get("roleRef") or {}
                problems.append(f"{home}/{TEAM_MEMBER_ROLE} binds {ref.get('kind')} {ref.get('name')}, not the ClusterRole {TEAM_MEMBER_ROLE}")
            elif set(groups) - _groups(binding):
                problems.append(f"{home}/{TEAM_MEMBER_ROLE} leaves out {', '.join(sorted(set(groups) - _groups(binding)))}")
        for binding in snapshot.role_bindings:
            bound = sorted(_groups(binding) & set(groups))
            if bound and not (namespace(binding) in team.namespaces and name(binding) == TEAM_MEMBER_ROLE):
                role = (binding.get("roleRef") or {}).get("name")
                problems.append(f"RoleBinding {namespace(binding)}/{name(binding)} binds {', '.join(bound)} to {role}")
        for binding in snapshot.cluster_role_bindings:
            bound = sorted(_groups(binding) & set(groups))
            if bound:
                role = (binding.get("roleRef") or {}).get("name")
                problems.append(f"ClusterRoleBinding {name(binding)} binds {', '.join(bound)} to {role} in every namespace")
        if problems:
            rows.append(failed(item, "; ".join(problems) + ".",
                               "run `pulumi up` to restore the member RoleBindings (TeamAccess makes them); delete a binding that gives a team's "
                               "group more, or give that access to a group of its own (kubectl get rolebindings,clusterrolebindings -A -o wide)."))
        else:
            rows.append(passed(item, f"{listing(groups)} bound to {TEAM_MEMBER_ROLE} in {', '.join(team.namespaces)} only; "
                                     "no other RoleBinding and no ClusterRoleBinding names them."))
    return rows
