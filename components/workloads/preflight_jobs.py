"""Pre-flight checks that prove a GPU pool fit for a multi-node job, as plain Kubernetes objects.

- ``dcgm_diag_job``: DCGM diagnostics, one pod per node of a pool, each holding all of its node's
  GPUs and running ``dcgmi diag -r <level>`` against a host engine started inside the pod (so it
  needs neither the node monitoring agent's engine nor the GPU Operator's).
- ``nccl_test_objects``: nccl-tests ``all_reduce_perf`` across a pool's nodes over EFA, launched the
  way ``TrainingJob`` launches training (the same pod template: an Indexed Job, a headless Service,
  one pod per node with all its GPUs, EFA devices and EFA's hugepages). nccl-tests needs MPI to run
  more than one process (NVIDIA/nccl-tests#121), and this library installs no MPI operator, so the
  Job does what the Kubeflow MPI operator's MPIJob does itself: every pod runs sshd with a shared
  key from a Secret, and pod 0 runs ``mpirun`` over ssh across all of them (as AWS's nccl-tests
  MPIJob does, kubernetes-nccl-tests.yaml), then judges the log with ``nccl_results.py`` mounted
  from a ConfigMap, against the published baseline (``facts.nccl_baselines``).

Everything here returns the dicts ``kubectl apply`` takes; ``PreflightChecks`` and the
``eks-gpu-training-preflight`` command only deliver them.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from ..config import NCCL_MAX_BYTES, TRAINING_APP_NAME_MAX
from ..facts.gpu_nodes import GPU_RESOURCE
from ..facts.nccl_baselines import nccl_baseline
from .placement import label_in, whole_node_pod
from .templates import rendezvous_service, training_job
from .training_spec import COMPONENT_LABEL, PART_OF, TrainingJobSpec

PREFLIGHT_COMPONENT = "gpu-preflight"
"""``app.kubernetes.io/component`` of pre-flight pods: they hold GPUs but are not training, so other
training apps' spread constraints do not count them."""
SSH_PORT = 2222
"""Port of the pods' sshd (an unprivileged choice; mpirun is told with ``plm_rsh_args``)."""
SSH_SECRET_MOUNT = "/etc/preflight-ssh"  # noqa: S105 - where the key Secret is mounted, not a secret
JUDGE_MOUNT = "/etc/preflight-judge"
JUDGE_FILE = "nccl_results.py"
JUDGE_SOURCE = Path(__file__).with_name(JUDGE_FILE)
"""The judge the NCCL Job runs on its log: this package's own parser, standard library only."""
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
"""Where AWS's nccl-tests.Dockerfile builds the test (``NCCL_TESTS_VERSION`` checkout, MPI=1)."""
MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
"""Open MPI's launcher in AWS's image (the EFA installer's Open MPI), by absolute path as AWS's MPIJob
runs it: Open MPI then takes its install prefix from that path and sets PATH and LD_LIBRARY_PATH for
the daemons it starts over ssh, whose login shells have none of the image's environment."""


def preflight_name(check: str, pool: str, limit: int = 63) -> str:
    """``<check>-<pool>``, shortened with a hash of the pool name where that passes ``limit``."""
    name = f"{check}-{pool}"
    if len(name) <= limit:
        return name
    return f"{name[: limit - 9]}-{hashlib.sha256(pool.encode()).hexdigest()[:8]}"


def _labels(name: str, check: str) -> dict[str, str]:
    return {
        "app": name,
        "app.kubernetes.io/name": check,
        "app.kubernetes.io/instance": name,
        COMPONENT_LABEL: PREFLIGHT_COMPONENT,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }


# --- DCGM diagnostics ------------------------------------------------------------------------------


DCGM_POD_CPU, DCGM_POD_MEMORY = "1", "2Gi"
"""Requests of a diagnostics pod besides its GPUs: the host engine and dcgmi (the GPU plugins do the work)."""


def dcgm_diag_script(level: int) -> str:
    """Start a host engine in the pod, wait until it answers, run the diagnostics, fail on a failed test.

    ``dcgmi diag`` exits non-zero when a test fails; its result table is checked for a ``Fail``
    cell too, so a version that reports failures only in the table still fails the pod.
    """
    return "\n".join(
        [
            "set -o pipefail",
            "nv-hostengine",
            "for attempt in $(seq 30); do dcgmi discovery -l > /dev/null 2>&1 && break; sleep 1; done",
            "report=$(mktemp)",
            f'dcgmi diag -r {level} | tee "$report"',
            "status=$?",
            """if grep -Eq '[|] *Fail' "$report"; then status=1; fi""",
            "exit $status",
        ]
    )


