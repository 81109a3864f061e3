"""The rules of a whole stack: the configuration's own cross-key rules plus the scheduling rules,
which build on the workload templates (quota arithmetic, the training Job each app becomes)."""

from __future__ import annotations

from ..config import GpuTrainingPlatformArgs, Problem, validate_platform
from ..workloads.preflight_checks import validate_preflight
from ..workloads.scheduling_policies import validate_scheduling


def validate_stack(args: GpuTrainingPlatformArgs) -> list[Problem]:
    """Every rule of the stack that involves more than one key, each problem with its key path."""
    return [*validate_platform(args), *validate_scheduling(args), *validate_preflight(args)]
