"""``python -m eks_gpu_training.verify``: the same command as ``eks-gpu-training-verify``."""

import sys

from .cli import cli

sys.exit(cli())
