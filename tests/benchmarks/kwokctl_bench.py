"""Time ``eks-gpu-training-local up STACK --bare`` beside its peer, kwokctl, on the same machine.

    python tests/benchmarks/kwokctl_bench.py [--runs 3] [--stack prod] [--nodes 2 1000] [--eks-pods]

kwokctl (``sigs.k8s.io/kwok`` v0.8.0, the KWOK project's own cluster tool) is a benchmark peer only,
never a dependency of the package: it and the kubectl it polls its API server with are built from
the wrappers beside this file (``go/catalogue.json``) into the same cache as the control plane.
Both sides start the same etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK
binaries, on loopback, and make the same number of simulated nodes:

- ours: ``up STACK --bare`` (with ``--scale N`` when the stack's own GPU pools hold another number
  than N) in a fresh state folder, timed to its return: the stack rendered, the control plane up,
  every node of the stack's managed node groups (its GPU pools and its system node group) created
  with its instance type's allocatable figures and checked, and EKS's own pods (CoreDNS and the
  kube-proxy, aws-node and Pod Identity agent DaemonSets) each bound to a node; then ``down``.
- kwokctl: ``create cluster --runtime binary`` from a KwokctlConfiguration naming the same
  binaries (its controller manager and scheduler given ours' request limits), then ``scale node
  --replicas TOTAL`` (TOTAL: the nodes ours makes, GPU and system), timed until every node is Ready;
  with ``--eks-pods``, until EKS's pods are placed too, applied and waited for by the same code as
  ``up``'s. Then ``delete cluster``, and every process it started is waited for (and killed by its
  pid if it outlives the delete).

The node counts are GPU nodes; the runs go round-robin (each node count, each side, the side that
goes first alternating), and the figure of each side is the median of its runs. The one-minute load
average is sampled throughout: the machine is shared, and the load is part of the figure. Prints a
Markdown table and exits 1 when ours takes more than kwokctl's time at any node count (issue 34's
goal: a ratio of 1.0 or less). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml
from eks_gpu_training.local import build as builds
from eks_gpu_training.local.control_plane import CLIENT_BURST, CLIENT_QPS
from eks_gpu_training.platform.stack_files import locate_stack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCAL = str(BIN / "eks-gpu-training-local")
CATALOGUE = Path(__file__).parent / "go" / "catalogue.json"
PEERS = builds.load_catalogue(CATALOGUE)["peers"]
KWOKCTL, KUBECTL = PEERS
RATIO_TARGET = 1.0
CLUSTER_NAME = "bench"
READY_TIMEOUT_SECONDS = 900.0
POLL_SECONDS = 0.2
"""How often the kwokctl side asks whether every node is Ready (kwokctl's own readiness poll's interval)."""
STOP_SECONDS = 15.0
OURS_PHASES = {"stage control-plane": "render", "stage eks-system": "control plane", "stage fleet": "EKS's objects"}
"""``up``'s log lines that end each phase of ours; the last phase, ``nodes and pods placed``, ends
with ``up``: EKS's DaemonSets are in before the fleet, as on EKS, so their pods are made and placed
while the nodes register."""


@dataclass
class Run:
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds of each phase, in order."""


class LoadSampler(threading.Thread):
    """The one-minute load average every few seconds, for the whole benchmark."""

    def __init__(self, every: float = 5.0):
        super().__init__(daemon=True)
        self.every, self.samples, self._done = every, [], threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append(os.getloadavg()[0])
            self._done.wait(self.every)

    def stop(self) -> list[float]:
        self._done.set()
        self.join()
        return self.samples


def stack_gpu_nodes(stack: str) -> int:
    """The nodes the stack's own GPU pools launch at creation."""
    args = locate_stack(stack, PROJECT_ROOT).platform_args()
    return sum(int(pool.initial_size) for pool in args.gpu_node_groups)


def ours_arguments(stack: str, gpu_nodes: int) -> list[str]:
    """``up``'s arguments for ``gpu_nodes`` GPU nodes: the stack as it is when its pools hold that
    many, else ``--scale``, which multiplies its GPU pools to that many."""
    return [] if stack_gpu_nodes(stack) == gpu_nodes else ["--scale", str(gpu_nodes)]


def planned_nodes(stack: str, extra: list[str]) -> int:
    """Every node ``up`` makes (GPU pools and system node group), as its dry run lists them."""
    result = subprocess.run([LOCAL, "up", stack, "--bare", "--dry-run", *extra], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, check=True)
    return sum(1 for line in result.stdout.splitlines() if line.startswith("  apply Node "))


