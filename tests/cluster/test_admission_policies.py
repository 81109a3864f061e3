"""The ValidatingAdmissionPolicies the platform installs, evaluated by the API server itself for
the identities they are written for (impersonation, with the ServiceAccount's node-name claim).

Each refusal is checked to come from the policy (the API server names the policy and its message),
not from RBAC or another admission plugin; where the labeler's RBAC alone would already refuse a
request (deleting a node, writing its status), the test widens the RBAC first, so only the policy
stands in the way.
"""

from __future__ import annotations

import copy

import pytest
from kubernetes.client.exceptions import ApiException

from eks_gpu_training.addons import topology_labeler as tl
from eks_gpu_training.facts.gpu_nodes import network_layer_key
from eks_gpu_training.workloads.host_network_admission import (
    PART_OF, PART_OF_LABEL, POD_SECURITY_LABEL, POLICY_NAME, host_network_policy_binding_manifest,
    host_network_policy_manifest,
)
from eks_gpu_training.workloads.templates import TrainingJobSpec, training_pod_template

from tests.support.environment import expect_refused_by, wait_for
from tests.support.manifests import PAUSE_IMAGE, pod_manifest, unique
from tests.support.policy_probes import RBAC, VAP, as_service_account, attempt, bound_cluster_role, policy_refuses, refused_by

LABELER_SA = (tl.NAMESPACE, tl.SERVICE_ACCOUNT)
LABELER_POLICY = tl.NAME
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"
"""The extra the API server puts on a projected ServiceAccount token of a pod bound to a node."""
PROBE_LABEL = "eks-gpu-training/probe"
LAYER_4 = network_layer_key(4)

ONLY_ITS_NODE = "the topology labeler may change only the node its own pod runs on"
ONLY_ADD_LAYER_LABELS = "the topology labeler may only add topology.k8s.aws/network-node-layer-* labels, never change or remove one"
NO_SPEC_OR_ANNOTATIONS = "the topology labeler may not change a Node's spec (taints, unschedulable) or annotations"
ONLY_LABEL_UPDATES = "the topology labeler may only update a Node's labels (no create, delete or status)"
NO_OWNERS_OR_FINALIZERS = "the topology labeler may not change a Node's owner references or finalizers"


def _labeler(cluster, node: str | None):
    """The labeler's identity as its pod on ``node`` presents it (``None``: a token without the claim)."""
    return as_service_account(cluster.env, *LABELER_SA, extra={NODE_NAME_CLAIM: node} if node else None)


def _labeler_policy_refuses(call, message: str) -> None:
    policy_refuses(LABELER_POLICY, message, call)


@pytest.fixture
def labeler_nodes(prod_cluster):
    """Two GPU nodes, the first stripped of its layer labels (as a node the labeler has not seen)."""
    env = prod_cluster.env
    nodes = env.nodes("role=gpu-training,eks-gpu-training/pool")
    own, other = nodes[0], nodes[1]
    saved = {network_layer_key(layer): own.metadata.labels.get(network_layer_key(layer)) for layer in (1, 2, 3)}
    env.core.patch_node(own.metadata.name, {"metadata": {"labels": {key: None for key in saved}}})
    yield own.metadata.name, other.metadata.name, saved
    for name in (own.metadata.name, other.metadata.name):
        env.core.patch_node(name, {"metadata": {"labels": {LAYER_4: None, PROBE_LABEL: None}}})
    env.core.patch_node(own.metadata.name, {"metadata": {"labels": saved}, "spec": {"unschedulable": None}})


@pytest.fixture
def labelled_node(prod_cluster, labeler_nodes):
    """The labeler's own node with its layer 1-3 labels in place (as after the labeler's first pass)."""
    own, _, saved = labeler_nodes
    prod_cluster.env.core.patch_node(own, {"metadata": {"labels": saved}})
    return own, saved


def test_the_labeler_may_add_layer_labels_to_its_own_node(prod_cluster, labeler_nodes):
    own, _, saved = labeler_nodes
    _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": saved}})
    labels = prod_cluster.env.core.read_node(own).metadata.labels
    assert all(labels[key] == value for key, value in saved.items())


