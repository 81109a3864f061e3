"""etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK's controller on loopback:
a real Kubernetes control plane whose nodes are simulated.

Each process is a record built by a pure function of the cluster's ``Layout`` (ports chosen free
before anything starts; every file, certificates, kubeconfig, etcd's data, logs and pids, in the
state folder); ``write_control_plane_files`` writes what they read, and the supervisor starts them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

import yaml

from ..facts import yaml_io
from .build import ETCD, KWOK, bin_dir
from .fleet import KWOK_NODE_ANNOTATION
from .layout import Layout
from .pki import Pki, write_pki
from .processes import Process, Ready

SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
"""Addresses the API server allocates to Services. Nothing routes them: no pod runs a process."""
POD_CIDR = "10.244.0.0/16"
"""Addresses KWOK gives the simulated pods."""
NODE_LEASE_SECONDS = 40
"""The kubelet's default node lease duration; KWOK renews each simulated node's lease like a kubelet."""
NODE_LEASE_WORKERS = 32
"""Node leases KWOK renews at once (its ``nodeLeaseParallelism``, default 4): 1,000 nodes need 100
renewals a second, which 4 workers miss on a loaded machine; lapsed leases make nodes unreachable
and Kueue evict their jobs, a fault no real kubelet shares."""


COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
"""KWOK's annotation of how long after it runs a pod completes (its general pod-complete stage)."""
PULL_DELAY_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"
"""KWOK's annotation of how long after it is bound a pod runs, Ready (its general pod-ready stage):
the simulator's stand-in for the image pull."""

HELM_MANAGED = ("app.kubernetes.io/managed-by", "Helm")
"""The label Helm's charts put on what they create, hook Jobs' pods included (the chart labels
convention, helm.sh/docs/chart_best_practices/labels); training pods never carry it."""


def kwok_configuration() -> dict:
    """KWOK's own settings, read from the same ``--config`` file as its stages. A configuration
    given is not defaulted, so the others carry KWOK's defaults (``SetObjectDefaults_KwokConfiguration``
    in ``pkg/apis/config/v1alpha1``); the flags set the rest."""
    return {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration", "options": {
        "nodeLeaseParallelism": NODE_LEASE_WORKERS, "podPlayStageParallelism": 4, "nodePlayStageParallelism": 4,
        "podsOnNodeSyncParallelism": 1, "enablePodsOnNodeSyncListPager": True,
        "enablePodsOnNodeSyncStreamWatch": False, "enableDebuggingHandlers": True, "enableProfilingHandler": True,
        "enableContentionProfiling": False,
    }}


def kwok_stages(kwok_dir: Path) -> list[dict]:
    """KWOK's stages for the simulated kubelets, as KWOK ships them, with its pod-complete stage
    narrowed to pods of Jobs that Helm charts create: hook Jobs (NFD's post-delete prune, the GPU
    Operator's CRD upgrade) that Helm waits for, whose containers a real kubelet runs to completion.
    Their work itself (pruning labels, applying CRDs) is not done here. A training job's pods keep
    running until it is stopped, as on real nodes."""
    stages = []
    for name in KWOK.data:
        stage = yaml_io.load((kwok_dir / Path(name).name).read_text())
        if stage["metadata"]["name"] == "pod-delete":
            # Only a pod whose containers have ended is removed; a running one ends first.
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": ".status.phase", "operator": "NotIn", "values": ["Running", "Pending"]})
        if stage["metadata"]["name"] == "pod-ready":
            stages.append(_pulled(copy.deepcopy(stage)))
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": f'.metadata.annotations["{PULL_DELAY_ANNOTATION}"]', "operator": "DoesNotExist"})
        if stage["metadata"]["name"] == "pod-complete":
            stages.append(_terminated(copy.deepcopy(stage)))
            stages.append(_timed(copy.deepcopy(stage)))
            key, value = HELM_MANAGED
            stage["metadata"]["name"] = "helm-job-pod-complete"
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": f'.metadata.labels["{key}"]', "operator": "In", "values": [value]}
            )
        stages.append(stage)
    return stages


def _terminated(stage: dict) -> dict:
    """A deleted pod's containers killed, as a kubelet reports them before the pod goes: phase
    Failed, each container terminated with 137 (SIGKILL after SIGTERM). KWOK's own pod-delete stage
    removes a deleted pod at once, which a pod holding a finalizer survives: a Job's pod keeps the
    Job controller's tracking finalizer until it is terminal, so a rank evicted from its node (the
    taint manager, a drain) stayed Terminating, and Running, for ever."""
    stage["metadata"]["name"] = "pod-terminate"
    stage["spec"]["selector"]["matchExpressions"] = [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
        {"key": ".status.phase", "operator": "In", "values": ["Running", "Pending"]},
    ]
    template = stage["spec"]["next"]["statusTemplate"]
    # A pod deleted before it ran (bound, its image still pulling) has no container statuses to
    # index: the template's unused look-up of them would fail, and the pod stay Terminating.
    template = "\n".join(line for line in template.splitlines() if "index $root.status.containerStatuses" not in line) + "\n"
    for old, new in (("exitCode: 0", "exitCode: 137"), ("reason: Completed", "reason: Error"), ("phase: Succeeded", "phase: Failed")):
        if old not in template:
            raise ValueError(f"KWOK's pod-complete stage no longer holds {old!r}: the pod-terminate stage is built from it")
        template = template.replace(old, new)
    stage["spec"]["next"]["statusTemplate"] = template
    return stage