def dcgm_diag_job(
    pool: str, pool_label: tuple[str, str], nodes: int, gpus: int, level: int, image: str, namespace: str, active_deadline_seconds: int
) -> dict[str, Any]:
    """A Job that runs DCGM diagnostics once on each of a pool's ``nodes`` nodes (selected by the
    node label ``pool_label``), each pod holding all ``gpus`` GPUs of its node."""
    name = preflight_name("dcgm-diag", pool)
    labels = _labels(name, "dcgm-diag")
    selector = {"matchExpressions": [label_in("app", [name])]}
    key, value = pool_label
    container = {
        "name": "dcgm-diag",
        "image": image,
        "command": ["/bin/bash", "-c", dcgm_diag_script(level)],
        "resources": {
            "requests": {"cpu": DCGM_POD_CPU, "memory": DCGM_POD_MEMORY, GPU_RESOURCE: str(gpus)},
            "limits": {GPU_RESOURCE: str(gpus)},
        },
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    pod = {**whole_node_pod(container, (key, value), selector), "automountServiceAccountToken": False}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "completions": nodes,
            "parallelism": nodes,
            # A failed diagnostic is an answer, not a flake: no retries.
            "backoffLimit": 0,
            "activeDeadlineSeconds": active_deadline_seconds,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


# --- NCCL all-reduce -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NcclTestSpec:
    """One NCCL all-reduce test across a pool."""

    pool: str
    """Pool name (named in the objects' names)."""
    pool_label: tuple[str, str]
    """Node label that selects the pool's nodes, e.g. ``("eks.amazonaws.com/nodegroup", "p5-training")``."""
    instance_types: tuple[str, ...]
    """The pool's instance types; the baseline applies when there is exactly one."""
    nodes: int
    """Nodes to test across (at least 2)."""
    image: str
    """Image with Open MPI, sshd and nccl-tests (MPI=1)."""
    namespace: str
    priority_class: Optional[str]
    """PriorityClass of the pods (they take whole nodes, like training); None: the cluster's default."""
    min_bus_bandwidth_fraction: float
    """Fail below this fraction of the published baseline."""
    active_deadline_seconds: int
    """The Job's deadline (workers wait for the launcher until then at most)."""
    efa_devices_per_node: Optional[int] = None
    """EFA devices per pod. Default: every EFA device of the instance type."""

    @property
    def name(self) -> str:
        # Pod hostnames are <name>-<index>: the same limit as a training app's name.
        return preflight_name("nccl-test", self.pool, limit=TRAINING_APP_NAME_MAX)

    @property
    def min_bus_bandwidth_gbps(self) -> Optional[float]:
        """The bus bandwidth the run must reach at 2 GiB; None without a published baseline."""
        baseline = nccl_baseline(self.instance_types[0], self.nodes) if len(self.instance_types) == 1 else None
        if baseline is None:
            return None
        return round(baseline.bus_bandwidth_gbps * self.min_bus_bandwidth_fraction, 3)


def nccl_pod_requests(spec: NcclTestSpec) -> tuple[str, str]:
    """CPU and memory each NCCL pod requests: a training pod's (the node's room beside every DaemonSet
    this library can run there, less the reserve; ``node_fit``)."""
    training = _training_spec(spec)
    return training.pod_cpu, training.pod_memory


def _training_spec(spec: NcclTestSpec) -> TrainingJobSpec:
    return TrainingJobSpec(
        name=spec.name,
        nodes=spec.nodes,
        instance_types=spec.instance_types,
        priority_class=spec.priority_class,
        namespace=spec.namespace,
        efa=True,
        efa_devices_per_node=spec.efa_devices_per_node,
        image=spec.image,
        rendezvous_port=SSH_PORT,
    )


def nccl_test_script(spec: NcclTestSpec) -> str:
    """What every pod runs: sshd; then pod 0 waits for every peer's sshd, runs all_reduce_perf over
    them with mpirun (one rank per GPU, EFA through libfabric), judges the log, and releases the
    others, which wait for it."""
    training = _training_spec(spec)
    gpus = training.node_gpus
    ssh_options = f"-p {SSH_PORT} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"
    judge = [f"python3 {JUDGE_MOUNT}/{JUDGE_FILE} /tmp/nccl.log --at-bytes {NCCL_MAX_BYTES}"]
    if spec.min_bus_bandwidth_gbps is not None:
        judge.append(f"--min-bus-bandwidth {spec.min_bus_bandwidth_gbps}")
    mpirun = [
        MPIRUN, "--allow-run-as-root", "--tag-output",
        "-np", str(spec.nodes * gpus), "-N", str(gpus), "--hostfile", "/tmp/hostfile", "--bind-to", "none",  # noqa: S108 - the launcher pod's own /tmp
        "--mca", "plm_rsh_args", shlex.quote(ssh_options),
        "--mca", "pml", "^ucx", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_exclude", "lo,docker0,veth_def_agent",
        "-x", "PATH", "-x", "LD_LIBRARY_PATH", "-x", "FI_PROVIDER=efa", "-x", "FI_EFA_FORK_SAFE=1", "-x", "NCCL_DEBUG=WARN",
        ALL_REDUCE_PERF, "-b", "8", "-e", str(NCCL_MAX_BYTES), "-f", "2", "-g", "1", "-c", "1", "-n", "100",
    ]  # fmt: skip
    return "\n".join(
        [
            "set -u",
            "mkdir -p /root/.ssh /run/sshd",
            f"install -m 600 {SSH_SECRET_MOUNT}/id_ed25519 /root/.ssh/id_ed25519",
            f"install -m 600 {SSH_SECRET_MOUNT}/id_ed25519.pub /root/.ssh/authorized_keys",
            "ssh-keygen -A",
            f"/usr/sbin/sshd -p {SSH_PORT}",
            'if [ "$JOB_COMPLETION_INDEX" != 0 ]; then',
            "  until [ -e /tmp/preflight-done ]; do sleep 5; done",
            "  exit 0",
            "fi",
            ": > /tmp/hostfile",
            f"for i in $(seq 0 {spec.nodes - 1}); do",
            f'  host="{spec.name}-$i.{spec.name}"',
            f'  until ssh {ssh_options} "$host" true; do sleep 5; done',
            f'  echo "$host slots={gpus}" >> /tmp/hostfile',
            "done",
            f"{' '.join(mpirun)} 2>&1 | tee /tmp/nccl.log",
            "status=${PIPESTATUS[0]}",
            " ".join(judge) + " || status=1",
            f"for i in $(seq 1 {spec.nodes - 1}); do",
            f'  ssh {ssh_options} "{spec.name}-$i.{spec.name}" touch /tmp/preflight-done',
            "done",
            "exit $status",
        ]
    )


def nccl_ssh_secret(spec: NcclTestSpec, private_key: Any, public_key: Any) -> dict[str, Any]:
    """The Secret with the key every pod's sshd accepts and pod 0's mpirun logs in with (values may
    be Pulumi outputs)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{spec.name}-ssh", "namespace": spec.namespace, "labels": _labels(spec.name, "nccl-test")},
        "type": "Opaque",
        "stringData": {"id_ed25519": private_key, "id_ed25519.pub": public_key},
    }


def nccl_judge_config_map(spec: NcclTestSpec) -> dict[str, Any]:
    """The ConfigMap with the judge the launcher runs on its log."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{spec.name}-judge", "namespace": spec.namespace, "labels": _labels(spec.name, "nccl-test")},
        "data": {JUDGE_FILE: JUDGE_SOURCE.read_text()},
    }


