"""The charts' cluster-scoped RBAC, read from their objects as Helm renders them for a stack: each
ClusterRoleBinding's subjects with the rules of its ClusterRole, and each ClusterRole a chart
aggregates into Kubernetes' user-facing roles (``aggregate-to-admin``, ``-edit``, ``-view``: whoever
holds those roles gets its rules). A subject one of the stack's own ValidatingAdmissionPolicies
judges (its ``matchConditions`` name the subject's user) says so: RBAC is what it holds, the policy
what it may actually write (``addons.job_api_admission``).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from ..chart_sources import ChartSources
from .charts import locate_release_chart, render_release
from .registrations import StackRender
from .files import chart_releases

RBAC_API = "rbac.authorization.k8s.io/v1"
AGGREGATION_LABEL = "rbac.authorization.k8s.io/aggregate-to-"
POLICY_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
_USER_CONDITION = re.compile(r"request\.userInfo\.username == '(?P<user>[^']+)'")


def chart_objects(render: StackRender, sources: ChartSources) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Each release's chart objects (by chart name), and why a release could not be rendered."""
    objects: dict[str, list[dict[str, Any]]] = {}
    problems: list[str] = []
    for release in chart_releases(render):
        source, reason = locate_release_chart(release, sources)
        rendered = render_release(release, source, reason)
        if rendered.skipped or rendered.error:
            problems.append(f"stack {render.stack}, chart {rendered.chart}: {rendered.skipped or rendered.error}")
            continue
        objects.setdefault(rendered.chart, []).extend(obj for _, obj in rendered.objects)
    return objects, problems


def fenced_users(render: StackRender) -> dict[str, str]:
    """User name -> the stack's ValidatingAdmissionPolicy that judges its requests."""
    fenced: dict[str, str] = {}
    for resource in render.resources:
        if resource.type not in (POLICY_TYPE, f"{POLICY_TYPE}Patch"):
            continue
        for condition in (resource.inputs.get("spec") or {}).get("matchConditions") or []:
            match = _USER_CONDITION.fullmatch(str(condition.get("expression", "")))
            if match:
                fenced[match["user"]] = (resource.inputs.get("metadata") or {}).get("name", resource.name)
    return fenced


def rules_text(rules: Iterable[dict[str, Any]]) -> str:
    """A role's rules as ``verbs on resources`` (``only`` its resourceNames, when it names some)."""
    parts = []
    for rule in rules:
        targets = ", ".join(rule.get("resources") or []) or ", ".join(rule.get("nonResourceURLs") or [])
        names = rule.get("resourceNames")
        only = f" (only {', '.join(f'`{n}`' for n in names)})" if names else ""
        parts.append(f"{', '.join(rule.get('verbs') or [])} on {targets}{only}")
    return "; ".join(parts) or "nothing"


def _user(subject: dict[str, Any]) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
    return str(subject.get("name"))


def chart_rbac_rows(objects: dict[str, list[dict[str, Any]]], fenced: dict[str, str]) -> list[tuple[str, str, str]]:
    """(chart, identity, what it may do cluster-wide) of every chart's bound and aggregated ClusterRoles."""
    rows: list[tuple[str, str, str]] = []
    for chart, chart_objs in objects.items():
        roles = {o["metadata"]["name"]: o for o in chart_objs if o.get("kind") == "ClusterRole"}
        for binding in (o for o in chart_objs if o.get("kind") == "ClusterRoleBinding"):
            ref = binding.get("roleRef") or {}
            role = roles.get(ref.get("name"))
            what = (f"ClusterRole `{ref.get('name')}`: {rules_text(role.get('rules') or [])}" if role is not None
                    else f"ClusterRole `{ref.get('name')}` (Kubernetes' own)")
            for subject in binding.get("subjects") or []:
                namespace = f"{subject['namespace']}/" if subject.get("namespace") else ""
                who = f"{subject.get('kind')} `{namespace}{subject.get('name')}`"
                policy = fenced.get(_user(subject))
                rows.append((chart, who + (f", fenced by policy `{policy}`" if policy else ""), what))
        for role in roles.values():
            targets = sorted(key[len(AGGREGATION_LABEL):] for key, value in (role["metadata"].get("labels") or {}).items()
                             if key.startswith(AGGREGATION_LABEL) and str(value) == "true")
            if targets:
                rows.append((chart, "holders of " + ", ".join(f"`{t}`" for t in targets) + " (aggregated)",
                             f"ClusterRole `{role['metadata']['name']}`: {rules_text(role.get('rules') or [])}"))
    return sorted(set(rows))
