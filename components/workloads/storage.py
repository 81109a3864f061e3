"""Kubernetes side of the training storage: a statically provisioned FSx for Lustre volume in
every training namespace, how training pods mount it, and what they request of the nodes'
instance-store RAID0.

Static provisioning (FSx CSI driver, examples/kubernetes/static_provisioning): the stack made the
file system, so each namespace gets a PersistentVolume naming it by ID, DNS name and mount name,
pre-bound through ``claimRef`` to one PersistentVolumeClaim there, so no other claim can take it.
The PersistentVolume's reclaim policy is Retain: deleting a claim or a namespace never touches the
data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from ..aws.cluster import ClusterInput, optional_cluster_field
from ..config.arguments import check_model_fields
from ..config.documented import component_args, documented_args, documented_component, with_cluster_provider
from ..aws.storage import FSX_CSI_DRIVER, LustreVolume
from ..config import GpuTrainingPlatformArgs
from ..facts.instance_store import ephemeral_storage_request

FSX_CLAIM = "fsx-lustre"
"""Name of the claim in each training namespace (and the pod volume that mounts it)."""

LUSTRE_MOUNT_OPTIONS = ("flock",)
"""Cluster-wide coherent file locks, which checkpoint writers and dataset caches rely on (the FSx
CSI driver's static-provisioning example mounts with them)."""

CLAIM_REQUEST_GIB = 1200
"""What each namespace's claim requests: FSx for Lustre's smallest file system, never its actual size.
A claim binds to a volume whose capacity is at least its request (Kubernetes docs, "Persistent
Volumes", Binding: "the bound volume may be in excess of what was requested"), so the pre-bound
volume satisfies it at any size. Tied to the file system's size, a growth would change the claim's
``spec.resources.requests``, which pulumi-kubernetes sends as an update of the claim, not a
replacement (pulumi-kubernetes #1665, fixed by #1705), and the API server refuses it: only a
dynamically provisioned claim whose storage class allows expansion may grow, and no claim may shrink.
The update would fail on every ``pulumi up``. Fixed, a growth changes the file system and the
volumes' capacity only; and since a claim made at another size (by an earlier version of this
stack) would fail the same way, the claim ignores changes to ``spec.resources``."""

CLAIM_IGNORED_CHANGES = ("spec.resources",)
"""What Pulumi never updates on a claim: its request, which the API server refuses to change on a
statically bound claim (``CLAIM_REQUEST_GIB``)."""

STACK_CLAIMS_WITH_FSX = 1
"""Claims the stack itself makes in each training namespace when FSx is on; the quota's
``persistentvolumeclaims`` gets them on top of the users' own."""


def persistent_volume_name(namespace: str) -> str:
    """The PersistentVolume of a namespace's claim (PersistentVolumes are cluster-scoped)."""
    return f"{namespace}-{FSX_CLAIM}"


def lustre_persistent_volume(namespace: str, volume: LustreVolume) -> dict[str, Any]:
    """A ReadWriteMany PersistentVolume of the whole file system, bound in advance to the namespace's claim."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": persistent_volume_name(namespace)},
        "spec": {
            "capacity": {"storage": f"{volume.capacity_gib}Gi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(LUSTRE_MOUNT_OPTIONS),
            "claimRef": {"namespace": namespace, "name": FSX_CLAIM},
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": volume.file_system_id,
                "volumeAttributes": {"dnsname": volume.dns_name, "mountname": volume.mount_name},
            },
        },
    }


def lustre_claim(namespace: str) -> dict[str, Any]:
    """The namespace's claim on its PersistentVolume (no storage class: static binding only); its
    request is ``CLAIM_REQUEST_GIB`` whatever the file system's size."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": FSX_CLAIM, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": persistent_volume_name(namespace),
            "resources": {"requests": {"storage": f"{CLAIM_REQUEST_GIB}Gi"}},
        },
    }


def stack_claims(args: GpuTrainingPlatformArgs) -> int:
    """Claims the stack makes in each training namespace."""
    return STACK_CLAIMS_WITH_FSX if args.storage.fsx.enabled else 0


def training_storage_fields(args: GpuTrainingPlatformArgs, instance_types: Sequence[str]) -> dict[str, Any]:
    """The storage fields of a ``TrainingJobSpec``: the FSx claim and its mount path, and an
    ephemeral-storage request sized to the nodes' instance-store RAID0."""
    fields: dict[str, Any] = {}
    if args.storage.fsx.enabled:
        fields.update(shared_volume_claim=FSX_CLAIM, shared_volume_mount_path=args.storage.fsx.mount_path)
    if args.storage.instance_store == "raid0":
        fields["ephemeral_storage"] = ephemeral_storage_request(instance_types)
    return fields


@documented_args
@dataclass
class TrainingStorageArgs:
    """Arguments of ``TrainingStorage``."""

    volume: LustreVolume
    """The file system (``LustreStorage.volume``)."""
    namespaces: Sequence[str]
    """Training namespaces that each get a claim."""
    depends_on: Sequence[pulumi.Resource] = ()
    """What must exist first: the namespaces and the CSI driver. Default: nothing."""
    cluster: Optional[ClusterInput] = None
    """The cluster whose Kubernetes provider the objects go on (a ``ClusterRef``, ``EksCluster`` or
    ``pulumi_eks.Cluster``); default: the Kubernetes provider in ``opts``."""

    def __post_init__(self) -> None:
        check_model_fields(self, optional_cluster_field(self))


@documented_component(TrainingStorageArgs)
class TrainingStorage(pulumi.ComponentResource):
    """A PersistentVolume and its claim in each training namespace. Give it the ``cluster`` (or its Kubernetes provider in ``opts``)."""

    claim_name: pulumi.Output[str]
    """The claim's name, the same in every namespace."""

    def __init__(self, name: str, args: Optional[TrainingStorageArgs] = None, opts: Optional[pulumi.ResourceOptions] = None, **fields: Any):
        args = component_args(TrainingStorageArgs, "TrainingStorage", name, args, fields)
        opts = with_cluster_provider(opts, args.cluster, f"TrainingStorage({name})")
        super().__init__("eks-gpu-training:index:TrainingStorage", name, None, opts)
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        for namespace in args.namespaces:
            volume_body = lustre_persistent_volume(namespace, args.volume)
            volume = k8s.core.v1.PersistentVolume(
                f"{name}-{namespace}-volume", metadata=volume_body["metadata"], spec=volume_body["spec"], opts=after
            )
            claim_body = lustre_claim(namespace)
            k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{namespace}-claim",
                metadata=claim_body["metadata"],
                spec=claim_body["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[*args.depends_on, volume], ignore_changes=list(CLAIM_IGNORED_CHANGES)
                ),
            )
        self.claim_name = pulumi.Output.from_input(FSX_CLAIM)
        self.register_outputs({"claimName": self.claim_name})
