"""The health gate's admission policy, judged by the API server for the gate's own ServiceAccount
(impersonated) on prod's cluster, where the platform applied it: the writes the gate's program
makes (``healthgate.gate_api``) are allowed; the rest of what its RBAC lets a patch carry is refused,
each refusal naming the policy and the rule. A ``nodes/status`` write is reset only in its spec
before admission (kubernetes ``pkg/registry/core/node/strategy.go``), so that path is probed with
labels, annotations, owners, finalizers and every kind of status field.

The probes run on Nodes of the test's own that no kubelet or KWOK manages, labelled as the stack's
nodes are (the policy reads nothing else of a node): a write the policy allows there reaches no node
the gate, the scheduler or Kueue acts on. The broken variant is the policy without the rules that
close the status path and scope taints to the stack's GPU pools."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.addons.labeler_admission import node_policy_binding_manifest, service_account_user
from eks_gpu_training.facts.gpu_nodes import GPU_TAINT_KEY, GPU_TAINT_VALUE, HOSTNAME_KEY
from eks_gpu_training.healthgate.decide import SetCondition, SetTaints, quarantine_taint, startup_taint
from eks_gpu_training.healthgate.gate_api import Cluster
from eks_gpu_training.healthgate.gate_settings import (
    CONDITION_TYPE, GPU_POOL_LABEL, KARPENTER_POOL_LABEL, PASSED_REASON, QUARANTINE_TAINT_KEY, STARTUP_TAINT_KEY,
    GateSettings,
)
from eks_gpu_training.workloads import health_gate as gate
from eks_gpu_training.workloads.health_gate_admission import (
    GPU_POOLS_MESSAGE, STATUS_FIELDS_MESSAGE, STATUS_METADATA_MESSAGE,
)

from tests.support.environment import Environment, expect_refused_by
from tests.support.manifests import unique
from tests.support.policy_probes import VAP, as_service_account, bound_cluster_role, policy_refuses, refused_by

POLICY = gate.NAME
GATE_SA = (gate.NAMESPACE, gate.SERVICE_ACCOUNT)
PROBE_LABEL = "eks-gpu-training/probe"
PROBE_FINALIZER = "eks-gpu-training/probe"
PROBE_NODE_STATUS = {
    "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
    "addresses": [{"type": "InternalIP", "address": "10.255.0.1"}],
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
}
"""What a probe Node reports: no GPUs (the tier's known state counts GPU nodes by them) and no Ready
condition (the gate checks no node that is not Ready)."""
SYSTEM_NODES = f"!{GPU_POOL_LABEL},!{KARPENTER_POOL_LABEL},!{PROBE_LABEL}"
"""The stack's system nodes: in no GPU pool, and no test's probe."""

TAINTS_ONLY = "the health gate may change a Node's taints only"
ITS_CONDITION_ONLY = f"the health gate may change only the {CONDITION_TYPE} condition of a Node's status"
NOTHING_ELSE = "the health gate may update Nodes and delete NodeClaims, nothing else"
ITS_NODECLAIMS_ONLY = "the health gate may delete NodeClaims of the stack's Karpenter GPU pools only"
ADDED_RULES = (STATUS_METADATA_MESSAGE, STATUS_FIELDS_MESSAGE, GPU_POOLS_MESSAGE)
"""The rules the broken variant goes without."""


@dataclass(frozen=True)
class Probes:
    """The probe Nodes, by what the policy should see in them."""

    managed: str
    """A node of the stack's managed GPU pool, joining (the GPU and startup taints)."""
    karpenter: str
    """A node of the stack's Karpenter GPU pool, joining."""
    system: str
    """A node labelled and tainted as the stack's first system node."""
    foreign: str
    """A GPU node of a pool the stack does not have (another stack's), joining."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(env: Environment, name: str) -> dict[str, Any]:
    """The Node as the API server's JSON (as the gate reads it)."""
    return json.loads(env.core.read_node(name, _preload_content=False).data)


def _taint_keys(env: Environment, name: str) -> list[str]:
    return [t["key"] for t in _read(env, name)["spec"].get("taints") or []]


def _settings(env: Environment) -> GateSettings:
    return Cluster(env.api, gate.NAMESPACE).settings(gate.NAME)


def _set_taints(env: Environment, writer: Environment, name: str,
                change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """The gate's own taint write (``healthgate.gate_api``: the whole list, at the resourceVersion it
    read) made by ``writer``, read again when a controller wrote the node in between (409)."""
    for _ in range(10):
        live = _read(env, name)
        action = SetTaints(name, live["metadata"]["resourceVersion"], tuple(change(live["spec"].get("taints") or [])), "probe")
        try:
            Cluster(writer.api, gate.NAMESPACE).apply(action, _settings(env), _now())
            return
        except ApiException as error:
            if error.status != 409:
                raise
    raise AssertionError(f"node {name} changed under every taint write")


def _without(key: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    return lambda taints: [t for t in taints if t["key"] != key]


def _adding(taint: dict[str, str]) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    return lambda taints: [*taints, taint]


def _released(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gate's release of a recovered node: the quarantine taint swapped for the startup taint."""
    return [*_without(QUARANTINE_TAINT_KEY)(taints), startup_taint()]


def _probe_node(name: str, labels: dict[str, str], taints: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**labels, HOSTNAME_KEY: name}},
            "spec": {"taints": taints}, "status": copy.deepcopy(PROBE_NODE_STATUS)}


@pytest.fixture
def probe_nodes(prod_cluster):
    """The four probe Nodes, made by the cluster's admin (a node may carry its status on create),
    and deleted after the test whatever it left on them."""
    env = prod_cluster.env
    settings = _settings(env)
    managed = sorted(set(settings.pools) - set(settings.karpenter_pools))
    assert managed, f"prod's gate has a managed pool: {settings.pools}"
    assert settings.karpenter_pools, f"prod's gate has a Karpenter pool: {settings.pools}"
    (system, *_) = env.nodes(SYSTEM_NODES)
    joining = [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}, startup_taint()]
    probes = Probes(managed=unique("gate-probe-managed"), karpenter=unique("gate-probe-karpenter"),
                    system=unique("gate-probe-system"), foreign=unique("gate-probe-foreign"))
    system_labels = {**{k: v for k, v in (system.metadata.labels or {}).items() if k != HOSTNAME_KEY}, PROBE_LABEL: "x"}
    for manifest in (
        _probe_node(probes.managed, {GPU_POOL_LABEL: managed[0], PROBE_LABEL: "x"}, joining),
        _probe_node(probes.karpenter, {KARPENTER_POOL_LABEL: settings.karpenter_pools[0], PROBE_LABEL: "x"}, joining),
        _probe_node(probes.system, system_labels, [env.api.sanitize_for_serialization(t) for t in system.spec.taints or []]),
        _probe_node(probes.foreign, {GPU_POOL_LABEL: unique("another-stacks-pool"), PROBE_LABEL: "x"}, joining),
    ):
        env.core.create_node(manifest)
    yield probes
    for name in (probes.managed, probes.karpenter, probes.system, probes.foreign):
        try:
            env.core.patch_node(name, {"metadata": {"finalizers": None}})
        except ApiException as error:
            if error.status != 404:
                raise
        env.delete("v1", "Node", name)


@pytest.fixture
def gate_identity(prod_cluster) -> Environment:
    """The cluster as the gate's ServiceAccount (its ClusterRole, and the policy, in force since the platform's start)."""
    return as_service_account(prod_cluster.env, *GATE_SA)


def _metadata_and_status(env: Environment, name: str) -> dict[str, Any]:
    """What no refused write may change: the node's metadata the policy holds, and its status
    fields but the conditions (the node lifecycle controller writes those on a node nothing runs)."""
    node = _read(env, name)
    meta = {key: node["metadata"].get(key) for key in ("labels", "annotations", "ownerReferences", "finalizers")}
    return {**meta, "status": {k: v for k, v in node["status"].items() if k != "conditions"}, "unschedulable": node["spec"].get("unschedulable")}


# --- what the gate does: allowed ----------------------------------------------------------------------

def test_the_gate_may_lift_the_startup_taint_of_a_node_of_its_pools(prod_cluster, probe_nodes, gate_identity):
    env = prod_cluster.env
    for node in (probe_nodes.managed, probe_nodes.karpenter):
        _set_taints(env, gate_identity, node, _without(STARTUP_TAINT_KEY))
        keys = _taint_keys(env, node)
        assert GPU_TAINT_KEY in keys
        assert STARTUP_TAINT_KEY not in keys


def test_the_gate_may_quarantine_a_node_of_its_pools_and_release_it_to_be_checked_again(prod_cluster, probe_nodes,
                                                                                        gate_identity):
    env = prod_cluster.env
    for node in (probe_nodes.managed, probe_nodes.karpenter):
        _set_taints(env, gate_identity, node, _without(STARTUP_TAINT_KEY))
        _set_taints(env, gate_identity, node, _adding(quarantine_taint("NvidiaXID79Error")))
        assert QUARANTINE_TAINT_KEY in _taint_keys(env, node)
        _set_taints(env, gate_identity, node, _released)
        keys = _taint_keys(env, node)
        assert STARTUP_TAINT_KEY in keys
        assert QUARANTINE_TAINT_KEY not in keys


def test_the_gate_may_set_its_condition_through_the_status(prod_cluster, probe_nodes, gate_identity):
    env = prod_cluster.env
    settings = _settings(env)
    Cluster(gate_identity.api, gate.NAMESPACE).apply(
        SetCondition(probe_nodes.managed, "True", PASSED_REASON, "the node passed its health checks"), settings, _now())
    (condition,) = [c for c in _read(env, probe_nodes.managed)["status"]["conditions"] if c["type"] == CONDITION_TYPE]
    assert (condition["status"], condition["reason"]) == ("True", PASSED_REASON)


# --- through nodes/status: only its condition --------------------------------------------------------

STATUS_WRITES = {
    "a label": ({"metadata": {"labels": {PROBE_LABEL: "relabelled"}}}, STATUS_METADATA_MESSAGE),
    "an annotation": ({"metadata": {"annotations": {PROBE_LABEL: "x"}}}, STATUS_METADATA_MESSAGE),
    "a finalizer": ({"metadata": {"finalizers": [PROBE_FINALIZER]}}, STATUS_METADATA_MESSAGE),
    # An owner that does not exist: the garbage collector would delete the Node.
    "an owner reference": ({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": str(uuid.uuid4())}]}}, STATUS_METADATA_MESSAGE),
    "the Ready condition": ({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Probe", "message": "written by the gate"}]}}, ITS_CONDITION_ONLY),
    "the capacity": ({"status": {"capacity": {"cpu": "1000"}}}, STATUS_FIELDS_MESSAGE),
    "the allocatable": ({"status": {"allocatable": {"memory": "1Ti"}}}, STATUS_FIELDS_MESSAGE),
    "an address": ({"status": {"addresses": [{"type": "ExternalIP", "address": "203.0.113.9"}]}}, STATUS_FIELDS_MESSAGE),
    # The port the API server's nodes/proxy reaches the kubelet at.
    "the kubelet's port": ({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10255}}}}, STATUS_FIELDS_MESSAGE),
}


@pytest.mark.parametrize("what", list(STATUS_WRITES))
def test_through_its_status_the_gate_may_change_nothing_but_its_condition(prod_cluster, probe_nodes, gate_identity, what):
    """Each write carries the gate's own condition too, as a write of the gate that carried more would."""
    env = prod_cluster.env
    body, message = STATUS_WRITES[what]
    own = {"type": CONDITION_TYPE, "status": "True", "reason": PASSED_REASON, "message": "probe",
           "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}
    conditions = (body.get("status") or {}).get("conditions", [])
    write = {**body, "status": {**(body.get("status") or {}), "conditions": [*conditions, own]}}
    before = _metadata_and_status(env, probe_nodes.managed)
    policy_refuses(POLICY, message, lambda: gate_identity.core.patch_node_status(probe_nodes.managed, write))
    assert _metadata_and_status(env, probe_nodes.managed) == before


# --- through nodes: only its taints ------------------------------------------------------------------

NODE_WRITES = {
    "a label": {"metadata": {"labels": {PROBE_LABEL: "relabelled"}}},
    "an annotation": {"metadata": {"annotations": {PROBE_LABEL: "x"}}},
    "a finalizer": {"metadata": {"finalizers": [PROBE_FINALIZER]}},
    "an owner reference": {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": str(uuid.uuid4())}]}},
    "unschedulable": {"spec": {"unschedulable": True}},
}


@pytest.mark.parametrize("what", list(NODE_WRITES))
def test_through_the_node_the_gate_may_change_nothing_but_its_taints(prod_cluster, probe_nodes, gate_identity, what):
    env = prod_cluster.env
    before = _metadata_and_status(env, probe_nodes.managed)
    policy_refuses(POLICY, TAINTS_ONLY, lambda: gate_identity.core.patch_node(probe_nodes.managed, NODE_WRITES[what]))
    assert _metadata_and_status(env, probe_nodes.managed) == before


def test_a_status_sent_through_the_node_is_dropped_by_the_api_server(prod_cluster, probe_nodes, gate_identity):
    """A Node update keeps the old status (``nodeStrategy.PrepareForUpdate``): the policy sees no
    status change there, and none is made."""
    env = prod_cluster.env
    before = _metadata_and_status(env, probe_nodes.managed)
    gate_identity.core.patch_node(probe_nodes.managed, {"status": {"capacity": {"cpu": "1000"}, "conditions": [
        {"type": "Ready", "status": "True", "reason": "Probe", "message": "written by the gate"}]}})
    assert _metadata_and_status(env, probe_nodes.managed) == before
    assert all(c.get("reason") != "Probe" for c in _read(env, probe_nodes.managed)["status"].get("conditions") or [])


# --- taints only on the stack's GPU pools ------------------------------------------------------------

def test_the_gate_may_not_quarantine_a_system_node(prod_cluster, probe_nodes, gate_identity):
    env = prod_cluster.env
    (real, *_) = [n.metadata.name for n in env.nodes(SYSTEM_NODES)]
    for node in (probe_nodes.system, real):
        try:
            policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda node=node: _set_taints(
                env, gate_identity, node, _adding(quarantine_taint("NvidiaXID79Error"))))
        finally:
            if QUARANTINE_TAINT_KEY in _taint_keys(env, node):
                _set_taints(env, env, node, _without(QUARANTINE_TAINT_KEY))
    # Nor lift a quarantine someone else put there, or swap it for its startup taint.
    _set_taints(env, env, probe_nodes.system, _adding(quarantine_taint("Probe")))
    policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda: _set_taints(env, gate_identity, probe_nodes.system,
                                                                  _without(QUARANTINE_TAINT_KEY)))
    policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda: _set_taints(env, gate_identity, probe_nodes.system, _released))
    assert QUARANTINE_TAINT_KEY in _taint_keys(env, probe_nodes.system)


def test_the_gate_may_not_taint_a_gpu_node_outside_the_stacks_pools(prod_cluster, probe_nodes, gate_identity):
    env = prod_cluster.env
    node = probe_nodes.foreign
    policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda: _set_taints(env, gate_identity, node, _without(STARTUP_TAINT_KEY)))
    policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda: _set_taints(
        env, gate_identity, node, _adding(quarantine_taint("NvidiaXID79Error"))))
    _set_taints(env, env, node, lambda taints: [*_without(STARTUP_TAINT_KEY)(taints), quarantine_taint("Probe")])
    policy_refuses(POLICY, GPU_POOLS_MESSAGE, lambda: _set_taints(env, gate_identity, node, _released))
    assert STARTUP_TAINT_KEY not in _taint_keys(env, node)


