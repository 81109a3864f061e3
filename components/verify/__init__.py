"""The live-cluster check: the seed's validation checklist judged on a live cluster, plus what a
stack file declares (``eks-gpu-training-verify``). The top layer: it reads a cluster with the ``kubernetes`` client (the
``[verify]`` extra) and judges it with the facts, configuration and templates below it.

``read_snapshot`` lists what the checks need into a ``Snapshot`` of plain API objects; ``judge``
(and ``judge_seed``, ``judge_health``, ``judge_stack``, ``judge_fleet``) turn a snapshot into ``Row``s without touching the cluster;
``verify`` does both::

    from eks_gpu_training.verify import verify
    rows = verify(kubeconfig="kubeconfig.yaml", stack="prod")
    failing = [row for row in rows if row.status == "fail"]
"""

from .cli import EXIT_FAILED, EXIT_PASSED, EXIT_UNREADABLE, as_json, exit_status, judge, main, table, verify
from .fleet_workers import WorkerQueues, judge_fleet, read_workers
from .health import judge_health
from .rows import FAIL, PASS, SKIP, Row
from .seed import SEED_ITEMS, judge_seed
from .snapshot import ClusterUnreadable, Snapshot, read_snapshot
from .stack import StackRef, judge_stack, load_stack_args

__all__ = [
    "EXIT_FAILED",
    "EXIT_PASSED",
    "EXIT_UNREADABLE",
    "FAIL",
    "PASS",
    "SEED_ITEMS",
    "SKIP",
    "ClusterUnreadable",
    "Row",
    "Snapshot",
    "StackRef",
    "WorkerQueues",
    "as_json",
    "exit_status",
    "judge",
    "judge_fleet",
    "judge_health",
    "judge_seed",
    "judge_stack",
    "load_stack_args",
    "main",
    "read_snapshot",
    "read_workers",
    "table",
    "verify",
]
