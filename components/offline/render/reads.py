"""The provider functions (data sources) a preview of a stack calls, as far as an offline run can
tell: what it called, and what it could not call offline."""

from __future__ import annotations

from typing import Iterable

from ...config import GpuTrainingPlatformArgs
from ...facts.deployer_actions import ECR_IMAGE_READS, FOLLOWING_READS
from ...platform.image_presence import readable_images


def preview_reads(invoked: Iterable[str], args: GpuTrainingPlatformArgs) -> list[str]:
    """The provider functions a preview of the stack calls: those an offline run ``invoked``, those
    their answers lead to once the cluster runs (``FOLLOWING_READS``), and the reads of the images
    the stack names in the deployer's ECR, which an offline run, knowing no account, skips."""
    reads = set(invoked)
    for token in list(reads):
        reads.update(FOLLOWING_READS.get(token, ()))
    if next(readable_images(args), None) is not None:
        reads.update(ECR_IMAGE_READS)
    return sorted(reads)
