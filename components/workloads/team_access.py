"""A team's people (``scheduling.teams[].members``): what they may do, and only in their team's
namespaces.

One ClusterRole, ``TEAM_MEMBER_ROLE``, says what a member does: submit, watch and delete the
team's Jobs, JobSets and TrainJobs (``patch`` included, which ``kubectl label ... queue-name``
needs to submit a held app), read Kueue's Workloads and LocalQueues, pods, their logs and events.
Nothing else: no Secrets, no ``pods/exec``, no RBAC, ResourceQuotas or PriorityClasses. A
ClusterRole grants nothing by itself; a RoleBinding in each of the team's namespaces grants it there
alone (Kubernetes RBAC, "RoleBinding and ClusterRoleBinding": a RoleBinding may reference a
ClusterRole "to grant the permissions defined in that ClusterRole to resources inside the
RoleBinding's namespace"), to the team's group (``team_group``: its IAM members' access entries
carry it, ``aws/cluster_access.py``) and to the Kubernetes groups the team lists.

No EKS access policy is associated with a member's entry: an entry with ``kubernetesGroups`` and no
policy gets exactly the RBAC bound to those groups (EKS API, CreateAccessEntry ``kubernetesGroups``),
while even the narrowest namespace-scoped policy that submits jobs, ``AmazonEKSEditPolicy``, also
reads and writes Secrets and execs into pods (docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..config import GpuTrainingPlatformArgs, Problem, TeamConfig
from ..config.documented import component_args, documented_args, documented_component
from ..config.team_settings import is_principal_arn, team_group
from ..facts.iam_principals import same_principal
from .job_sets import JOBSET_API_VERSION, TRAINER_GROUP

TEAM_MEMBER_ROLE = "eks-gpu-training-team-member"
"""Name of the ClusterRole of team members, and of its RoleBinding in each team namespace."""

RBAC_API_GROUP = "rbac.authorization.k8s.io"
JOB_VERBS = ("create", "get", "list", "watch", "patch", "delete")
"""What a member does with the team's jobs: submit (create, or relabel a held one), watch, cancel."""
READ_VERBS = ("get", "list", "watch")
LABELS = {"app.kubernetes.io/name": TEAM_MEMBER_ROLE, "app.kubernetes.io/part-of": "eks-gpu-training"}


def team_member_rules() -> list[dict[str, Any]]:
    """The rules of ``TEAM_MEMBER_ROLE``."""
    return [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(JOB_VERBS)},
        {"apiGroups": [JOBSET_API_VERSION.split("/")[0]], "resources": ["jobsets"], "verbs": list(JOB_VERBS)},
        {"apiGroups": [TRAINER_GROUP], "resources": ["trainjobs"], "verbs": list(JOB_VERBS)},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": list(READ_VERBS)},
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": list(READ_VERBS)},
    ]


def team_member_role() -> dict[str, Any]:
    """The ClusterRole every team's RoleBindings reference."""
    return {"apiVersion": f"{RBAC_API_GROUP}/v1", "kind": "ClusterRole",
            "metadata": {"name": TEAM_MEMBER_ROLE, "labels": dict(LABELS)}, "rules": team_member_rules()}


def member_groups(team: TeamConfig) -> list[str]:
    """The Kubernetes groups a team's RoleBindings bind: the team's own, then those it lists."""
    return [team_group(team.name), *(m for m in team.members if not is_principal_arn(m))]


def team_role_binding(team: TeamConfig, namespace: str) -> dict[str, Any]:
    """The RoleBinding of ``TEAM_MEMBER_ROLE`` in one of the team's namespaces."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": TEAM_MEMBER_ROLE, "namespace": namespace, "labels": {**LABELS, "eks-gpu-training/team": team.name}},
        "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole", "name": TEAM_MEMBER_ROLE},
        "subjects": [{"apiGroup": RBAC_API_GROUP, "kind": "Group", "name": group} for group in member_groups(team)],
    }


def entry_less_members(args: GpuTrainingPlatformArgs) -> list[str]:
    """The IAM members the in-cluster half alone makes no access entry for (it makes nothing in
    AWS), each with the group the program that runs the AWS half must give it."""
    return [f"{member} (group {team_group(team.name)})" for team in args.scheduling.teams
            for member in team.members if is_principal_arn(member)] if args.in_cluster.enabled else []


def member_problems(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Members that would not be a team's alone: listed twice or in two teams, a cluster admin
    (whose entry is the admin's already, and who reaches every namespace anyway), or the verify group
    (bound cluster-wide)."""
    problems = []
    seen: list[tuple[str, str]] = []
    admins = [arn for arn in args.cluster.admin_principal_arns if isinstance(arn, str)]
    verify_group = args.verify.group if args.verify.cluster_role else None
    for i, team in enumerate(args.scheduling.teams):
        for j, member in enumerate(team.members):
            path = f"scheduling.teams[{i}].members[{j}]"
            earlier = next((where for where, other in seen if same_principal(member, other)), None)
            if earlier is not None:
                problems.append(Problem(path, f"'{member}' is listed in {earlier} too: a member belongs to one team"))
            seen.append((path, member))
            if not is_principal_arn(member):
                if member == verify_group:
                    problems.append(Problem(path, f"'{member}' is verify.group, bound to the verify command's cluster-wide read role; name another group"))
                continue
            admin = next((k for k, arn in enumerate(admins) if same_principal(member, arn)), None)
            if admin is not None:
                problems.append(Problem(path, f"'{member}' is cluster.adminPrincipalArns[{admin}], an admin of every namespace with "
                                        "an access entry of its own; remove it from one of the two"))
    return problems


@documented_args
@dataclass
class TeamAccessArgs:
    """Arguments of ``TeamAccess``."""

    teams: Sequence[TeamConfig]
    """The teams (``scheduling.teams``) whose namespaces get the member RoleBinding."""
    namespaces: Mapping[str, pulumi.Resource]
    """The training namespaces by name (``SchedulingPolicies.namespaces``), which the RoleBindings wait for."""


@documented_component(TeamAccessArgs)
class TeamAccess(pulumi.ComponentResource):
    """The team-member ClusterRole and, in each team namespace, its RoleBinding to the team's groups.
    Pass the cluster's Kubernetes provider in ``opts``."""

    role_name: pulumi.Output[str]
    """Name of the ClusterRole."""

    def __init__(self, name: str, args: Optional[TeamAccessArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TeamAccessArgs, "TeamAccess", name, args, fields)
        super().__init__("eks-gpu-training:index:TeamAccess", name, None, opts)
        body = team_member_role()
        role = k8s.rbac.v1.ClusterRole(f"{name}-role", metadata=body["metadata"], rules=body["rules"],
                                       opts=pulumi.ResourceOptions(parent=self))
        for team in args.teams:
            for namespace in team.namespaces:
                binding = team_role_binding(team, namespace)
                waits = [role, *([args.namespaces[namespace]] if namespace in args.namespaces else [])]
                k8s.rbac.v1.RoleBinding(
                    f"{name}-{namespace}", metadata=binding["metadata"], role_ref=binding["roleRef"], subjects=binding["subjects"],
                    opts=pulumi.ResourceOptions(parent=self, depends_on=waits),
                )
        self.role_name = role.metadata.name
        self.register_outputs({"roleName": self.role_name})
