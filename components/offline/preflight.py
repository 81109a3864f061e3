"""``eks-gpu-training-preflight``: the pre-flight checks for an existing cluster, and the judge of an
NCCL log.

    eks-gpu-training-preflight dcgm --pool p5-training --instance-type p5.48xlarge --nodes 2 | kubectl apply -f -
    eks-gpu-training-preflight nccl --pool p5-training --instance-type p5.48xlarge --nodes 2 --image IMAGE | kubectl apply -f -
    kubectl logs -n training -l batch.kubernetes.io/job-name=nccl-test-p5-training,batch.kubernetes.io/job-completion-index=0 --tail=-1 > nccl.log
    eks-gpu-training-preflight judge nccl.log --instance-type p5.48xlarge --nodes 2

``dcgm`` and ``nccl`` print the same objects ``pulumi up`` creates with ``preflight.enabled`` (the
templates of ``workloads.preflight_jobs``); ``--pool-label karpenter.sh/nodepool=<pool>`` selects a
Karpenter pool's nodes. ``nccl`` makes a fresh SSH key with ``ssh-keygen`` for its Secret.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import yaml

from ..config import NCCL_MAX_BYTES, ConfigError, DcgmDiagConfig, NcclTestConfig, PreflightConfig
from ..facts.catalog import GPU_INSTANCE_TYPES, efa_interface_count
from ..facts.gpu_nodes import GPU_POOL_KEY
from ..facts.nccl_baselines import nccl_baseline
from ..workloads.nccl_results import judge_all_reduce, parse_all_reduce
from ..workloads.preflight_jobs import NcclTestSpec, dcgm_diag_job, nccl_test_objects
from .commands import run_command

DEFAULTS = PreflightConfig()


def _pool_label(options: argparse.Namespace) -> tuple[str, str]:
    if options.pool_label is None:
        return (GPU_POOL_KEY, options.pool)
    key, _, value = options.pool_label.partition("=")
    if not key or not value:
        raise SystemExit(f"--pool-label '{options.pool_label}': use KEY=VALUE, e.g. karpenter.sh/nodepool={options.pool}")
    return key, value


def _instance_type(name: str) -> str:
    if name not in GPU_INSTANCE_TYPES:
        raise argparse.ArgumentTypeError(f"'{name}' is not a GPU instance type of the catalog; allowed: {', '.join(GPU_INSTANCE_TYPES)}")
    return name


def _dump(objects: list[dict]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, width=1_000_000)


def _dcgm(options: argparse.Namespace) -> int:
    config = DcgmDiagConfig(level=options.level, image=options.image)
    job = dcgm_diag_job(
        options.pool,
        _pool_label(options),
        options.nodes,
        GPU_INSTANCE_TYPES[options.instance_type].gpus,
        config.level,
        config.image,
        options.namespace,
        options.timeout_minutes * 60,
    )
    sys.stdout.write(_dump([job]))
    return 0


def ssh_key_pair() -> tuple[str, str]:
    """A fresh ed25519 key pair (private, public) in OpenSSH format, from ``ssh-keygen``."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        raise SystemExit("ssh-keygen is not on the PATH; it makes the key the NCCL pods log in to each other with")
    with tempfile.TemporaryDirectory() as folder:
        key = Path(folder) / "id_ed25519"
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-C", "nccl-test", "-f", str(key)], check=True)
        return key.read_text(), key.with_suffix(".pub").read_text()


def _nccl(options: argparse.Namespace) -> int:
    config = NcclTestConfig(image=options.image, min_bus_bandwidth_fraction=options.fraction)
    if options.nodes < 2:
        raise SystemExit("--nodes: an all-reduce across nodes needs at least 2")
    if efa_interface_count([options.instance_type]) == 0:
        raise SystemExit(f"--instance-type: {options.instance_type} has no EFA")
    assert config.image is not None, "argparse requires --image for the nccl command"  # noqa: S101 - an invariant of the parser
    spec = NcclTestSpec(
        pool=options.pool,
        pool_label=_pool_label(options),
        instance_types=(options.instance_type,),
        nodes=options.nodes,
        image=config.image,
        namespace=options.namespace,
        priority_class=options.priority_class,
        min_bus_bandwidth_fraction=config.min_bus_bandwidth_fraction,
        active_deadline_seconds=options.timeout_minutes * 60,
        efa_devices_per_node=options.efa_devices,
    )
    private_key, public_key = ssh_key_pair()
    sys.stdout.write(_dump(nccl_test_objects(spec, private_key, public_key)))
    return 0


