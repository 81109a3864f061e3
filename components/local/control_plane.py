"""etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK's controller on loopback:
a real Kubernetes control plane whose nodes are simulated.

Everything listens on 127.0.0.1 at ports free when the cluster starts; every file (certificates,
kubeconfig, etcd's data, logs, pids) lives in the state folder, and ``stop`` ends exactly the
processes this cluster started.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from .build import ETCD, KUBERNETES, KWOK, GoComponent, bin_dir
from .fleet import KWOK_NODE_ANNOTATION
from .pki import Pki, write_pki
from .processes import Supervisor, free_port

SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
"""Addresses the API server allocates to Services. Nothing routes them: no pod runs a process."""
POD_CIDR = "10.244.0.0/16"
"""Addresses KWOK gives the simulated pods."""
STARTUP_TIMEOUT_SECONDS = 120
NODE_LEASE_SECONDS = 40
"""The kubelet's default node lease duration; KWOK renews each simulated node's lease like a kubelet."""


HELM_MANAGED = ("app.kubernetes.io/managed-by", "Helm")
"""The label Helm's charts put on what they create, hook Jobs' pods included (the chart labels
convention, helm.sh/docs/chart_best_practices/labels); training pods never carry it."""


def kwok_stages(kwok_dir: Path) -> list[dict]:
    """KWOK's stages for the simulated kubelets, as KWOK ships them, with its pod-complete stage
    narrowed to pods of Jobs that Helm charts create: hook Jobs (NFD's post-delete prune, the GPU
    Operator's CRD upgrade) that Helm waits for, whose containers a real kubelet runs to completion.
    Their work itself (pruning labels, applying CRDs) is not done here. A training job's pods keep
    running until it is stopped, as on real nodes."""
    stages = []
    for name in KWOK.data:
        stage = yaml.safe_load((kwok_dir / Path(name).name).read_text())
        if stage["metadata"]["name"] == "pod-complete":
            key, value = HELM_MANAGED
            stage["metadata"]["name"] = "helm-job-pod-complete"
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": f'.metadata.labels["{key}"]', "operator": "In", "values": [value]}
            )
        stages.append(stage)
    return stages


def _kubeconfig(server: str, pki: Pki, path: Path) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}],
        "users": [{"name": "admin", "user": {
            "client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key),
        }}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@dataclass
class ControlPlane:
    """The running control plane of one local cluster."""

    state: Path
    attached: bool = False
    """Processes end with the process that started them (see ``Supervisor``)."""
    kubernetes: GoComponent = KUBERNETES
    """The Kubernetes minor's component (``build.kubernetes_for``) whose binaries run."""
    supervisor: Supervisor = field(init=False)
    ports: dict[str, int] = field(default_factory=dict)
    pki: Optional[Pki] = None

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(self.state, attached=self.attached)

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None  # noqa: S101 - written by start
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _get(self, url: str, *, tls: bool = True) -> str:
        context = self._ssl_context() if tls else None
        with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310 - loopback only
            return response.read().decode()

    def start(self, *, log=print) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self.pki = write_pki(self.state / "pki")
        for name in ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"):
            self.ports[name] = free_port()
        (self.state / "ports.json").write_text(json.dumps(self.ports))
        self._start_etcd(log)
        self._start_apiserver(log)
        _kubeconfig(self.server, self.pki, self.kubeconfig)
        self._start_controllers(log)

    def _start_etcd(self, log) -> None:
        etcd = bin_dir(ETCD) / "etcd"
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        log(f"starting etcd on {client}")
        process = self.supervisor.start("etcd", [
            str(etcd), "--name=local", f"--data-dir={self.state / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            # A throwaway cluster: no fsync on every write (etcd's own flag for tests).
            "--unsafe-no-fsync",
        ])
        self.supervisor.wait_for(
            process, lambda: json.loads(self._get(f"{client}/health", tls=False)).get("health") == "true",
            timeout=STARTUP_TIMEOUT_SECONDS, what="healthy",
        )

    def _start_apiserver(self, log) -> None:
        assert self.pki is not None  # noqa: S101 - written by start
        pki = self.pki
        binary = bin_dir(self.kubernetes) / "kube-apiserver"
        log(f"starting kube-apiserver on https://127.0.0.1:{self.ports['apiserver']}")
        process = self.supervisor.start("kube-apiserver", [
            str(binary),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
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
        ])
        self.supervisor.wait_for(
            process, lambda: self._get(f"{self.server}/readyz") == "ok",
            timeout=STARTUP_TIMEOUT_SECONDS, what="ready",
        )

    def _start_controllers(self, log) -> None:
        assert self.pki is not None  # noqa: S101 - written by start
        kube = bin_dir(self.kubernetes)
        kubeconfig = str(self.kubeconfig)
        serving = [f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
                   "--bind-address=127.0.0.1"]
        log("starting kube-controller-manager, kube-scheduler and kwok")
        self.supervisor.start("kube-controller-manager", [
            str(kube / "kube-controller-manager"), f"--kubeconfig={kubeconfig}", *serving,
            f"--secure-port={self.ports['controller-manager']}",
            f"--service-account-private-key-file={self.pki.service_account_key}",
            f"--root-ca-file={self.pki.ca_cert}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        ])
        self.supervisor.start("kube-scheduler", [
            str(kube / "kube-scheduler"), f"--kubeconfig={kubeconfig}", *serving,
            f"--secure-port={self.ports['scheduler']}", "--leader-elect=false",
        ])
        kwok_dir = bin_dir(KWOK)
        config = self.state / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(kwok_stages(kwok_dir), sort_keys=False))
        self.supervisor.start("kwok", [
            str(kwok_dir / "kwok"), f"--kubeconfig={kubeconfig}", f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION[0]}={KWOK_NODE_ANNOTATION[1]}",
            f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1",
            f"--server-address=127.0.0.1:{self.ports['kwok']}",
            f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        ])

    def check(self) -> None:
        self.supervisor.check()

    def stop(self) -> list[str]:
        self.supervisor.load()
        return self.supervisor.stop_all()