# --- what its RBAC does not grant, refused by the policy too ------------------------------------------

@pytest.fixture
def widened_gate(prod_cluster, gate_identity):
    """The gate's ServiceAccount granted Node create, update and delete, which its ClusterRole does
    not give: what the policy alone must then refuse."""
    with bound_cluster_role(prod_cluster.env, *GATE_SA, rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "create", "update", "patch", "delete"]}]):
        yield gate_identity


def test_the_gate_may_neither_delete_nor_create_a_node_even_when_rbac_allows_it(prod_cluster, probe_nodes, widened_gate):
    env = prod_cluster.env
    refused_by(POLICY, NOTHING_ELSE, expect_refused_by(POLICY, lambda: widened_gate.core.delete_node(probe_nodes.managed),
                                                       what="the gate's policy refusing a Node's deletion"))
    assert _read(env, probe_nodes.managed)["metadata"].get("deletionTimestamp") is None
    created = unique("gate-probe-created")
    try:
        policy_refuses(POLICY, NOTHING_ELSE, lambda: widened_gate.core.create_node(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": created}}))
    finally:
        env.delete("v1", "Node", created)


NODECLAIM_API = "karpenter.sh/v1"
UNSERVED_NODE_CLASS = {"group": "eks-gpu-training.probe", "kind": "ProbeNodeClass", "name": "probe"}
"""A node class no provider serves: Karpenter's controllers leave a NodeClaim of it alone (its
``nodeclaimutils.IsManaged``), so the claim launches nothing."""


def _nodeclaim(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": NODECLAIM_API, "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {KARPENTER_POOL_LABEL: pool, PROBE_LABEL: "x"}},
            "spec": {"nodeClassRef": UNSERVED_NODE_CLASS, "requirements": []}}


@pytest.fixture
def probe_nodeclaims(prod_cluster):
    """A NodeClaim of the stack's Karpenter GPU pool and one of another pool."""
    env = prod_cluster.env
    settings = _settings(env)
    assert settings.karpenter_pools, "prod's gate has Karpenter pools"
    own, other = unique("gate-probe-claim"), unique("gate-probe-claim")
    env.apply(_nodeclaim(own, settings.karpenter_pools[0]))
    env.apply(_nodeclaim(other, unique("another-stacks-pool")))
    yield own, other
    for name in (own, other):
        env.delete(NODECLAIM_API, "NodeClaim", name)


def test_the_gate_may_watch_what_its_rounds_list_and_no_other_config_map(prod_cluster, gate_identity):
    """The gate waits for a watch of what a round lists to say it changed (``healthgate.changes``):
    its Role and ClusterRole allow every such watch, its ConfigMap's by name only. A refused watch
    would leave the gate one round a minute."""
    watching = Cluster(gate_identity.api, gate.NAMESPACE)
    for open_watch in [*watching.watches(gate.NAME), *watching.karpenter_watches()]:
        response = open_watch()
        try:
            assert response.status == 200
        finally:
            response.close()
    with pytest.raises(ApiException) as refused:
        gate_identity.core.list_namespaced_config_map(gate.NAMESPACE, watch=True, timeout_seconds=1, _preload_content=False)
    assert refused.value.status == 403


def test_the_gate_may_delete_a_nodeclaim_of_its_karpenter_pools_only(prod_cluster, gate_identity, probe_nodeclaims):
    env = prod_cluster.env
    own, other = probe_nodeclaims
    group, version = NODECLAIM_API.split("/")
    policy_refuses(POLICY, ITS_NODECLAIMS_ONLY, lambda: gate_identity.custom.delete_cluster_custom_object(
        group, version, "nodeclaims", other))
    assert env.get(NODECLAIM_API, "NodeClaim", other) is not None
    gate_identity.custom.delete_cluster_custom_object(group, version, "nodeclaims", own)
    assert env.get(NODECLAIM_API, "NodeClaim", own) is None


# --- the broken variant --------------------------------------------------------------------------------

@pytest.fixture
def broken_policy(prod_cluster):
    """The gate's policy as the platform applied it but without the rules that close the status path
    and scope taints to the stack's pools, under a name of its own, for another ServiceAccount of the
    gate's namespace bound to the gate's ClusterRole: that identity as the API server sees it, and
    the policy's name."""
    env = prod_cluster.env
    name = unique("health-gate-broken")
    policy = prod_cluster.platform_object("ValidatingAdmissionPolicy", gate.NAME)
    validations = policy["spec"]["validations"]
    kept = [v for v in validations if v["message"] not in ADDED_RULES]
    assert len(kept) == len(validations) - len(ADDED_RULES)
    policy["metadata"] = {"name": name}
    policy["spec"]["validations"] = kept
    policy["spec"]["matchConditions"] = [{"name": "is-the-probe", "expression":
                                          f"request.userInfo.username == '{service_account_user(gate.NAMESPACE, name)}'"}]
    env.apply(policy)
    env.apply(node_policy_binding_manifest(name, {}))
    try:
        with bound_cluster_role(env, gate.NAMESPACE, name, role=gate.NAME):
            yield as_service_account(env, gate.NAMESPACE, name), name
    finally:
        env.delete(VAP, "ValidatingAdmissionPolicyBinding", name)
        env.delete(VAP, "ValidatingAdmissionPolicy", name)


def test_broken_variant_without_the_added_rules_the_status_relabels_and_a_system_node_is_quarantined(
        prod_cluster, probe_nodes, broken_policy):
    env = prod_cluster.env
    broken, name = broken_policy
    # In force (and its RBAC): it refuses a label sent through the node itself, a rule it keeps.
    refused_by(name, TAINTS_ONLY, expect_refused_by(
        name, lambda: broken.core.patch_node(probe_nodes.managed, {"metadata": {"labels": {PROBE_LABEL: unique("y")}}}),
        what="the broken policy in force"))

    broken.core.patch_node_status(probe_nodes.managed, {"metadata": {"labels": {PROBE_LABEL: "relabelled"}}})
    assert _read(env, probe_nodes.managed)["metadata"]["labels"][PROBE_LABEL] == "relabelled"
    broken.core.patch_node_status(probe_nodes.managed, {"status": {"addresses": [
        {"type": "ExternalIP", "address": "203.0.113.9"}]}})
    assert {"type": "ExternalIP", "address": "203.0.113.9"} in _read(env, probe_nodes.managed)["status"]["addresses"]
    _set_taints(env, broken, probe_nodes.system, _adding(quarantine_taint("NvidiaXID79Error")))
    assert QUARANTINE_TAINT_KEY in _taint_keys(env, probe_nodes.system)