def _judge(options: argparse.Namespace) -> int:
    NcclTestConfig(min_bus_bandwidth_fraction=options.fraction)
    text = sys.stdin.read() if options.log == "-" else Path(options.log).read_text(errors="replace")
    minimum, at_bytes, source = None, NCCL_MAX_BYTES, "no published baseline: judged on correctness only"
    if options.baseline_gbps is not None:
        minimum, source = options.baseline_gbps * options.fraction, f"baseline {options.baseline_gbps} GB/s given on the command line"
    elif (baseline := nccl_baseline(options.instance_type, options.nodes)) is not None:
        minimum, at_bytes = baseline.bus_bandwidth_gbps * options.fraction, baseline.message_bytes
        source = f"baseline {baseline.bus_bandwidth_gbps} GB/s at {baseline.message_bytes} bytes: {baseline.source}"
    verdict = judge_all_reduce(parse_all_reduce(text), at_bytes=at_bytes, min_bus_bandwidth_gbps=minimum)
    print(verdict.summary())
    print(f"{options.nodes} x {options.instance_type}, {source}" + (f"; required {minimum:.2f} GB/s ({options.fraction:.0%})" if minimum is not None else ""))
    return 0 if verdict.passed else 1


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="eks-gpu-training-preflight", description=__doc__.split("\n\n")[0])
    commands = root.add_subparsers(dest="command", required=True)

    def pool_arguments(command: argparse.ArgumentParser) -> None:
        command.add_argument("--pool", required=True, help="pool name (the EKS node group's, or the Karpenter NodePool's)")
        command.add_argument("--pool-label", help=f"KEY=VALUE node label of the pool's nodes (default {GPU_POOL_KEY}=<pool>)")
        command.add_argument("--instance-type", required=True, type=_instance_type, help="the pool's instance type")
        command.add_argument("--nodes", required=True, type=int, help="nodes to check (one pod each)")
        command.add_argument("--namespace", default="training", help="namespace of the objects (default training)")
        command.add_argument("--timeout-minutes", type=int, default=DEFAULTS.timeout_minutes, help=f"the Job's deadline (default {DEFAULTS.timeout_minutes})")

    dcgm = commands.add_parser("dcgm", help="print the DCGM diagnostics Job")
    pool_arguments(dcgm)
    dcgm.add_argument("--level", type=int, default=DEFAULTS.dcgm_diag.level, help=f"dcgmi diag -r level (default {DEFAULTS.dcgm_diag.level})")
    dcgm.add_argument("--image", default=DEFAULTS.dcgm_diag.image, help=f"DCGM image (default {DEFAULTS.dcgm_diag.image})")
    dcgm.set_defaults(run=_dcgm)

    nccl = commands.add_parser("nccl", help="print the NCCL all-reduce test (Secret, ConfigMap, Service, Indexed Job)")
    pool_arguments(nccl)
    nccl.add_argument("--image", required=True, help="image with Open MPI, sshd and nccl-tests (AWS's nccl-tests.Dockerfile)")
    nccl.add_argument("--priority-class", default="training-critical", help="PriorityClass of the pods (default training-critical)")
    nccl.add_argument("--efa-devices", type=int, default=None, help="EFA devices per pod (default: all of the instance type's)")
    nccl.add_argument("--fraction", type=float, default=DEFAULTS.nccl.min_bus_bandwidth_fraction, help="fail below this fraction of the baseline")
    nccl.set_defaults(run=_nccl)

    judge = commands.add_parser("judge", help="judge an all_reduce_perf log against the published baseline")
    judge.add_argument("log", help="the launcher's log, or - for standard input")
    judge.add_argument("--instance-type", required=True, type=_instance_type)
    judge.add_argument("--nodes", required=True, type=int)
    judge.add_argument("--fraction", type=float, default=DEFAULTS.nccl.min_bus_bandwidth_fraction, help="fail below this fraction of the baseline (default 0.9)")
    judge.add_argument("--baseline-gbps", type=float, default=None, help="a baseline of your own, GB/s at 2 GiB (default: the published one)")
    judge.set_defaults(run=_judge)
    return root


def main(argv: Optional[list[str]] = None) -> int:
    options = parser().parse_args(argv)
    try:
        return options.run(options)
    except ConfigError as error:
        # The settings models refuse a bad option as a ConfigError whose key path ends in its field.
        options_by_field = {"min_bus_bandwidth_fraction": "fraction"}
        for problem in error.problems:
            field = problem.path.rsplit(".", 1)[-1]
            print(f"--{options_by_field.get(field, field).replace('_', '-')}: {problem.message}", file=sys.stderr)
        return 2


def cli() -> int:
    """``python -m``: ``main``, exiting as every command does (the installed ``eks-gpu-training-preflight`` is
    ``commands.preflight``, which also keeps the collector off)."""
    return run_command(main)


if __name__ == "__main__":
    sys.exit(cli())
