"""The stack program: read and check this stack's configuration, build the platform (or only its
in-cluster half), export its outputs (``eks_gpu_training.platform.program``)."""

from eks_gpu_training import stack_program

stack_program()
