"""What every managed node group of this library launches with: IMDSv2 only with hop limit 1, an
encrypted gp3 root volume, and only stable tags on its instances.

A launch template change makes a new template version, and EKS rolls every node of a node group
whose launch template version changes (UpdateNodegroupVersion takes ``launchTemplate``). So the
template holds only what must be on the instances and is stable: stack tags stay on the AWS
resources themselves and never reach ``tag_specifications``, so adding a cost tag does not roll
GPU nodes. Tags that should be on instances are an explicit opt-in (``instanceTags``) documented to
roll the nodes.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi
import pulumi_aws as aws

from ..config.base import Tags, tag_map
from ..config.image_pull import GP3_THROUGHPUT_MIBPS

IMDS_HOP_LIMIT = 1
"""IMDSv2 response hop limit 1 keeps instance credentials away from pods (they get AWS access
through EKS Pod Identity instead); host-network daemons still reach IMDS."""


def image_volume_device(ami_type: str) -> str:
    """The block device that holds container images: Bottlerocket keeps them on its data volume
    (``/dev/xvdb``), Amazon Linux on the root volume (``/dev/xvda``)."""
    return "/dev/xvdb" if ami_type.startswith("BOTTLEROCKET") else "/dev/xvda"


def instance_tag_specifications(instance_name: pulumi.Input[str], instance_tags: Mapping[str, pulumi.Input[str]]) -> list[dict[str, Any]]:
    """Tags the launch template puts on instances and their volumes: ``Name`` (stable: cluster and
    pool) and the tags a pool opted into, never the stack's tags."""
    tags = {**instance_tags, "Name": instance_name}
    return [{"resource_type": "instance", "tags": tags}, {"resource_type": "volume", "tags": tags}]


def launch_template_data(
    *,
    description: pulumi.Input[str],
    ami_type: str,
    volume_size_gib: int,
    instance_name: pulumi.Input[str],
    instance_tags: Mapping[str, pulumi.Input[str]],
    placement_group_name: Optional[pulumi.Input[str]] = None,
    **settings: Any,
) -> dict[str, Any]:
    """The template's version data, as ``aws.ec2.LaunchTemplate`` inputs: the settings every node of
    this library has, plus ``settings``, the pool's own (EFA network interfaces, capacity
    reservation, user data). A change to any of them makes a new template version (the provider
    calls CreateLaunchTemplateVersion when any of its template-data inputs, the description among
    them, changes), so the resource and the roll check (``node_group_rolls``) both take it from here."""
    return {
        "description": description,
        "block_device_mappings": [
            {
                "device_name": image_volume_device(ami_type),
                "ebs": {
                    "volume_size": volume_size_gib,
                    "volume_type": "gp3",
                    "throughput": GP3_THROUGHPUT_MIBPS,
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": IMDS_HOP_LIMIT,
        },
        "placement": {"group_name": placement_group_name} if placement_group_name is not None else None,
        "tag_specifications": instance_tag_specifications(instance_name, instance_tags),
        **settings,
    }


def node_launch_template(
    resource_name: str,
    data: Mapping[str, Any],
    *,
    tags: Tags,
    parent: pulumi.Resource,
    region: str,
) -> aws.ec2.LaunchTemplate:
    """A launch template in ``region`` holding ``data`` (``launch_template_data``), each new version
    its default. ``tags`` go on the template itself, never into its data, so they make no version."""
    return aws.ec2.LaunchTemplate(
        resource_name,
        **data,
        update_default_version=True,
        tags=tag_map(tags),
        region=region,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def launch_template_ref(template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroupLaunchTemplateArgs:
    """The node group's reference to a launch template: its latest version, so a template change
    rolls the nodes through UpdateNodegroupVersion instead of replacing the node group."""
    return aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str))
