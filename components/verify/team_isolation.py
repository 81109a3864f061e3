"""With ``--stack`` and teams: each team's namespaces keep GPUs to its queue and pods to its classes.

``team-queue/<team>``: the GPU pod policy exists and its binding denies in every one of the team's
namespaces (a GPU pod outside a Job refused). Kueue's ``manageJobsWithoutQueueName`` is in its
ConfigMap, which the verify role does not read; the cluster tier judges it
(``tests/cluster/test_team_admission.py``). ``team-priorities/<team>``: each namespace's
``team-priority-classes`` quota allows no pod of a class outside the team's list, and
the job class policy is bound there.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..config import GpuTrainingPlatformArgs
from ..workloads.team_admission import GPU_POD_POLICY, JOB_CLASS_POLICY, PRIORITY_QUOTA_NAME, allowed_priority_classes, priority_quota
from .objects import name, namespace
from .rows import Row, failed, listing, passed, skipped
from .snapshot import Snapshot


def _bound_namespaces(binding: Mapping[str, Any]) -> set[str]:
    """The namespaces a binding's ``matchResources`` names by ``kubernetes.io/metadata.name In``."""
    selector = ((binding.get("spec") or {}).get("matchResources") or {}).get("namespaceSelector") or {}
    named: set[str] = set()
    for expression in selector.get("matchExpressions") or []:
        if expression.get("key") == "kubernetes.io/metadata.name" and expression.get("operator") == "In":
            named.update(expression.get("values") or [])
    return named


def _policy_problems(snapshot: Snapshot, policy: str, namespaces: Sequence[str]) -> list[str]:
    """The policy and its binding of the same name, denying in every one of ``namespaces``."""
    if not any(name(p) == policy for p in snapshot.admission_policies):
        return [f"no ValidatingAdmissionPolicy {policy}"]
    binding = next((b for b in snapshot.admission_policy_bindings if name(b) == policy), None)
    if binding is None:
        return [f"no ValidatingAdmissionPolicyBinding {policy}"]
    spec = binding.get("spec") or {}
    problems = []
    if spec.get("policyName") != policy or "Deny" not in (spec.get("validationActions") or []):
        problems.append(f"the binding {policy} does not deny by the policy {policy}")
    missing = [n for n in namespaces if n not in _bound_namespaces(binding)]
    if missing:
        problems.append(f"the binding {policy} leaves out {', '.join(missing)}")
    return problems


def team_admission(snapshot: Snapshot, args: GpuTrainingPlatformArgs) -> list[Row]:
    """Per team: ``team-queue/<team>`` and ``team-priorities/<team>``."""
    if not args.scheduling.teams:
        return [skipped("team-admission", "scheduling.teams is empty in the stack.")]
    rows = []
    for team in args.scheduling.teams:
        problems = _policy_problems(snapshot, GPU_POD_POLICY, team.namespaces)
        item = f"team-queue/{team.name}"
        if problems:
            rows.append(failed(item, "; ".join(problems) + ".",
                               "run `pulumi up` to restore the policy and its binding (TeamAdmission makes them)."))
        else:
            rows.append(passed(item, f"GPU pods outside a Job are refused in {', '.join(team.namespaces)} ({GPU_POD_POLICY})."))
        allowed = allowed_priority_classes(args, team)
        wrong = _policy_problems(snapshot, JOB_CLASS_POLICY, team.namespaces)
        for home in team.namespaces:
            quota = next((q for q in snapshot.resource_quotas if namespace(q) == home and name(q) == PRIORITY_QUOTA_NAME), None)
            if quota is None:
                wrong.append(f"no ResourceQuota {PRIORITY_QUOTA_NAME} in {home}")
            elif quota.get("spec") != priority_quota(home, allowed)["spec"]:
                wrong.append(f"{home}/{PRIORITY_QUOTA_NAME} is not the stack's (pods 0 for classes outside {listing(allowed) or 'none'})")
        item = f"team-priorities/{team.name}"
        if wrong:
            rows.append(failed(item, "; ".join(wrong) + ".", "run `pulumi up` to restore the quotas and the job class policy (TeamAdmission makes them)."))
        else:
            rows.append(passed(item, f"pods, Jobs and JobSets in {', '.join(team.namespaces)} may use {listing(allowed) or 'no class'} only."))
    return rows
