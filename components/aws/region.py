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


def cluster_aws_provider(name: str, region: str, parent: pulumi.Resource) -> Optional[pulumi.ProviderResource]:
    """The AWS provider a ``pulumi_eks.Cluster`` in ``region`` under ``parent`` is created with: the
    one ``parent`` passes on (from its ``opts`` or its own parent) if any; none (the stack's default)
    when the stack's ``aws:region`` is ``region``; otherwise a provider ``<name>-aws`` for ``region``,
    which, like the default provider, takes its credentials from the environment (pass your own in
    ``opts`` to set a profile or role)."""
    given = aws_provider_of(resource=parent)
    if given is not None:
        return given
    if stack_region() == region:
        return None
    return aws.Provider(f"{name}-aws", region=region, opts=pulumi.ResourceOptions(parent=parent))


def without_aws_provider(opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """``opts`` without an AWS ``provider`` (a resource of another package refuses one)."""
    kept = copy.copy(opts)
    if isinstance(kept.provider, pulumi.ProviderResource) and kept.provider.package == "aws":
        kept.provider = None
    return kept
