"""Where one local cluster's files are and which loopback ports it listens on, decided before
anything starts: every process record and every object pointing at a process is built from it."""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from .build import KUBERNETES, GoComponent, bin_dir
from .pki import Pki
from .processes import free_port

PORTS = (
    "etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok",
    "kueue-webhook", "kueue-health", "karpenter-metrics", "karpenter-health",
    "jobset-webhook", "jobset-health", "trainer-webhook", "trainer-health",
)
"""Every port the cluster's processes listen on, each on 127.0.0.1."""


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""The ports the kernel gives outgoing connections (and ``bind`` to port 0). The cluster's ports
come from below it: Kueue's and Karpenter's are chosen a minute before they listen, and one from
this range was seen taken by a client connection meanwhile."""
LISTEN_PORTS_FROM = 10000
"""The lowest port the cluster listens on, above the registered services most machines run."""


def _listen_range() -> range:
    try:
        ephemeral_low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    return range(LISTEN_PORTS_FROM, ephemeral_low)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


RESERVED_SECONDS = 900.0
"""How long a chosen port stays reserved for its cluster in the machine's reservations file: from
its choice until its process listens (up to a few minutes: Kueue and Karpenter start last), so two
clusters starting at once never draw the same port; a listening port is not bindable."""


def reservations_file() -> Path:
    """The machine's reserved ports, one file per user in the temporary folder: shared by every
    cluster the user starts, whatever state or cache folder each uses."""
    return Path(tempfile.gettempdir()) / f"eks-gpu-training-ports-{os.getuid()}.json"


@contextmanager
def _reserved(path: Path) -> Iterator[dict[str, float]]:
    """The reservations still in force (port → until when, epoch seconds), held under an exclusive
    lock of the file's ``.lock`` sibling; what the block leaves in the dict is written back."""
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            held = json.loads(path.read_text())
        except (OSError, ValueError):
            held = {}
        now = time.time()
        live = {port: until for port, until in held.items() if isinstance(until, (int, float)) and until > now}
        yield live
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(live))
        partial.replace(path)


def free_ports(names: tuple[str, ...] = PORTS, *, reservations: Optional[Path] = None) -> dict[str, int]:
    """A port free now for each name, no two the same, none reserved by another cluster that has
    not started listening yet: at random below the ephemeral range, where no outgoing connection
    takes it before its process listens (else any free port). The ports are reserved for
    ``RESERVED_SECONDS`` in ``reservations`` (default ``reservations_file()``)."""
    with _reserved(reservations or reservations_file()) as held:
        candidates = _listen_range()
        ports: dict[str, int] = {}
        for port in random.sample(candidates, len(candidates)):
            if len(ports) == len(names):
                break
            if str(port) not in held and _bindable(port):
                ports[names[len(ports)]] = port
        while len(ports) < len(names):
            port = free_port()
            if port not in ports.values() and str(port) not in held:
                ports[names[len(ports)]] = port
        until = time.time() + RESERVED_SECONDS
        held.update({str(port): until for port in ports.values()})
    return ports


@dataclass(frozen=True)
class Layout:
    """One local cluster's state folder, ports and binaries."""

    state: Path
    ports: dict[str, int]
    kubernetes: GoComponent = KUBERNETES
    """The Kubernetes minor's component (``build.kubernetes_for``) whose binaries run."""
    cache: Optional[Path] = None
    """The build cache the binaries come from (default: ``build.cache_root()``)."""

    @classmethod
    def allocate(cls, state: Path, *, kubernetes: GoComponent = KUBERNETES, cache: Optional[Path] = None) -> "Layout":
        return cls(state, free_ports(), kubernetes, cache)

    def binary(self, component: GoComponent, name: str) -> Path:
        return bin_dir(component, self.cache) / name

    def url(self, port: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.ports[port]}"

    @property
    def server(self) -> str:
        return self.url("apiserver", "https")

    @property
    def pki(self) -> Pki:
        return Pki(self.state / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.state / "etcd"

    @property
    def kwok_config(self) -> Path:
        return self.state / "kwok.yaml"

    @property
    def kueue_config(self) -> Path:
        return self.state / "kueue-config.yaml"

    @property
    def kueue_certs(self) -> Path:
        return self.state / "kueue-certs"

    @property
    def karpenter_instance_types(self) -> Path:
        return self.state / "karpenter-instance-types.json"

    @property
    def node_repair_config(self) -> Path:
        return self.state / "node-repair.json"


@dataclass(frozen=True)
class File:
    """A file a process reads, written in the state folder before it starts."""

    path: Path
    data: bytes
    mode: int = 0o644

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(self.data)
        self.path.chmod(self.mode)