def test_the_labeler_may_add_a_fourth_layer_label_beside_existing_ones(prod_cluster, labelled_node):
    own, saved = labelled_node
    _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": {LAYER_4: "nn-4"}}})
    labels = prod_cluster.env.core.read_node(own).metadata.labels
    assert labels[LAYER_4] == "nn-4"
    assert all(labels[key] == value for key, value in saved.items())


def test_the_labeler_may_not_set_other_labels(prod_cluster, labeler_nodes):
    own, _, _ = labeler_nodes
    labeler = _labeler(prod_cluster, own)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"labels": {"role": "system"}}}),
                            ONLY_ADD_LAYER_LABELS)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"labels": {
        "node-role.kubernetes.io/control-plane": ""}}}), ONLY_ADD_LAYER_LABELS)


def test_the_labeler_may_not_change_or_remove_a_topology_label(prod_cluster, labelled_node):
    own, saved = labelled_node
    labeler = _labeler(prod_cluster, own)
    layer_3 = network_layer_key(3)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"labels": {layer_3: "nn-other"}}}),
                            ONLY_ADD_LAYER_LABELS)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"labels": {network_layer_key(1): None}}}),
                            ONLY_ADD_LAYER_LABELS)
    assert prod_cluster.env.core.read_node(own).metadata.labels[layer_3] == saved[layer_3]


def test_the_labeler_may_not_label_another_node(prod_cluster, labeler_nodes):
    own, other, saved = labeler_nodes
    _labeler_policy_refuses(lambda: _labeler(prod_cluster, own).core.patch_node(
        other, {"metadata": {"labels": {LAYER_4: "nn-00000000000000000"}}}), ONLY_ITS_NODE)


def test_a_labeler_token_without_the_node_name_may_label_no_node(prod_cluster, labeler_nodes):
    own, _, saved = labeler_nodes
    _labeler_policy_refuses(lambda: _labeler(prod_cluster, None).core.patch_node(own, {"metadata": {"labels": saved}}),
                            ONLY_ITS_NODE)


def test_the_labeler_may_not_taint_its_node(prod_cluster, labeler_nodes):
    own, _, _ = labeler_nodes
    _labeler_policy_refuses(lambda: _labeler(prod_cluster, own).core.patch_node(
        own, {"spec": {"taints": [{"key": "x", "value": "y", "effect": "NoSchedule"}]}}), NO_SPEC_OR_ANNOTATIONS)


def test_the_labeler_may_not_cordon_or_annotate_its_node(prod_cluster, labeler_nodes):
    own, _, _ = labeler_nodes
    labeler = _labeler(prod_cluster, own)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"spec": {"unschedulable": True}}), NO_SPEC_OR_ANNOTATIONS)
    _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"annotations": {PROBE_LABEL: "x"}}}),
                            NO_SPEC_OR_ANNOTATIONS)
    assert not prod_cluster.env.core.read_node(own).spec.unschedulable


def test_the_labeler_may_not_give_its_node_an_owner_or_a_finalizer(prod_cluster, labeler_nodes):
    """An owner reference would let the garbage collector delete the Node with its owner (here a
    ConfigMap a test can delete), a finalizer would hold the Node's deletion."""
    own, _, _ = labeler_nodes
    env = prod_cluster.env
    owner = unique("labeler-owner")
    env.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": owner, "namespace": "default"}})
    try:
        uid = env.core.read_namespaced_config_map(owner, "default").metadata.uid
        labeler = _labeler(prod_cluster, own)
        _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid}]}}), NO_OWNERS_OR_FINALIZERS)
        _labeler_policy_refuses(lambda: labeler.core.patch_node(own, {"metadata": {"finalizers": [
            "eks-gpu-training/probe"]}}), NO_OWNERS_OR_FINALIZERS)
    finally:
        env.delete("v1", "ConfigMap", owner, namespace="default")
    node = env.core.read_node(own)
    assert not node.metadata.owner_references
    assert not node.metadata.finalizers


