"""Published NCCL all-reduce bus bandwidths, per instance type and node count, that a pool's
pre-flight NCCL test is judged against.

Every entry is a figure someone published from a real run, with where it comes from; none is
derived or extrapolated. Bus bandwidth (``busbw``) is nccl-tests' rank-count-independent figure
(``algbw × 2(n-1)/n`` for all-reduce), so it compares across runs of the same shape. A pool whose
instance type and node count have no entry is judged on correctness only (``#wrong`` and a
complete run), until the stack gives a baseline of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

AWSOME_DISTRIBUTED_TRAINING = (
    "aws-samples/awsome-distributed-training @ 7217859, micro-benchmarks/nccl-tests/README.md"
)
"""AWS's distributed-training samples: the nccl-tests README with its published all_reduce_perf logs."""


@dataclass(frozen=True)
class NcclBaseline:
    """A published all_reduce_perf result for one instance type and node count."""

    instance_type: str
    nodes: int
    message_bytes: int
    """Message size the figure is read at."""
    bus_bandwidth_gbps: float
    """Out-of-place bus bandwidth at that size, GB/s."""
    source: str
    """Where the figure is published, precisely enough to find the log again."""


NCCL_BASELINES: tuple[NcclBaseline, ...] = (
    NcclBaseline(
        instance_type="p5.48xlarge",
        nodes=2,
        message_bytes=2 * 1024**3,
        bus_bandwidth_gbps=437.79,
        source=f"{AWSOME_DISTRIBUTED_TRAINING}, section 'Amazon EKS', step 4: MPIJob log on 2 x p5.48xlarge "
        "(EFA installer 1.28.0, aws-ofi-nccl v1.7.3-aws, NCCL 2.18.5)",
    ),
    NcclBaseline(
        instance_type="p4de.24xlarge",
        nodes=2,
        message_bytes=2 * 1024**3,
        bus_bandwidth_gbps=78.33,
        source=f"{AWSOME_DISTRIBUTED_TRAINING}, section 'Results': Slurm log on 2 x p4de.24xlarge, 8 B to 2 GB",
    ),
)
"""The seeded table. The same README also shows 2 x p5.48xlarge under Slurm at 443.72 GB/s for
2 GiB (487.09 GB/s at 16 GiB); the EKS figure is the one kept, since that is how these pools run."""


def nccl_baseline(instance_type: str, nodes: int) -> Optional[NcclBaseline]:
    """The published baseline for ``nodes`` nodes of ``instance_type``; None when there is none."""
    return next((b for b in NCCL_BASELINES if b.instance_type == instance_type and b.nodes == nodes), None)
