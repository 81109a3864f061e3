"""An image the stack names in the deployer's own ECR is read before anything registers: a missing
repository or tag is refused with its key; an image that is there, another account's, one the
stack builds or one pulled through a mirror passes."""

from __future__ import annotations

import copy

from tests.support.harness import PlausibleMocks, refusal_text, run_main, stack_config

from eks_gpu_training.aws.ecr_images import EcrImage, ecr_image, missing_reason
from eks_gpu_training.config import ConfigError

PROD_ACCOUNT = "444455556666"
"""The account prod's file names its images in."""
LOOPBACK = "444455556666.dkr.ecr.us-west-2.amazonaws.com/nccl-tests:efa1.47.0-ncclv2.29.3-1-testsv2.17.9"
DIGEST = "sha256:" + "ab" * 32
GET_REPOSITORIES = "aws:ecr/getRepositories:getRepositories"
GET_IMAGES = "aws:ecr/getImages:getImages"


class Account(PlausibleMocks):
    """`pulumi up` as a principal of ``account``, whose ECR in us-west-2 holds ``images``:
    repository name to the (tag, digest) pairs pushed to it."""

    def __init__(self, account: str = PROD_ACCOUNT, images: dict[str, list[tuple[str, str]]] | None = None):
        super().__init__()
        self.account = account
        self.images = images or {}

    def call(self, args):
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": self.account, "arn": f"arn:aws:iam::{self.account}:user/deployer", "userId": "AIDATEST"}
        if args.token == GET_REPOSITORIES:
            return {"names": sorted(self.images), "region": args.args.get("region"), "id": "us-west-2"}
        if args.token == GET_IMAGES:
            pushed = self.images[args.args["repositoryName"]]  # listing a repository that does not exist fails
            return {
                "repositoryName": args.args["repositoryName"],
                "imageIds": [{"imageTag": tag, "imageDigest": digest} for tag, digest in pushed],
                "region": args.args.get("region"),
            }
        return super().call(args)


def prod(**gate) -> dict:
    config = copy.deepcopy(stack_config("prod"))
    config["eks-gpu-training:healthGate"].update(gate)
    return config


def tokens(graph) -> list[str]:
    return [token for token, _ in graph.invokes]


def test_prod_on_an_account_without_the_loopback_repository_is_refused_before_anything_registers():
    graph = run_main(prod(), mocks=Account(images={"other": [("v1", DIGEST)]}))
    assert isinstance(graph.error, ConfigError), graph.error
    assert graph.resources == []
    [problem] = graph.error.problems
    assert problem.path == "healthGate.efaLoopbackImage"
    assert problem.message.startswith(f"{LOOPBACK}: has no ECR repository nccl-tests in account {PROD_ACCOUNT} in us-west-2. Push it first")
    assert "healthGate.efaLoopbackImage" in refusal_text(graph.error)


def test_a_tag_nobody_pushed_is_refused_with_its_key():
    graph = run_main(prod(), mocks=Account(images={"nccl-tests": [("efa1.43.2", DIGEST)]}))
    assert graph.resources == []
    [problem] = graph.error.problems
    assert problem.path == "healthGate.efaLoopbackImage"
    assert "ECR repository nccl-tests in account 444455556666 in us-west-2 holds no image of tag efa1.47.0-ncclv2.29.3-1-testsv2.17.9" in problem.message


def test_prod_deploys_once_the_loopback_image_is_pushed():
    graph = run_main(prod(), mocks=Account(images={"nccl-tests": [("efa1.47.0-ncclv2.29.3-1-testsv2.17.9", DIGEST)]}))
    assert graph.error is None, refusal_text(graph.error)
    assert (GET_IMAGES, {"repositoryName": "nccl-tests", "region": "us-west-2"}) in graph.invokes
    assert graph.resources


def test_every_image_key_of_the_account_is_read_and_each_missing_one_named():
    config = prod(image=f"{PROD_ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/tools/health-gate@{DIGEST}")
    config["eks-gpu-training:scheduling"]["trainingApps"][1]["job"]["image"] = f"{PROD_ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/train:v3"
    graph = run_main(config, mocks=Account(images={"tools/health-gate": [("", "sha256:" + "cd" * 32)]}))
    assert [p.path for p in graph.error.problems] == [
        "healthGate.image", "healthGate.efaLoopbackImage", "scheduling.trainingApps[1].job.image",
    ]
    assert f"holds no image of digest {DIGEST}" in graph.error.problems[0].message


def test_another_accounts_image_is_not_read():
    graph = run_main(prod(), mocks=Account(account="123456789012"))
    assert graph.error is None, refusal_text(graph.error)
    assert GET_REPOSITORIES not in tokens(graph)


def test_an_image_pulled_through_a_mirror_is_not_read():
    config = prod()
    config["eks-gpu-training:images"] = {"registryMirrors": {"444455556666.dkr.ecr.us-west-2.amazonaws.com": "harbor.example.com/ecr"}}
    graph = run_main(config, mocks=Account())
    assert GET_REPOSITORIES not in tokens(graph)
    assert not any(p.path == "healthGate.efaLoopbackImage" for p in getattr(graph.error, "problems", []))


def test_a_stack_without_ecr_images_reads_no_registry():
    graph = run_main(prod(enabled=False), mocks=Account())
    assert graph.error is None, refusal_text(graph.error)
    assert GET_REPOSITORIES not in tokens(graph)


# The pure rule, on plain data.


def test_a_private_ecr_reference_is_split_into_account_region_repository_tag_and_digest():
    assert ecr_image(f"111122223333.dkr.ecr.eu-central-1.amazonaws.com/team/app:v1@{DIGEST}") == EcrImage(
        "111122223333", "eu-central-1", "team/app", "v1", DIGEST)
    assert ecr_image("public.ecr.aws/hpc-cloud/nccl-tests:v1") is None
    assert ecr_image("nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04") is None


def test_a_digest_decides_over_the_tag_beside_it():
    image = ecr_image(f"111122223333.dkr.ecr.us-west-2.amazonaws.com/app:v1@{DIGEST}")
    assert image is not None
    assert missing_reason(image, ["app"], [("v1", "sha256:" + "cd" * 32)]) is not None  # the tag moved to other content
    assert missing_reason(image, ["app"], [(None, DIGEST)]) is None


def test_an_untagged_reference_means_latest():
    image = ecr_image("111122223333.dkr.ecr.us-west-2.amazonaws.com/app")
    assert image is not None
    assert missing_reason(image, ["app"], [("latest", DIGEST)]) is None
    assert missing_reason(image, ["app"], [("v1", DIGEST)]) == "ECR repository app in account 111122223333 in us-west-2 holds no image of tag latest"
