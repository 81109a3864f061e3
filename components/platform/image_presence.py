"""Images the stack names in the deployer's own ECR exist before anything deploys.

Every image key of a part of the stack that is on (the health gate's three, the topology labeler's,
the smoke test's, the pre-flight checks', each training app's) is read when it names a private ECR
repository of the account `pulumi up` runs as (``aws.ecr_images``); a missing repository or tag is
refused with the key, before any resource registers. Not read, each for its reason:

- an image the stack builds itself (an Output): it is pushed by the same `pulumi up`;
- an image whose registry ``images.registryMirrors`` maps: the nodes pull the mirror's copy, and an
  ECR pull-through cache creates its repositories at the first pull;
- another account's image: the deployer cannot list that registry (a warning says so);
- any image while the deployer's account is not known (an offline render).
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pulumi

from ..aws.ecr_images import deployer_account, ecr_image, is_account_id, live_missing_reason
from ..aws.region import aws_provider_of
from ..config import GpuTrainingPlatformArgs, Problem
from ..config.inputs import is_unknown
from ..facts.images import registry_of


def image_keys(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, Any]]:
    """(key path, image) of each image key of the parts of the stack that are on and set."""
    gate = args.health_gate
    if gate.enabled:
        yield "healthGate.image", gate.image
        yield "healthGate.dcgmImage", gate.dcgm_image
        yield "healthGate.efaLoopbackImage", gate.efa_loopback_image
    if args.topology_labeler.enabled:
        yield "topologyLabeler.image", args.topology_labeler.image
    if args.smoke_test.enabled:
        yield "smokeTest.image", args.smoke_test.image
    if args.preflight.enabled:
        if args.preflight.dcgm_diag.enabled:
            yield "preflight.dcgmDiag.image", args.preflight.dcgm_diag.image
        if args.preflight.nccl.enabled:
            yield "preflight.nccl.image", args.preflight.nccl.image
    for i, app in enumerate(args.scheduling.training_apps):
        if app.job is not None:
            yield f"scheduling.trainingApps[{i}].job.image", app.job.image


def readable_images(args: GpuTrainingPlatformArgs) -> Iterator[tuple[str, str]]:
    """(key path, reference) of the image keys naming a private ECR image the nodes pull as named:
    set, known before deployment, and from a registry ``images.registryMirrors`` leaves alone."""
    for image_key, image in image_keys(args):
        if image is None or is_unknown(image) or registry_of(str(image)) in args.images.registry_mirrors:
            continue
        if ecr_image(str(image)) is not None:
            yield image_key, str(image)


def live_image_problems(args: GpuTrainingPlatformArgs, opts: Optional[pulumi.ResourceOptions] = None) -> list[Problem]:
    """A problem for each image key naming an image of the deployer's account that is not there,
    read through the AWS provider ``opts`` gives."""
    images = list(readable_images(args))
    if not images:
        return []
    invoke = pulumi.InvokeOptions(parent=opts.parent if opts is not None else None, provider=aws_provider_of(opts))
    account = deployer_account(invoke)
    if not is_account_id(account):
        return []  # offline: no account to read
    problems = []
    for image_key, reference in images:
        image = ecr_image(reference)
        assert image is not None  # noqa: S101 - readable_images yields ECR references only
        if image.account != account:
            pulumi.log.warn(f"{image_key}: {reference} is in account {image.account}, not {account} that `pulumi up` runs as, "
                            "so it is not read before deployment; the nodes pull it with that registry's repository policy")
            continue
        reason = live_missing_reason(image, invoke)
        if reason is not None:
            problems.append(Problem(image_key, f"{reference}: {reason}. Push it first ({image.pushed_as()}), or name an image "
                                          "that exists; nodes would fail to pull it (ErrImagePull)"))
    return problems