@pytest.fixture
def widened_labeler(prod_cluster):
    """The labeler's ServiceAccount granted more than its ClusterRole gives (create, delete, update
    and status writes on Nodes), and a Node of its own that no kubelet or KWOK manages: what the
    policy alone must then refuse."""
    env = prod_cluster.env
    with bound_cluster_role(env, *LABELER_SA, rules=[
            {"apiGroups": [""], "resources": ["nodes", "nodes/status"], "verbs": ["get", "create", "update", "patch", "delete"]}]):
        node = unique("labeler-probe-node")
        env.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {PROBE_LABEL: "x"}}})
        yield _labeler(prod_cluster, node), node
        env.delete("v1", "Node", node)


def _policy_refuses_once_rbac_allows(call, message: str) -> None:
    """The request refused by the labeler's policy, once the widened RBAC is in force."""
    refused_by(LABELER_POLICY, message, expect_refused_by(LABELER_POLICY, call, what="the labeler policy refusing it"))


def test_the_labeler_may_not_delete_its_node_even_when_rbac_allows_it(prod_cluster, widened_labeler):
    labeler, node = widened_labeler
    _policy_refuses_once_rbac_allows(lambda: labeler.core.delete_node(node), ONLY_LABEL_UPDATES)
    assert prod_cluster.env.core.read_node(node).metadata.deletion_timestamp is None