def _delayed_by(stage: dict, name: str, annotation: str) -> dict:
    """KWOK's ``stage`` renamed ``name`` and narrowed to pods carrying ``annotation``, applied that
    long after the pod matches (the stage's ``delay.durationFrom``, as KWOK's general stages read it)."""
    stage["metadata"]["name"] = name
    stage["spec"]["selector"]["matchExpressions"].append({"key": f'.metadata.annotations["{annotation}"]', "operator": "Exists"})
    stage["spec"]["delay"] = {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": f'.metadata.annotations["{annotation}"]'}}
    return stage


def _pulled(stage: dict) -> dict:
    """KWOK's pod-ready stage for pods that say how long their image takes to pull: Running and
    Ready that long after they are bound, Pending until then, as a kubelet reports a pod whose
    image it is pulling."""
    return _delayed_by(stage, "pulled-pod-ready", PULL_DELAY_ANNOTATION)


def _timed(stage: dict) -> dict:
    """KWOK's pod-complete stage for pods that say when they end: a Job's pod with KWOK's delay
    annotation completes that long after it runs: the simulator's trace jobs (``simulate``)."""
    return _delayed_by(stage, "timed-pod-complete", COMPLETE_DELAY_ANNOTATION)


def kubeconfig_document(server: str, pki: Pki, impersonate: Optional[str] = None) -> dict[str, Any]:
    """The cluster's admin kubeconfig; with ``impersonate``, every request acts as that user (client-go's
    ``as``: the API server gives a ServiceAccount's user name that account's groups)."""
    user: dict[str, Any] = {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}
    if impersonate is not None:
        user["as"] = impersonate
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }


def _kubeconfig(server: str, pki: Pki, path: Path) -> Path:
    path.write_text(yaml.safe_dump(kubeconfig_document(server, pki), sort_keys=False))
    return path


def etcd_process(layout: Layout) -> Process:
    client, peer = layout.url("etcd"), layout.url("etcd-peer")
    return Process("etcd", layout.binary(ETCD, "etcd"), (
        "--name=local", f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        # A throwaway cluster: no fsync on every write (etcd's own flag for tests).
        "--unsafe-no-fsync",
    ), ready=Ready(f"{client}/health", body='"health":"true"'))


def apiserver_process(layout: Layout) -> Process:
    pki = layout.pki
    return Process("kube-apiserver", layout.binary(layout.kubernetes, "kube-apiserver"), (
        f"--etcd-servers={layout.url('etcd')}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={layout.ports['apiserver']}",
        f"--tls-cert-file={pki.apiserver_cert}", f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.service_account_public_key}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        # As EKS runs it: Node and RBAC authorization, NodeRestriction on top of the default
        # admission plugins (which include ResourceQuota, Priority, PodSecurity and the
        # ValidatingAdmissionPolicy plugin).
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        # The API server's own Service endpoint would be its loopback address, which the
        # endpoint reconciler refuses; nothing in this cluster dials the Service.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
    ), after=("etcd",), ready=Ready(f"{layout.server}/readyz", body="ok", ca=pki.ca_cert,
                                    client=(pki.admin_cert, pki.admin_key)))


def _serving(layout: Layout) -> tuple[str, ...]:
    kubeconfig = layout.kubeconfig
    return (f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--bind-address=127.0.0.1")


CLIENT_QPS, CLIENT_BURST = 5000, 10000
"""The controller manager's and scheduler's client rate limits: kwokctl's unlimited ones
(``--disable-qps-limits``, sigs.k8s.io/kwok pkg/consts). The defaults (20/30 per controller, 50/100
for the scheduler) protect a shared API server; here they would only slow a fleet's start."""


def _client_limits() -> tuple[str, ...]:
    return (f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_BURST}")


def controller_manager_process(layout: Layout) -> Process:
    return Process("kube-controller-manager", layout.binary(layout.kubernetes, "kube-controller-manager"), (
        *_serving(layout),
        f"--secure-port={layout.ports['controller-manager']}",
        f"--service-account-private-key-file={layout.pki.service_account_key}",
        f"--root-ca-file={layout.pki.ca_cert}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        *_client_limits(),
    ), after=("kube-apiserver",))


def scheduler_process(layout: Layout) -> Process:
    return Process("kube-scheduler", layout.binary(layout.kubernetes, "kube-scheduler"), (
        *_serving(layout), f"--secure-port={layout.ports['scheduler']}", "--leader-elect=false",
        *_client_limits(),
    ), after=("kube-apiserver",))


def kwok_process(layout: Layout) -> Process:
    return Process("kwok", layout.binary(KWOK, "kwok"), (
        f"--kubeconfig={layout.kubeconfig}", f"--config={layout.kwok_config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
        f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1",
        f"--server-address=127.0.0.1:{layout.ports['kwok']}",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
    ), after=("kube-apiserver",))


def control_plane_processes(layout: Layout) -> tuple[Process, ...]:
    return (etcd_process(layout), apiserver_process(layout), controller_manager_process(layout),
            scheduler_process(layout), kwok_process(layout))


CONTROL_PLANE_FILES = ("pki/", "kubeconfig", "kwok.yaml", "ports.json")
"""What ``write_control_plane_files`` writes in the state folder."""


def write_control_plane_files(layout: Layout) -> Pki:
    """The certificates, the kubeconfig, KWOK's stages (from the built KWOK module) and the ports,
    which the control plane's processes read; the ports are known before anything listens."""
    layout.state.mkdir(parents=True, exist_ok=True)
    pki = write_pki(layout.pki.folder)
    _kubeconfig(layout.server, pki, layout.kubeconfig)
    layout.kwok_config.write_text(yaml.safe_dump_all(
        [kwok_configuration(), *kwok_stages(bin_dir(KWOK, layout.cache))], sort_keys=False))
    (layout.state / "ports.json").write_text(json.dumps(layout.ports))
    return pki
