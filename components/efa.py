"""The EFA security group every EFA-enabled GPU pool needs, managed node group or Karpenter pool alike."""

from __future__ import annotations

from typing import Mapping

import pulumi
import pulumi_aws as aws

from .cluster import ClusterRef


def efa_security_group(name: str, ref: ClusterRef, tags: Mapping[str, str], parent: pulumi.Resource) -> aws.ec2.SecurityGroup:
    """A security group named ``{name}-efa`` that lets EFA traffic flow between a pool's nodes: EFA
    needs all traffic allowed to and from the group itself (OS-bypass traffic is not IP-filtered)."""
    group = aws.ec2.SecurityGroup(
        f"{name}-efa",
        vpc_id=ref.vpc_id,
        description=f"EFA traffic between GPU nodes of {ref.name}",
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.vpc.SecurityGroupIngressRule(
        f"{name}-efa-ingress-self",
        security_group_id=group.id,
        referenced_security_group_id=group.id,
        ip_protocol="-1",
        description="EFA: all traffic from the group itself",
        opts=pulumi.ResourceOptions(parent=group),
    )
    aws.vpc.SecurityGroupEgressRule(
        f"{name}-efa-egress-self",
        security_group_id=group.id,
        referenced_security_group_id=group.id,
        ip_protocol="-1",
        description="EFA: all traffic to the group itself",
        opts=pulumi.ResourceOptions(parent=group),
    )
    return group