def test_the_labeler_may_not_write_its_nodes_status_even_when_rbac_allows_it(prod_cluster, widened_labeler):
    labeler, node = widened_labeler
    _policy_refuses_once_rbac_allows(lambda: labeler.core.patch_node_status(node, {"metadata": {"labels": {
        LAYER_4: "nn-4"}}}), ONLY_LABEL_UPDATES)
    _policy_refuses_once_rbac_allows(lambda: labeler.core.patch_node_status(node, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Probe", "message": "written by the labeler"}]}}),
        ONLY_LABEL_UPDATES)


def test_the_labeler_may_not_create_a_node_even_when_rbac_allows_it(prod_cluster, widened_labeler):
    labeler, node = widened_labeler
    created = f"{node}-created"
    try:
        _policy_refuses_once_rbac_allows(lambda: labeler.core.create_node({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": created}}), ONLY_LABEL_UPDATES)
    finally:
        prod_cluster.env.delete("v1", "Node", created)


def test_the_labeler_policy_does_not_match_other_users(prod_cluster, labeler_nodes):
    """The write the policy refuses the labeler (a label that is no layer label) is the policy's
    business only for the labeler: the node's own kubelet identity and a same-named ServiceAccount
    of another namespace, with the same RBAC, make it."""
    own, _, _ = labeler_nodes
    env = prod_cluster.env
    probe = {"metadata": {"labels": {PROBE_LABEL: "x"}}}
    _labeler_policy_refuses(lambda: _labeler(prod_cluster, own).core.patch_node(own, probe), ONLY_ADD_LAYER_LABELS)

    # The Node authorizer and NodeRestriction let a kubelet label its own node (outside their reserved prefixes).
    env.as_user(f"system:node:{own}", groups=("system:nodes",)).core.patch_node(own, probe)
    assert env.core.read_node(own).metadata.labels[PROBE_LABEL] == "x"
    env.core.patch_node(own, {"metadata": {"labels": {PROBE_LABEL: None}}})

    _, account = LABELER_SA
    elsewhere = unique("elsewhere")
    env.ensure_namespace(elsewhere)
    env.apply({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": elsewhere},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": tl.NAME},
               "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": elsewhere}]})
    try:
        other = env.as_user(f"system:serviceaccount:{elsewhere}:{account}", groups=("system:serviceaccounts",),
                            extra={NODE_NAME_CLAIM: own})

        def labelled():
            try:
                other.core.patch_node(own, probe)
            except ApiException as error:
                # Until the binding is in force RBAC refuses; the labeler's policy must never be the one.
                assert f"ValidatingAdmissionPolicy '{LABELER_POLICY}'" not in error.body, error.body
                return False
            return True

        wait_for(labelled, what=f"{elsewhere}'s {account} labelling the node", timeout=30)
        assert env.core.read_node(own).metadata.labels[PROBE_LABEL] == "x"
    finally:
        env.delete(RBAC, "ClusterRoleBinding", elsewhere)
        env.delete("v1", "Namespace", elsewhere)


def test_broken_variant_without_the_policy_the_labeler_could_relabel_its_node(prod_cluster, labeler_nodes):
    """The binding removed: the API server no longer stops the write the policy exists to stop."""
    own, _, _ = labeler_nodes
    env = prod_cluster.env
    binding = env.get(VAP, "ValidatingAdmissionPolicyBinding", LABELER_POLICY)
    env.delete(VAP, "ValidatingAdmissionPolicyBinding", LABELER_POLICY)
    try:
        def relabelled():
            try:
                _labeler(prod_cluster, own).core.patch_node(own, {"metadata": {"labels": {PROBE_LABEL: "x"}}})
                return True
            except ApiException:
                return False
        wait_for(relabelled, what="the labeler's write allowed once the policy is unbound", timeout=30)
    finally:
        env.core.patch_node(own, {"metadata": {"labels": {PROBE_LABEL: None}}})
        env.apply({"apiVersion": binding["apiVersion"], "kind": binding["kind"],
                   "metadata": {"name": binding["metadata"]["name"], "labels": binding["metadata"].get("labels") or {}},
                   "spec": binding["spec"]})
    # Back in force before the next test (its informer needs a moment).
    # (a fresh value each time: rewriting a label to the value it has changes nothing, which the policy allows)
    wait_for(lambda: attempt(lambda: _labeler_policy_refuses(lambda: _labeler(prod_cluster, own).core.patch_node(
        own, {"metadata": {"labels": {PROBE_LABEL: unique("x")}}}), ONLY_ADD_LAYER_LABELS) or True),
        what="the labeler policy back in force", timeout=30)


# --- host networking without the rest of privileged --------------------------------------------------

TRAINING_SA = "training"
"""The training pods' ServiceAccount (``scheduling.serviceAccount.name``'s default), the only one
the policy lets use the host network."""


@pytest.fixture
def host_network_namespace(prod_cluster):
    """A namespace as the platform makes one with ``podSecurity: privileged``, and the policy for it."""
    env = prod_cluster.env
    namespace = unique("host-network-probe")
    env.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
        POD_SECURITY_LABEL: "privileged", PART_OF_LABEL: PART_OF}}})
    env.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TRAINING_SA, "namespace": namespace}})
    env.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other", "namespace": namespace}})
    env.apply(host_network_policy_manifest(TRAINING_SA))
    env.apply(host_network_policy_binding_manifest())
    yield env, namespace
    env.delete(VAP, "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    env.delete(VAP, "ValidatingAdmissionPolicy", POLICY_NAME)
    env.delete("v1", "Namespace", namespace)


def _create_pod(target, **spec):
    env, namespace = target
    name = unique("hostnet")
    env.apply(pod_manifest(name, namespace, **spec))
    return name


def _training_pod_spec(**changes) -> dict:
    """The pod a host-network training app's Job creates, as the templates render it."""
    spec = TrainingJobSpec(
        name="rl", nodes=2, instance_types=("p5.48xlarge",), priority_class="training-critical",
        namespace="training", efa=True, host_network=True, image="repo/train@sha256:" + "a" * 64,
        service_account=TRAINING_SA,
    )
    pod = copy.deepcopy(training_pod_template(spec)["spec"])
    pod.update(changes)
    return pod


def _admitted(target, what: str, create) -> str:
    env, namespace = target
    name = wait_for(lambda: attempt(create), what=what, timeout=30)
    env.delete_pod(namespace, name)
    return name


def _create_pod_spec(target, spec: dict, env=None) -> str:
    default_env, namespace = target
    name = unique("hostnet")
    (env or default_env).apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                                "spec": spec})
    return name


