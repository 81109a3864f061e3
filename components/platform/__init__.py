"""The whole platform of one stack: reading and checking a stack's configuration, the rules that span
layers, and ``GpuTrainingPlatform``, which composes every layer below."""

from .gpu_training_platform import GpuTrainingPlatform
from .gpu_training_in_cluster import GpuTrainingInCluster, GpuTrainingInClusterArgs
from .loading import load_stack_config, parse_platform_args, platform_args_from_settings, problems_from_validation_error
from .names import PLATFORM_NAME, generated_names, validate_names
from .program import stack_program
from .validation import validate_stack

__all__ = [
    "GpuTrainingPlatform",
    "GpuTrainingInCluster",
    "GpuTrainingInClusterArgs",
    "PLATFORM_NAME",
    "generated_names",
    "validate_names",
    "load_stack_config",
    "parse_platform_args",
    "platform_args_from_settings",
    "problems_from_validation_error",
    "stack_program",
    "validate_stack",
]