def kwokctl_configuration(minor: str, cache: Path) -> dict:
    """kwokctl's configuration: the binary runtime on loopback, with the control plane's own
    binaries (and the peers' kubectl), so kwokctl downloads nothing; its controller manager and
    scheduler get ours' client-side request limits."""
    kubernetes = builds.kubernetes_for(minor)

    def binary(component: builds.GoComponent, name: str) -> str:
        return str(builds.bin_dir(component) / name)

    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "kubeVersion": kubernetes.version,
            "etcdBinary": binary(builds.ETCD, "etcd"),
            "kubeApiserverBinary": binary(kubernetes, "kube-apiserver"),
            "kubeControllerManagerBinary": binary(kubernetes, "kube-controller-manager"),
            "kubeSchedulerBinary": binary(kubernetes, "kube-scheduler"),
            "kwokControllerBinary": binary(builds.KWOK, "kwok"),
            "kubectlBinary": binary(KUBECTL, "kubectl"),
            "disableKubeScheduler": False,
            "quietPull": True,
            "cacheDir": str(cache),
        },
        "componentsPatches": [
            {"name": name, "extraArgs": [{"key": "kube-api-qps", "value": str(CLIENT_QPS)},
                                         {"key": "kube-api-burst", "value": str(CLIENT_BURST)}]}
            for name in ("kube-controller-manager", "kube-scheduler")
        ],
    }


