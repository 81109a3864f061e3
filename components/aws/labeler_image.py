"""The images of the platform's own programs (the topology labeler, the health gate): each built
from its folder with docker-build and pushed to a private ECR repository that the stack creates,
within the same Pulumi graph."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Mapping

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
import pulumi_docker_build as docker_build

LABELER_DIR = Path(__file__).resolve().parent.parent / "labeler"
"""The program and its Dockerfile; the image's build context is this folder alone."""
HEALTH_GATE_DIR = Path(__file__).resolve().parent.parent / "healthgate"
"""The health gate's program and Dockerfile, built the same way."""

IMAGE_PLATFORM = docker_build.Platform.LINUX_AMD64
"""GPU training nodes are x86_64 (the GPU catalog lists x86_64 NVIDIA types only)."""

REPOSITORY_SUFFIX = "topology-labeler"
"""The ECR repository is ``<cluster>/topology-labeler``."""


def ecr_repository_name(cluster_name: str, suffix: str = REPOSITORY_SUFFIX) -> str:
    """``<cluster>/<suffix>`` (``topology-labeler`` by default), lowercased with runs of other
    characters as one ``-`` (ECR repository names allow lowercase letters, digits and single
    separators only)."""
    prefix = re.sub(r"[^a-z0-9]+", "-", cluster_name.lower()).strip("-")
    return f"{prefix}/{suffix}"


ECR_LIFECYCLE_POLICY = json.dumps(
    {
        "rules": [
            {
                "rulePriority": 1,
                "description": "Drop untagged images a week after push",
                "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": 7},
                "action": {"type": "expire"},
            },
            {
                "rulePriority": 2,
                "description": "Keep the 10 most recent images",
                "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 10},
                "action": {"type": "expire"},
            },
        ]
    }
)
"""Build artefacts of this stack only: the DaemonSet always runs the newest push, so old ones go."""


def _ignore_pattern(pattern: str) -> re.Pattern[str]:
    # .dockerignore wildcards: '*' and '?' stay within one path segment.
    return re.compile("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in pattern))


def build_context_files(directory: Path = LABELER_DIR) -> list[str]:
    """The files of ``directory`` that its ``.dockerignore`` lets into the build context (the rules
    in order, the last matching one wins, ``!`` re-includes; a file is excluded with its folder)."""
    rules = []
    ignore_file = directory / ".dockerignore"
    if ignore_file.exists():
        for line in ignore_file.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                rules.append((line.startswith("!"), _ignore_pattern(line.lstrip("!").strip("/"))))

    def excluded(path: str) -> bool:
        parts = path.split("/")
        result = False
        for include, pattern in rules:
            if any(pattern.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
                result = not include
        return result

    files = (p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    return sorted(f for f in files if not excluded(f))


BASE_IMAGE_ARG = "PYTHON_IMAGE"
"""The Dockerfiles' build argument naming their base image (by tag in the Dockerfile)."""


def dockerfile_base(directory: Path = LABELER_DIR) -> str:
    """The base image ``directory``'s Dockerfile names by default (``ARG PYTHON_IMAGE=...``)."""
    for line in (directory / "Dockerfile").read_text().splitlines():
        if line.startswith(f"ARG {BASE_IMAGE_ARG}="):
            return line.split("=", 1)[1].strip()
    raise ValueError(f"{directory / 'Dockerfile'} has no ARG {BASE_IMAGE_ARG}=<image>")


def build_context_tag(directory: Path = LABELER_DIR) -> str:
    """A tag that names the image's source: a hash of the Dockerfile and every file the build sees."""
    digest = hashlib.sha256()
    for relative in ["Dockerfile", *build_context_files(directory)]:
        digest.update(relative.encode() + b"\0" + (directory / relative).read_bytes() + b"\0")
    return f"src-{digest.hexdigest()[:16]}"


def build_context_location(directory: Path = LABELER_DIR, working_directory: Path | None = None) -> str:
    """Where docker-build finds the build context, as the Image's ``context.location`` input.

    The location is part of the Image's inputs, so a location that differs between two machines
    makes every `pulumi up` from the other machine an update (a rebuild and push). It is therefore
    relative to the program's working directory (the Pulumi project folder) whenever the package
    lies under it: ``components/labeler`` in this repository's checkouts, and
    ``.venv/lib/python3.X/site-packages/eks_gpu_training/labeler`` for a project that installs the
    package into its own venv; both are the same on every machine with that layout. A package
    installed outside the project has no such stable path; it is then given absolutely (pin
    ``topologyLabeler.image`` to a prebuilt image to keep such stacks free of per-machine diffs).
    """
    cwd = (working_directory or Path.cwd()).resolve()
    directory = directory.resolve()
    if directory.is_relative_to(cwd):
        return directory.relative_to(cwd).as_posix()
    return directory.as_posix()


def build_and_push(
    name: str, cluster_name: pulumi.Input[str], tags: Tags, parent: pulumi.Resource, region: str,
    directory: Path = LABELER_DIR, repository_suffix: str = REPOSITORY_SUFFIX, base_digests: Mapping[str, str] | None = None,
) -> pulumi.Output[str]:
    """Build ``directory`` (``components/labeler`` by default), push it to a private ECR repository
    ``<cluster>/<repository_suffix>`` in ``region`` (children ``{name}-repository`` and
    ``{name}-image`` of ``parent``) and return the digest reference of the push. The Dockerfile's base
    is built from the digest ``base_digests`` (``images.digests``) holds for it, when it holds one."""
    tags = tag_map(tags)
    repository = aws.ecr.Repository(
        f"{name}-repository",
        name=pulumi.Output.from_input(cluster_name).apply(lambda cluster: ecr_repository_name(cluster, repository_suffix)),
        image_scanning_configuration={"scan_on_push": True},
        # The DaemonSet runs the pushed digest, which no tag move can change. Immutable tags would
        # instead fail `pulumi up` whenever docker-build rebuilds without the source changing (its
        # context hash also covers file modes, which differ between checkouts).
        image_tag_mutability="MUTABLE",
        # The repository holds nothing but this stack's build output.
        force_delete=True,
        tags=tags,
        region=region,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.ecr.LifecyclePolicy(
        f"{name}-repository-lifecycle",
        repository=repository.name,
        policy=ECR_LIFECYCLE_POLICY,
        region=region,
        opts=pulumi.ResourceOptions(parent=repository),
    )
    token = aws.ecr.get_authorization_token_output(
        registry_id=repository.registry_id, region=region, opts=pulumi.InvokeOutputOptions(parent=parent)
    )
    tag = build_context_tag(directory)
    location = build_context_location(directory)
    base = dockerfile_base(directory)
    locked_base = (base_digests or {}).get(base)
    image = docker_build.Image(
        f"{name}-image",
        context={"location": location},
        dockerfile={"location": f"{location}/Dockerfile"},
        # `pulumi preview` needs no Docker daemon: the image is built and pushed by `pulumi up` only
        # (docker-build still checks the Dockerfile's syntax at preview, which needs no daemon).
        build_on_preview=False,
        platforms=[IMAGE_PLATFORM],
        # Only with a lock entry, so a stack without images.lock keeps its build inputs.
        build_args={BASE_IMAGE_ARG: f"{base}@{locked_base}"} if locked_base else None,
        push=True,
        tags=[repository.repository_url.apply(lambda url: f"{url}:{tag}")],
        registries=[{"address": repository.repository_url, "username": token.user_name, "password": token.password}],
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return pulumi.Output.all(repository.repository_url, image.digest).apply(lambda parts: f"{parts[0]}@{parts[1]}")
