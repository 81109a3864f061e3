"""The nodeadm NodeConfig that AL2023 GPU nodes get as user data: the instance-store RAID0 array
and the ``FastImagePull`` feature gate.

nodeadm reads NodeConfig objects from the MIME parts of the user data and merges them in order
(awslabs.github.io/amazon-eks-ami/nodeadm, ``doc/examples.md`` "Merging multiple configuration
objects"). EKS merges a managed node group's MIME multipart user data with the NodeConfig it
generates for the cluster (docs.aws.amazon.com/eks/latest/userguide/launch-templates.html,
"Amazon Linux 2023 user data"), and Karpenter puts an EC2NodeClass's ``userData`` parts beside the
NodeConfig it generates (Karpenter 1.14 docs-nodeclasses.md, "AL2023"), so these parts carry only
the settings the project adds. The documents are built as data and dumped, never written as text.
"""

from __future__ import annotations

import base64
from email import encoders, policy
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from typing import Any, Optional

import yaml

from ..config.image_pull import FAST_IMAGE_PULL_GATE

NODE_CONFIG_CONTENT_TYPE = "application/node.eks.aws"
"""MIME type of a NodeConfig part in user data (awslabs.github.io/amazon-eks-ami/nodeadm: the
configuration "embedded within a MIME multi-part document", parts merged in order)."""

NODE_CONFIG_API_VERSION = "node.eks.aws/v1alpha1"
"""API version of nodeadm's NodeConfig."""

MIME_BOUNDARY = "==EKS-GPU-TRAINING-NODECONFIG=="
"""A fixed boundary: a random one would make new user data, a new launch template version and a
rolling replacement of every node at each `pulumi up`."""

RAID0 = "RAID0"
"""nodeadm's ``LocalStorageStrategy`` that makes one array of the instance-store disks."""


def node_config(local_storage_strategy: Optional[str] = RAID0, fast_image_pull: bool = False) -> dict[str, Any]:
    """The NodeConfig object: ``spec.instance.localStorage.strategy`` (nodeadm API
    ``LocalStorageOptions``: one array of the instance-store disks, mounted where kubelet, containerd
    and the SOCI snapshotter keep their state, so pods' ephemeral storage and the image cache live on
    NVMe) and ``spec.featureGates.FastImagePull`` (nodeadm API ``Feature``: containerd pulls through
    the SOCI snapshotter in parallel pull and unpack mode; ``config.image_pull`` says when it is
    allowed)."""
    spec: dict[str, Any] = {}
    if fast_image_pull:
        spec["featureGates"] = {FAST_IMAGE_PULL_GATE: True}
    if local_storage_strategy is not None:
        spec["instance"] = {"localStorage": {"strategy": local_storage_strategy}}
    return {"apiVersion": NODE_CONFIG_API_VERSION, "kind": "NodeConfig", "spec": spec}


def node_config_user_data(local_storage_strategy: Optional[str] = RAID0, fast_image_pull: bool = False) -> str:
    """User data that hands nodeadm the ``node_config`` object: a MIME multipart document with one
    NodeConfig part."""
    part = MIMENonMultipart(*NODE_CONFIG_CONTENT_TYPE.split("/"))
    part.set_payload(yaml.safe_dump(node_config(local_storage_strategy, fast_image_pull), sort_keys=False))
    # nodeadm reads the part's body as YAML text: plain 7-bit, no base64 transfer encoding.
    encoders.encode_7or8bit(part)
    document = MIMEMultipart("mixed", boundary=MIME_BOUNDARY)
    document.attach(part)
    return document.as_string(policy=policy.SMTP.clone(linesep="\n"))


def node_config_launch_settings(ami_type: str, raid0: bool, fast_image_pull: bool = False) -> dict[str, str]:
    """Launch-template settings of a managed GPU pool for nodeadm: the NodeConfig as (base64) user
    data on Amazon Linux 2023 AMIs when the pool makes an instance-store array or turns on
    ``FastImagePull``; nothing on Bottlerocket, whose user data is TOML settings that nodeadm never
    reads (validation refuses ``fastImagePull`` there), or when neither is asked for."""
    if not ami_type.startswith("AL2023") or not (raid0 or fast_image_pull):
        return {}
    return {"user_data": _base64(node_config_user_data(RAID0 if raid0 else None, fast_image_pull))}


def _base64(user_data: str) -> str:
    return base64.b64encode(user_data.encode()).decode()


def node_config_settings(user_data: Optional[str]) -> Optional[tuple[bool, bool]]:
    """The ``(raid0, fast_image_pull)`` for which ``node_config_launch_settings`` makes the (base64)
    ``user_data`` of an AL2023 pool: ``(False, False)`` for none; None for user data it never makes
    (an older NodeConfig, or one written elsewhere)."""
    if not user_data:
        return False, False
    for raid0, fast_image_pull in ((True, False), (False, True), (True, True)):
        if _base64(node_config_user_data(RAID0 if raid0 else None, fast_image_pull)) == user_data:
            return raid0, fast_image_pull
    return None