HOST_NETWORK_PAUSE = {"hostNetwork": True, "serviceAccountName": TRAINING_SA, "containers": [
    {"name": "main", "image": PAUSE_IMAGE, "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}
"""The least a host-network pod needs to be admitted: the training ServiceAccount, NET_RAW dropped."""


def test_the_host_network_policy_allows_host_networking_to_the_training_service_account(host_network_namespace):
    _admitted(host_network_namespace, "a host-network pod admitted",
              lambda: _create_pod_spec(host_network_namespace, copy.deepcopy(HOST_NETWORK_PAUSE)))


def test_the_host_network_policy_admits_the_rendered_host_network_training_pod(host_network_namespace):
    _admitted(host_network_namespace, "the training pod admitted",
              lambda: _create_pod_spec(host_network_namespace, _training_pod_spec()))


def _eventually_refused(target, what: str, *, spec: dict | None = None, env=None, **pod_spec) -> str:
    """The host-network policy's refusal of a pod, once the policy (and any RBAC the test just
    granted) is in force: their informers need a moment, and until then the pod is admitted or RBAC
    refuses it."""
    default_env, namespace = target
    client = env or default_env

    def create():
        return _create_pod_spec(target, spec, client) if spec is not None else _create_pod((client, namespace), **pod_spec)

    return expect_refused_by(POLICY_NAME, create, what=what, on_admitted=lambda name: default_env.delete_pod(namespace, name))


ONLY_TRAINING_SA = f"host networking is allowed here only to pods of the ServiceAccount '{TRAINING_SA}'"
DROP_NET_RAW = "every container of a host-network pod must drop NET_RAW (or ALL): it would act on the node's own network"
NO_UNCONFINED = "an Unconfined seccomp or AppArmor profile is not allowed here: this namespace allows host networking only"
SAFE_SYSCTLS_ONLY = "only the baseline Pod Security Standard's safe sysctls are allowed here"


@pytest.mark.parametrize("account", ["default", "other"])
def test_host_networking_is_refused_to_pods_of_another_service_account(host_network_namespace, account):
    """The rendered training pod, unchanged but for its ServiceAccount: the node's instance metadata
    (and with it the node role) stays out of reach of the namespace's other identities."""
    message = _eventually_refused(host_network_namespace, f"the policy refusing host networking to {account}",
                                  spec=_training_pod_spec(serviceAccountName=account))
    refused_by(POLICY_NAME, ONLY_TRAINING_SA, message)


def test_a_host_network_pod_that_keeps_net_raw_is_refused(host_network_namespace):
    spec = copy.deepcopy(HOST_NETWORK_PAUSE)
    spec["containers"][0]["securityContext"]["capabilities"]["drop"] = ["NET_ADMIN"]
    message = _eventually_refused(host_network_namespace, "the policy refusing NET_RAW on the host network", spec=spec)
    refused_by(POLICY_NAME, DROP_NET_RAW, message)


def test_unconfined_seccomp_and_unsafe_sysctls_are_refused_on_any_pod(host_network_namespace):
    """Two of the baseline checks the policy restored; on a pod without host networking, so only they can refuse it."""
    unconfined = {"containers": [{"name": "main", "image": PAUSE_IMAGE,
                                  "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]}
    refused_by(POLICY_NAME, NO_UNCONFINED, _eventually_refused(host_network_namespace, "the policy refusing Unconfined",
                                                               spec=unconfined))
    sysctl = {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
              "containers": [{"name": "main", "image": PAUSE_IMAGE}]}
    refused_by(POLICY_NAME, SAFE_SYSCTLS_ONLY, _eventually_refused(host_network_namespace, "the policy refusing a sysctl",
                                                                   spec=sysctl))


PRIVILEGED = {"containers": [{"name": "main", "image": PAUSE_IMAGE,
                              "securityContext": {"privileged": True}}]}
NO_PRIVILEGED = "privileged containers are not allowed here: this namespace allows host networking only"
NO_HOST_PATH = "hostPath volumes are not allowed here: this namespace allows host networking only"
NO_HOST_NAMESPACES = "the host's PID and IPC namespaces are not allowed here: this namespace allows host networking only"
BASELINE_CAPABILITIES_ONLY = "only the baseline Pod Security Standard's capabilities may be added here"


def test_the_host_network_policy_denies_privileged_pods_and_host_paths(host_network_namespace):
    message = _eventually_refused(host_network_namespace, "the policy refusing a privileged pod", **PRIVILEGED)
    refused_by(POLICY_NAME, NO_PRIVILEGED, message)
    message = _eventually_refused(host_network_namespace, "the policy refusing a hostPath volume",
                                  volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    refused_by(POLICY_NAME, NO_HOST_PATH, message)


@pytest.fixture
def namespace_editors(host_network_namespace):
    """Identities other than the cluster admin that may create pods in the namespace: a user and
    two of the namespace's service accounts (the built-in ``edit`` role, bound in the namespace)."""
    env, namespace = host_network_namespace
    accounts = ("default", "other")
    env.apply({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "editors", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}] + [
                   {"kind": "ServiceAccount", "name": account, "namespace": namespace} for account in accounts]})
    return [env.as_user("alice")] + [
        env.as_user(f"system:serviceaccount:{namespace}:{account}", groups=("system:serviceaccounts",))
        for account in accounts]


def test_a_privileged_container_is_denied_whoever_creates_it(host_network_namespace, namespace_editors):
    spec = _training_pod_spec()
    # (privileged with allowPrivilegeEscalation false is a pod the API server's validation refuses anyway)
    spec["containers"][0]["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)
    for editor in namespace_editors:
        message = _eventually_refused(host_network_namespace, "the policy refusing a privileged training pod",
                                      spec=spec, env=editor)
        refused_by(POLICY_NAME, NO_PRIVILEGED, message)


def test_a_privileged_init_container_is_denied_too(host_network_namespace):
    # NET_RAW dropped, so that privilege is all the init container is refused for.
    spec = _training_pod_spec(initContainers=[{"name": "setup", "image": PAUSE_IMAGE,
                                               "securityContext": {"privileged": True, "capabilities": {"drop": ["NET_RAW"]}}}])
    message = _eventually_refused(host_network_namespace, "the policy refusing a privileged init container", spec=spec)
    refused_by(POLICY_NAME, NO_PRIVILEGED, message)


@pytest.mark.parametrize("host_namespace", ["hostPID", "hostIPC"])
def test_the_hosts_pid_and_ipc_namespaces_are_denied(host_network_namespace, host_namespace):
    message = _eventually_refused(host_network_namespace, f"the policy refusing {host_namespace}",
                                  spec=_training_pod_spec(**{host_namespace: True}))
    refused_by(POLICY_NAME, NO_HOST_NAMESPACES, message)


def test_capabilities_beyond_baseline_are_denied(host_network_namespace):
    spec = _training_pod_spec()
    spec["containers"][0]["securityContext"]["capabilities"]["add"].append("NET_ADMIN")
    message = _eventually_refused(host_network_namespace, "the policy refusing NET_ADMIN", spec=spec)
    refused_by(POLICY_NAME, BASELINE_CAPABILITIES_ONLY, message)


def test_a_privileged_namespace_the_project_did_not_make_is_not_matched(host_network_namespace):
    """The policy selects only this project's privileged namespaces: in another privileged
    namespace a privileged pod is admitted, while in the project's it is refused."""
    env, _ = host_network_namespace
    _eventually_refused(host_network_namespace, "the policy in force", **PRIVILEGED)
    foreign = unique("privileged-elsewhere")
    env.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": foreign, "labels": {
        POD_SECURITY_LABEL: "privileged"}}})
    try:
        _admitted((env, foreign), "a privileged pod admitted in a namespace of someone else's",
                  lambda: _create_pod((env, foreign), **PRIVILEGED))
    finally:
        env.delete("v1", "Namespace", foreign)


def test_broken_variant_without_the_policy_a_privileged_pod_is_admitted(host_network_namespace):
    env, _ = host_network_namespace
    _eventually_refused(host_network_namespace, "the policy in force", **PRIVILEGED)
    env.delete(VAP, "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    wait_for(lambda: attempt(lambda: _create_pod(host_network_namespace, **PRIVILEGED)),
             what="a privileged pod admitted without the policy",
             timeout=30)