def time_ours(stack: str, extra: list[str]) -> Run:
    """``up STACK --bare`` to its return, with the phases its log lines mark; then ``down``."""
    folder = Path(tempfile.mkdtemp(prefix="kwokctl-bench-ours-"))
    state = folder / "state"
    lines: list[str] = []
    process = None
    try:
        started = time.monotonic()
        process = subprocess.Popen([LOCAL, "up", stack, "--bare", "--state-dir", str(state), *extra], cwd=PROJECT_ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        marks = {}
        for line in process.stderr:
            lines.append(line)
            for prefix, phase in OURS_PHASES.items():
                if line.startswith(prefix):
                    marks[phase] = time.monotonic() - started
        if process.wait() != 0:
            raise RuntimeError(f"up {stack} failed:\n{''.join(lines[-20:])}")
        seconds = time.monotonic() - started
        return Run(seconds, _phases({**marks, "nodes and pods placed": seconds}))
    finally:
        if process is not None and process.poll() is None:
            # The benchmark failed while up ran: interrupted, up stops what it started (down below
            # stops what it had recorded by then).
            process.send_signal(signal.SIGINT)
            process.wait()
        subprocess.run([LOCAL, "down", stack, "--state-dir", str(state)], cwd=PROJECT_ROOT, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(folder, ignore_errors=True)


def _phases(ends: dict[str, float]) -> dict[str, float]:
    """Seconds of each phase from the seconds at which each ended."""
    phases, previous = {}, 0.0
    for phase, end in ends.items():
        phases[phase], previous = end - previous, end
    return phases


def _ready_nodes(kubeconfig: Path) -> int:
    """Nodes whose Ready condition is True, from one list served by the API server's cache."""
    from kubernetes import client, config

    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        response = client.CoreV1Api(api).list_node(resource_version="0", _preload_content=False)
        nodes = json.loads(response.data)["items"]
    return sum(1 for node in nodes for condition in node.get("status", {}).get("conditions") or []
               if condition["type"] == "Ready" and condition["status"] == "True")


def _wait_ready(kubeconfig: Path, nodes: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _ready_nodes(kubeconfig) >= nodes:
            return
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"kwokctl's {nodes} nodes not all Ready after {READY_TIMEOUT_SECONDS:.0f} s")


def _kwokctl_pids(cluster: Path) -> list[int]:
    return [int(pid.read_text().strip()) for pid in (cluster / "pids").glob("*.pid") if pid.read_text().strip()]


def _runs_from(pid: int, folder: Path) -> bool:
    """Whether ``pid`` is alive and runs a binary of ``folder`` (not a pid the kernel gave another process)."""
    try:
        return str(folder) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _stop(pids: list[int], folder: Path) -> None:
    """Wait for ``pids`` to end, then kill each still running from ``folder``."""
    deadline = time.monotonic() + STOP_SECONDS
    while any(_runs_from(pid, folder) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _runs_from(pid, folder):
            os.kill(pid, signal.SIGKILL)


def _place_eks_pods(kubeconfig: Path) -> None:
    """EKS's own pods, applied and waited for as ``up`` does in its ``eks-system`` stage."""
    from eks_gpu_training.local.cluster import PLACED_TIMEOUT_SECONDS, wait_until_placed
    from eks_gpu_training.local.eks_addons import eks_system_objects
    from eks_gpu_training.local.platform import Applier

    applier = Applier(kubeconfig)
    applier.apply_all(eks_system_objects())
    wait_until_placed(applier, timeout=PLACED_TIMEOUT_SECONDS * 5, check=lambda: None)


def time_kwokctl(minor: str, nodes: int, eks_pods: bool = False) -> Run:
    """``kwokctl create cluster``, ``scale node`` to ``nodes`` and every node Ready (and with
    ``eks_pods``, EKS's pods placed as ``up`` places them); then ``delete cluster``."""
    workdir = Path(tempfile.mkdtemp(prefix="kwokctl-bench-peer-"))
    configuration = workdir / "kwokctl.yaml"
    configuration.write_text(yaml.safe_dump(kwokctl_configuration(minor, workdir / "cache"), sort_keys=False))
    kwokctl = [str(builds.bin_dir(KWOKCTL) / "kwokctl"), "--config", str(configuration), "--name", CLUSTER_NAME]
    env = {**os.environ, "KWOK_WORKDIR": str(workdir)}
    cluster = workdir / "clusters" / CLUSTER_NAME
    # kwokctl adds its cluster to a kubeconfig: a file of its own, never the user's.
    kubeconfig_flag = ["--kubeconfig", str(workdir / "contexts.yaml")]

    def kwokctl_run(*arguments: str) -> None:
        result = subprocess.run([*kwokctl, *arguments], cwd=workdir, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"kwokctl {' '.join(arguments)} failed:\n{result.stderr[-3000:]}")

    pids: list[int] = []
    try:
        started = time.monotonic()
        kwokctl_run("create", "cluster", "--kubeconfig", "")
        created = time.monotonic() - started
        pids = _kwokctl_pids(cluster)
        kwokctl_run("scale", "node", "--replicas", str(nodes))
        scaled = time.monotonic() - started
        _wait_ready(cluster / "kubeconfig.yaml", nodes)
        ends = {"create": created, "scale": scaled, "Ready": time.monotonic() - started}
        if eks_pods:
            _place_eks_pods(cluster / "kubeconfig.yaml")
            ends["pods placed"] = time.monotonic() - started
        return Run(ends[list(ends)[-1]], _phases(ends))
    finally:
        pids = pids or (_kwokctl_pids(cluster) if cluster.is_dir() else [])
        subprocess.run([*kwokctl, "delete", "cluster", *kubeconfig_flag], cwd=workdir, env=env, check=False,
                       capture_output=True)
        _stop(pids, workdir)
        shutil.rmtree(workdir, ignore_errors=True)


def _median_phases(runs: list[Run]) -> str:
    return ", ".join(f"{phase} {statistics.median(run.phases[phase] for run in runs):.1f}"
                     for phase in runs[0].phases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each side at each node count (default 3)")
    parser.add_argument("--stack", default="prod", help="the stack (name or stack file path) ours brings up (default prod)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[2], metavar="N",
                        help="GPU node counts (default 2: prod's own); another count than the stack's passes --scale N")
    parser.add_argument("--eks-pods", action="store_true",
                        help="kwokctl's side also places EKS's own pods (CoreDNS and three DaemonSets) as up does")
    options = parser.parse_args()

    minor = locate_stack(options.stack, PROJECT_ROOT).platform_args().cluster.kubernetes_version
    builds.build_all(builds.control_plane_for(minor), log=lambda line: print(line, file=sys.stderr))
    builds.build_all(PEERS, log=lambda line: print(line, file=sys.stderr))
    extras = {gpu_nodes: ours_arguments(options.stack, gpu_nodes) for gpu_nodes in options.nodes}
    totals = {gpu_nodes: planned_nodes(options.stack, extras[gpu_nodes]) for gpu_nodes in options.nodes}

    ours: dict[int, list[Run]] = {n: [] for n in options.nodes}
    peer: dict[int, list[Run]] = {n: [] for n in options.nodes}
    sampler = LoadSampler()
    sampler.start()
    try:
        for run in range(options.runs):
            for gpu_nodes in options.nodes:
                sides = [("ours", partial(time_ours, options.stack, extras[gpu_nodes]), ours),
                         ("kwokctl", partial(time_kwokctl, minor, totals[gpu_nodes], options.eks_pods), peer)]
                for name, measure, runs in sides if run % 2 == 0 else reversed(sides):
                    result = measure()
                    runs[gpu_nodes].append(result)
                    print(f"run {run + 1}, {gpu_nodes} GPU nodes, {name}: {result.seconds:.1f} s "
                          f"({', '.join(f'{p} {s:.1f}' for p, s in result.phases.items())}; load {os.getloadavg()[0]:.1f})",
                          file=sys.stderr)
    finally:
        load = sampler.stop()

    met = True
    peer_title = "kwokctl, EKS's pods placed too" if options.eks_pods else "kwokctl"
    print(f"| GPU nodes (all nodes) | ours `up {options.stack} --bare` | {peer_title} | ours / kwokctl | target | met |")
    print("|---|---|---|---|---|---|")
    for gpu_nodes in options.nodes:
        mine, theirs = (statistics.median(r.seconds for r in runs[gpu_nodes]) for runs in (ours, peer))
        ratio = mine / theirs
        met = met and ratio <= RATIO_TARGET
        print(f"| {gpu_nodes} ({totals[gpu_nodes]}) | {mine:.1f} s | {theirs:.1f} s | {ratio:.2f} | "
              f"{RATIO_TARGET:.1f} | {'yes' if ratio <= RATIO_TARGET else 'no'} |")
    print(f"\nMedians of {options.runs} runs, wall seconds. Phases (medians, s):")
    for gpu_nodes in options.nodes:
        print(f"- {gpu_nodes} GPU nodes, ours: {_median_phases(ours[gpu_nodes])}; "
              f"kwokctl: {_median_phases(peer[gpu_nodes])}")
    print(f"\nOne-minute load average during the runs: {min(load):.1f} to {max(load):.1f}, "
          f"median {statistics.median(load):.1f} ({len(load)} samples, {os.cpu_count()} CPUs).")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
