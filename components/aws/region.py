"""Where a component's AWS resources go.

pulumi-aws 7 takes a ``region`` input on every regional resource and look-up, overriding the
provider's region; every component of this library passes the region it was given (its own
``region`` argument or its ``ClusterRef``'s) to each of them, so an AWS provider in ``opts`` only
supplies credentials and settings. pulumi-eks's ``Cluster`` has no ``region`` input: it goes where
its AWS provider points, so ``cluster_aws_provider`` chooses that provider.

An AWS provider whose region differs from the component's is a mistake (the ref would describe a
cluster in one region while the provider talks to another); the region of a provider is an Output,
so ``check_provider_region`` checks it once it resolves, which under ``pulumi preview`` happens
before anything is created.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Optional

import pulumi
import pulumi_aws as aws

from ..config import ConfigError, Problem


def stack_region() -> Optional[str]:
    """The stack's ``aws:region``, where the default AWS provider puts what has no region of its own."""
    return pulumi.Config("aws").get("region")


def aws_provider_of(opts: Optional[pulumi.ResourceOptions] = None, resource: Optional[pulumi.Resource] = None) -> Optional[pulumi.ProviderResource]:
    """The AWS provider a registered ``resource`` passes to its children (given in its ``opts`` or
    inherited from its parent), or, before anything is registered, the one ``opts`` names."""
    if resource is not None:
        return (getattr(resource, "_providers", None) or {}).get("aws")
    if opts is None:
        return None
    if isinstance(opts.provider, pulumi.ProviderResource) and opts.provider.package == "aws":
        return opts.provider
    providers: Any = opts.providers
    if isinstance(providers, dict) and providers.get("aws") is not None:
        return providers["aws"]
    if isinstance(providers, (list, tuple)):
        found = [p for p in providers if getattr(p, "package", None) == "aws"]
        if found:
            return found[0]
    return aws_provider_of(resource=opts.parent) if opts.parent is not None else None


def provider_region_problem(region: Optional[str], provider_region: Optional[str], path: str) -> Optional[Problem]:
    """The problem of an AWS provider in ``provider_region`` serving a component in ``region``; None
    when they agree or either is not known (a provider without a region takes the stack's)."""
    if region is None or not provider_region or provider_region == region:
        return None
    return Problem(
        path,
        f"the AWS provider in opts is for {provider_region}, the component for {region}; "
        "pass a provider for the same region, or none",
    )


def check_provider_region(provider: Optional[pulumi.ProviderResource], region: str, path: str) -> None:
    """Fail the run with a ``ConfigError`` naming ``path`` once the region of ``provider`` (an
    ``aws.Provider``) is known to differ from ``region``; unknown provider regions are skipped. The
    SDK waits for every pending ``apply`` before a run ends, so the check needs no consumer, and
    nothing is created inside it."""
    provider_region = getattr(provider, "region", None) if provider is not None else None
    if provider_region is None:
        return

    def agree(value: Optional[str]) -> Optional[str]:
        problem = provider_region_problem(region, value, path)
        if problem is not None:
            raise ConfigError([problem])
        return value

    pulumi.Output.from_input(provider_region).apply(agree)


CARRIED_SETTINGS = {"profile": "profile", "assumeRoles": "assume_roles", "defaultTags": "default_tags"}
"""The stack's ``aws:`` settings a regional provider carries over from the default provider, with
the ``aws.Provider`` argument each becomes: its credentials (profile, assumed roles) and default
tags, so a cluster outside the stack's region is made like the rest of the stack."""


def _config_keys(input_type: type) -> dict[str, str]:
    """The camelCase keys a stack file writes for a pulumi-aws input type, to its Python parameters
    (``roleArn`` to ``role_arn``), read from the type's own signature."""
    parameters = [p for p in inspect.signature(input_type).parameters if p != "__self__"]
    return {p.split("_")[0] + "".join(part.title() for part in p.split("_")[1:]): p for p in parameters}


def _input_type(input_type: type, value: Any, path: str, problems: list[Problem]) -> Any:
    """``value`` (a mapping read from the stack) as ``input_type``; a problem at ``path`` for a key
    the type does not take."""
    if not isinstance(value, dict):
        problems.append(Problem(path, f"must be a mapping, got {type(value).__name__}"))
        return None
    keys = _config_keys(input_type)
    unknown = sorted(set(value) - set(keys))
    problems.extend(Problem(f"{path}.{key}", f"unknown key; allowed: {', '.join(sorted(keys))}") for key in unknown)
    return input_type(**{keys[key]: item for key, item in value.items() if key in keys})


def stack_provider_settings() -> tuple[dict[str, Any], list[Problem]]:
    """The ``CARRIED_SETTINGS`` the stack sets, as ``aws.Provider`` keyword arguments, and a problem
    for each key of them pulumi-aws would not take. A setting the stack keeps secret stays secret."""
    config = pulumi.Config("aws")
    settings: dict[str, Any] = {}
    problems: list[Problem] = []
    profile = config.get("profile")
    if profile:
        settings["profile"] = profile
    roles = config.get_object("assumeRoles")
    if roles:
        if isinstance(roles, list):
            settings["assume_roles"] = [
                _input_type(aws.ProviderAssumeRoleArgs, role, f"aws:assumeRoles[{i}]", problems) for i, role in enumerate(roles)
            ]
        else:
            problems.append(Problem("aws:assumeRoles", f"must be a list of roles, got {type(roles).__name__}"))
    tags = config.get_object("defaultTags")
    if tags:
        settings["default_tags"] = _input_type(aws.ProviderDefaultTagsArgs, tags, "aws:defaultTags", problems)
    for key, argument in CARRIED_SETTINGS.items():
        if argument in settings and pulumi.runtime.is_config_secret(f"aws:{key}"):
            settings[argument] = pulumi.Output.secret(settings[argument])
    return settings, problems


def cluster_aws_provider(
    name: str, region: str, parent: pulumi.Resource, settings: Optional[dict[str, Any]] = None
) -> Optional[pulumi.ProviderResource]:
    """The AWS provider a ``pulumi_eks.Cluster`` in ``region`` under ``parent`` is created with: the
    one ``parent`` passes on (from its ``opts`` or its own parent) if any; none (the stack's default)
    when the stack's ``aws:region`` is ``region``; otherwise a provider ``<name>-aws`` for ``region``
    with the stack's ``settings`` (``stack_provider_settings``: its profile, assumed roles and
    default tags, as the default provider has them); other credentials come from the environment,
    as for the default provider (pass your own provider in ``opts`` to choose them)."""
    given = aws_provider_of(resource=parent)
    if given is not None:
        return given
    if stack_region() == region:
        return None
    return aws.Provider(f"{name}-aws", region=region, **(settings or {}), opts=pulumi.ResourceOptions(parent=parent))


def without_aws_provider(opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """``opts`` without an AWS ``provider`` (a resource of another package refuses one)."""
    kept = copy.copy(opts)
    if isinstance(kept.provider, pulumi.ProviderResource) and kept.provider.package == "aws":
        kept.provider = None
    return kept