def nccl_test_service(spec: NcclTestSpec) -> dict[str, Any]:
    """The headless Service that gives pod ``i`` the name ``<job>-<i>.<job>`` (TrainingJob's rendezvous Service, port sshd)."""
    service = rendezvous_service(_training_spec(spec))
    service["metadata"]["labels"] = _labels(spec.name, "nccl-test")
    service["spec"]["ports"] = [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT, "protocol": "TCP"}]
    return service


def nccl_test_job(spec: NcclTestSpec) -> dict[str, Any]:
    """The Indexed Job: TrainingJob's pod template (all GPUs, EFA devices and hugepages, one pod per
    node of the allowed type, close on the network), pinned to the pool, running ``nccl_test_script``."""
    training = _training_spec(spec)
    job = training_job(replace(training, command=("/bin/bash", "-c", nccl_test_script(spec))))
    labels = _labels(spec.name, "nccl-test")
    # The training template's own selectors and spreads match on `app`, which stays the job's name.
    labels["app"] = training.app_label
    job["metadata"]["labels"] = labels
    job["spec"]["backoffLimit"] = 0
    job["spec"]["activeDeadlineSeconds"] = spec.active_deadline_seconds
    template = job["spec"]["template"]
    template["metadata"]["labels"] = labels
    pod = template["spec"]
    key, value = spec.pool_label
    pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"].append(
        label_in(key, [value])
    )
    container = pod["containers"][0]
    container["name"] = "nccl-test"
    # torchrun's variables mean nothing to mpirun; the pods keep only what the script reads.
    container["env"] = [e for e in container["env"] if e["name"] == "FI_PROVIDER"]
    container["ports"] = [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}]
    container["volumeMounts"] += [
        {"name": "ssh-key", "mountPath": SSH_SECRET_MOUNT, "readOnly": True},
        {"name": "judge", "mountPath": JUDGE_MOUNT, "readOnly": True},
    ]
    pod["volumes"] += [
        {"name": "ssh-key", "secret": {"secretName": f"{spec.name}-ssh", "defaultMode": 0o400}},
        {"name": "judge", "configMap": {"name": f"{spec.name}-judge"}},
    ]
    return job


def nccl_test_objects(spec: NcclTestSpec, private_key: Any, public_key: Any) -> list[dict[str, Any]]:
    """Secret, ConfigMap, Service and Job of one NCCL test, in the order they are applied."""
    return [nccl_ssh_secret(spec, private_key, public_key), nccl_judge_config_map(spec), nccl_test_service(spec), nccl_test_job(spec)]
