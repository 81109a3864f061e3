"""The GPU checks' arguments (smoke test, pre-flight) from a stack's arguments: the same for the whole
stack and for its in-cluster half."""

from __future__ import annotations

from ..config import GpuTrainingPlatformArgs
from ..workloads.preflight_checks import PreflightChecksArgs, preflight_namespace, preflight_pools
from ..workloads.scheduling_policies import default_priority_class, smoke_test_pools
from ..workloads.gpu_smoke_test import GpuSmokeTestArgs


def smoke_test_args(args: GpuTrainingPlatformArgs) -> GpuSmokeTestArgs:
    """The nvidia-smi smoke test of every GPU pool, in ``smokeTest.namespace`` or the first training namespace."""
    smoke = args.smoke_test
    return GpuSmokeTestArgs(
        pools=smoke_test_pools(args),
        namespace=smoke.namespace if smoke.namespace is not None else args.scheduling.namespaces[0].name,
        image=smoke.image,
        timeout_minutes=smoke.timeout_minutes,
    )


def preflight_checks_args(args: GpuTrainingPlatformArgs) -> PreflightChecksArgs:
    """DCGM diagnostics and the NCCL test of the stack's pools, at the default priority class."""
    namespace = preflight_namespace(args)
    assert namespace is not None, "validate_preflight requires a namespace when preflight is enabled"  # noqa: S101 - an invariant of validated args
    return PreflightChecksArgs(
        pools=preflight_pools(args),
        namespace=namespace,
        priority_class=default_priority_class(args.scheduling.priority_classes),
        config=args.preflight,
    )
