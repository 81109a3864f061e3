"""Whether an image in a private ECR repository exists, read before anything is registered.

A node pulls an image when a pod lands on it: a reference to a repository or tag nobody pushed makes
every such pod fail with ``ErrImagePull`` long after ``pulumi up`` succeeded. So an image the stack
names in the deployer's own account is read first: the account's repositories in the image's region
(``aws.ecr.get_repositories``, DescribeRepositories), then the repository's images
(``aws.ecr.get_images``, ListImages: every tag and digest). Listing first makes a missing repository
an answer, not a failed read (DescribeImages fails with RepositoryNotFoundException).

Another account's image is not read: listing its repositories is not possible
(DescribeRepositories lists the caller's registry only) and its images need that registry's
repository policy, which is the nodes' concern, not the deployer's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[^:@]+)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
"""A private ECR image reference: ``<account>.dkr.ecr.<region>.amazonaws.com/<repository>[:tag][@digest]``
(docs.aws.amazon.com/AmazonECR/latest/userguide/docker-pull-ecr-image.html)."""

_ACCOUNT = re.compile(r"^\d{12}$")


@dataclass(frozen=True)
class EcrImage:
    """An image in a private ECR repository, as its reference names it."""

    account: str
    """The registry's account ID."""
    region: str
    """The registry's region."""
    repository: str
    """The repository name (may hold ``/``)."""
    tag: Optional[str]
    """The tag; None when the reference names none."""
    digest: Optional[str]
    """The ``sha256:`` digest; None when the reference names none. The kubelet pulls by it when both are given."""

    def pushed_as(self) -> str:
        """How the reference names the image: the digest when it has one, else the tag."""
        return f"digest {self.digest}" if self.digest else f"tag {self.tag or 'latest'}"


def ecr_image(reference: str) -> Optional[EcrImage]:
    """The private ECR image ``reference`` names; None for any other registry."""
    match = _ECR_IMAGE.match(reference)
    if match is None:
        return None
    return EcrImage(match["account"], match["region"], match["repository"], match["tag"], match["digest"])


def is_account_id(value: object) -> bool:
    """Whether ``value`` is an AWS account ID (12 digits), not a placeholder or an Output."""
    return isinstance(value, str) and bool(_ACCOUNT.match(value))


def missing_reason(image: EcrImage, repositories: list[str], pushed: list[tuple[Optional[str], Optional[str]]]) -> Optional[str]:
    """Why ``image`` cannot be pulled, given the account's ``repositories`` in its region and the
    (tag, digest) pairs of its repository's images (ignored when it has no repository); None when
    it is there."""
    where = f"account {image.account} in {image.region}"
    if image.repository not in repositories:
        return f"has no ECR repository {image.repository} in {where}"
    if image.digest:
        found = any(digest == image.digest for _, digest in pushed)
    else:
        found = any(tag == (image.tag or "latest") for tag, _ in pushed)
    return None if found else f"ECR repository {image.repository} in {where} holds no image of {image.pushed_as()}"


def deployer_account(invoke: Optional[pulumi.InvokeOptions] = None) -> object:
    """The account the deployer's credentials belong to (GetCallerIdentity, which needs no permission)."""
    return aws.get_caller_identity(opts=invoke).account_id


def live_missing_reason(image: EcrImage, invoke: Optional[pulumi.InvokeOptions] = None) -> Optional[str]:
    """``missing_reason`` for what the deployer's account holds now (DescribeRepositories, then
    ListImages of the image's repository when it exists)."""
    repositories = list(aws.ecr.get_repositories(region=image.region, opts=invoke).names or [])
    pushed: list[tuple[Optional[str], Optional[str]]] = []
    if image.repository in repositories:
        listed = aws.ecr.get_images(repository_name=image.repository, region=image.region, opts=invoke).image_ids or []
        pushed = [(entry.image_tag or None, entry.image_digest or None) for entry in listed]
    return missing_reason(image, repositories, pushed)
